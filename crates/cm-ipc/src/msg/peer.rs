//! The CM protocol's view of a flow's peer, for `cm stat` (sigcomm1999
//! §4.3: is the receiver CM-enabled, and what do its probes say).

/// Whether the flow's peer runs a receiver CM.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PeerMode {
    /// Handshake running; data without the CM header.
    Handshaking,
    /// The peer answered: data carries the CM header, probes give feedback.
    Negotiated,
    /// No receiver CM: the application's own feedback.
    Fallback,
}

impl PeerMode {
    /// Wire value.
    pub fn to_u8(self) -> u8 {
        match self {
            PeerMode::Handshaking => 1,
            PeerMode::Negotiated => 2,
            PeerMode::Fallback => 3,
        }
    }

    /// From the wire value.
    pub fn from_u8(v: u8) -> Option<PeerMode> {
        Some(match v {
            1 => PeerMode::Handshaking,
            2 => PeerMode::Negotiated,
            3 => PeerMode::Fallback,
            _ => return None,
        })
    }

    /// Lower-case name for tables.
    pub fn as_str(self) -> &'static str {
        match self {
            PeerMode::Handshaking => "handshaking",
            PeerMode::Negotiated => "negotiated",
            PeerMode::Fallback => "fallback",
        }
    }
}

/// A flow's peer as its sender reports it ([`super::ToDaemon::SetPeer`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeerStat {
    /// Negotiated or not.
    pub mode: PeerMode,
    /// Smoothed RTT of probes, µs.
    pub probe_srtt_us: Option<u64>,
    /// Packets the receiver CM declared lost, per million sent.
    pub loss_ppm: Option<u64>,
    /// Probes sent.
    pub probes: u64,
    /// Responses accepted.
    pub responses: u64,
}
