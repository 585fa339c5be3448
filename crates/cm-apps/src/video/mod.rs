//! NACK-based scalable video streaming (iscc §VI): a server whose source
//! has a base layer of rate `b₀` and a fine-grained enhancement layer, so
//! it can send at any rate between `b₀` and its top rate, and a client
//! that asks again (NACKs) for lost base-layer packets and measures the
//! bottleneck from packet bunches.
//!
//! - **Rate**: the server's macroflow runs the controller it is given
//!   (AIMD, IIAD, TFRC or ISCC; [`cm_core::controller::ControllerConfig`])
//!   and sends at the rate the CM allows: at each grant a retransmission
//!   of a NACKed base packet, else the next base packet when one is due,
//!   else enhancement data ([`VideoServer`]).
//! - **Bunches** (iscc §VI-B): the server asks for its grants
//!   `burst` packets at a time and pauses one burst interval between
//!   bunches; every packet carries its place in the bunch
//!   ([`cm_core::bandwidth::BurstTag`]). The client's [`cm_core::BunchSampler`] takes
//!   one capacity sample per bunch, returns the samples with its reports,
//!   and the server hands them to `Cm::capacity_sample`, whose estimate
//!   ISCC runs on.
//! - **Feedback**: the data travels on CC-UDP's wire; the client
//!   acknowledges about once per RTT (its CC-UDP acks, from
//!   `cm_transport::ccudp::receiver::AckState`; the server's RTT travels
//!   in every packet, as in TFRC, RFC 5348 §6; the simulator's
//!   `scalability-t1` receivers report once per RTT too), and those acks
//!   are the server CM's `cm_update`s. Its [`Report`] datagram, sent at the same
//!   time, carries the NACKs and the capacity samples.
//! - **Playout**: base packet `i` is made at `start + i·interval` and must
//!   arrive within the playout delay; one that does not is a frozen
//!   picture (iscc §VI-C).

mod client;
mod server;

pub use client::{VideoClient, VideoClientConfig, VideoClientReport, VideoSecond};
pub use server::{VideoServer, VideoServerReport};

use std::time::Duration;

use cm_core::bandwidth::BurstTag;
use cm_core::controller::ControllerConfig;

/// The server's settings.
#[derive(Clone, Debug)]
pub struct VideoConfig {
    /// The base layer's rate, bit/s (iscc §VI-B: `b₀` = 14 kbit/s).
    pub base_bps: f64,
    /// The highest rate the source has (base plus all of the enhancement
    /// layer), bit/s.
    pub top_bps: f64,
    /// Packets per bunch (at least 3, iscc §VI-B).
    pub burst: u8,
    /// How long base packets may take to arrive before their picture
    /// freezes (the client's playout delay; NACKs stop after it).
    pub playout: Duration,
    /// How long the server streams.
    pub duration: Duration,
    /// The controller of the server's macroflow.
    pub controller: ControllerConfig,
    /// The client holds its feedback back for up to this long
    /// ([`VideoClientConfig::batch`]): the retransmission timeout stays
    /// above it.
    pub feedback_hold: Option<Duration>,
}

impl Default for VideoConfig {
    /// The paper's base layer (14 kbit/s), a 1.5 Mbit/s top, bunches of 3,
    /// the paper's 3 s startup delay, 60 s, ISCC(2) (iscc §VI).
    fn default() -> Self {
        VideoConfig {
            base_bps: 14_000.0,
            top_bps: 1_500_000.0,
            burst: 3,
            playout: Duration::from_secs(3),
            duration: Duration::from_secs(60),
            controller: "iscc:l=2".parse().unwrap_or_default(),
            feedback_hold: None,
        }
    }
}

impl VideoConfig {
    /// Why the settings cannot work, if they cannot.
    pub fn check(&self) -> Result<(), String> {
        if !(self.base_bps.is_finite() && self.base_bps >= 1_000.0) {
            return Err(format!(
                "base rate {} bit/s: give at least 1000",
                self.base_bps
            ));
        }
        if !(self.top_bps.is_finite() && self.top_bps >= self.base_bps) {
            return Err(format!(
                "top rate {} bit/s is below the base layer's {}",
                self.top_bps, self.base_bps
            ));
        }
        if self.burst < 3 {
            return Err(format!(
                "bunches of {} packets: a sample needs at least 3",
                self.burst
            ));
        }
        if self.duration.is_zero() || self.playout.is_zero() {
            return Err("the duration and the playout delay must be positive".into());
        }
        self.controller
            .validate()
            .map_err(|e| format!("controller {}: {e}", self.controller))
    }
}

/// What a packet carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Base-layer packet `i`, first transmission.
    Base(u32),
    /// Base-layer packet `i`, sent again after a NACK.
    Resent(u32),
    /// Enhancement-layer data.
    Enhancement,
}

/// Bytes of a video packet's header (inside the CC-UDP payload).
pub const PIECE_HEADER: usize = 35;
const PIECE_MAGIC: [u8; 4] = *b"NVD1";

/// One video packet's header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Piece {
    /// What it carries.
    pub kind: Kind,
    /// Base packets made so far (the client counts pictures up to it).
    pub made: u32,
    /// Its place in its bunch.
    pub tag: BurstTag,
    /// When base packet 0 was made, ns since the Unix epoch.
    pub start_ns: u64,
    /// Time between base packets, µs.
    pub interval_us: u32,
    /// The server's smoothed RTT, µs (0: none yet). The client reports
    /// about once per RTT, as a TFRC receiver does (RFC 5348 §6).
    pub rtt_us: u32,
}

impl Piece {
    /// The packet: header, then `data` zero bytes.
    pub fn encode(&self, data: usize) -> Vec<u8> {
        let mut b = vec![0u8; PIECE_HEADER + data];
        b[..4].copy_from_slice(&PIECE_MAGIC);
        let (kind, idx) = match self.kind {
            Kind::Base(i) => (0, i),
            Kind::Resent(i) => (1, i),
            Kind::Enhancement => (2, 0),
        };
        b[4] = kind;
        b[5..9].copy_from_slice(&idx.to_be_bytes());
        b[9..13].copy_from_slice(&self.made.to_be_bytes());
        b[13..17].copy_from_slice(&self.tag.burst.to_be_bytes());
        b[17] = self.tag.index;
        b[18] = self.tag.len;
        b[19..27].copy_from_slice(&self.start_ns.to_be_bytes());
        b[27..31].copy_from_slice(&self.interval_us.to_be_bytes());
        b[31..35].copy_from_slice(&self.rtt_us.to_be_bytes());
        b
    }

    /// The header of `b`, if it is a video packet (never panics).
    pub fn decode(b: &[u8]) -> Option<Piece> {
        if b.len() < PIECE_HEADER || b[..4] != PIECE_MAGIC {
            return None;
        }
        let u32_at = |i: usize| b[i..i + 4].try_into().ok().map(u32::from_be_bytes);
        let idx = u32_at(5)?;
        let kind = match b[4] {
            0 => Kind::Base(idx),
            1 => Kind::Resent(idx),
            2 => Kind::Enhancement,
            _ => return None,
        };
        let tag = BurstTag {
            burst: u32_at(13)?,
            index: b[17],
            len: b[18],
        };
        let p = Piece {
            kind,
            made: u32_at(9)?,
            tag,
            start_ns: u64::from_be_bytes(b[19..27].try_into().ok()?),
            interval_us: u32_at(27)?,
            rtt_us: u32_at(31)?,
        };
        (p.tag.index < p.tag.len && p.interval_us > 0).then_some(p)
    }
}

/// Most samples and most NACKs one [`Report`] carries.
pub const REPORT_MAX: usize = 32;
const REPORT_MAGIC: [u8; 4] = *b"NVR1";

/// The client's report, sent with its acknowledgement each period: base
/// packets to send again, and packet-bunch capacity samples.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// Capacity samples, bytes/s, oldest first.
    pub samples: Vec<u64>,
    /// Base packets missing and still before their deadline.
    pub nacks: Vec<u32>,
}

impl Report {
    /// The datagram (at most [`REPORT_MAX`] of each kept, the newest).
    pub fn encode(&self) -> Vec<u8> {
        let tail = |n: usize| n.saturating_sub(REPORT_MAX);
        let samples = &self.samples[tail(self.samples.len())..];
        let nacks = &self.nacks[..self.nacks.len().min(REPORT_MAX)];
        let mut b = Vec::with_capacity(6 + 8 * samples.len() + 4 * nacks.len());
        b.extend_from_slice(&REPORT_MAGIC);
        b.push(samples.len() as u8);
        b.push(nacks.len() as u8);
        for s in samples {
            b.extend_from_slice(&s.to_be_bytes());
        }
        for n in nacks {
            b.extend_from_slice(&n.to_be_bytes());
        }
        b
    }

    /// The report in `b`, if it is one (never panics).
    pub fn decode(b: &[u8]) -> Option<Report> {
        if b.len() < 6 || b[..4] != REPORT_MAGIC {
            return None;
        }
        let (ns, nn) = (usize::from(b[4]), usize::from(b[5]));
        if ns > REPORT_MAX || nn > REPORT_MAX || b.len() != 6 + 8 * ns + 4 * nn {
            return None;
        }
        let samples = (0..ns)
            .map(|i| b[6 + 8 * i..14 + 8 * i].try_into().map(u64::from_be_bytes))
            .collect::<Result<_, _>>()
            .ok()?;
        let at = 6 + 8 * ns;
        let nacks = (0..nn)
            .map(|i| {
                b[at + 4 * i..at + 4 + 4 * i]
                    .try_into()
                    .map(u32::from_be_bytes)
            })
            .collect::<Result<_, _>>()
            .ok()?;
        Some(Report { samples, nacks })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_and_reports_round_trip_and_garbage_is_refused() {
        let p = Piece {
            kind: Kind::Resent(7),
            made: 9,
            tag: BurstTag {
                burst: 3,
                index: 1,
                len: 3,
            },
            start_ns: 123,
            interval_us: 840_000,
            rtt_us: 100_000,
        };
        let b = p.encode(10);
        assert_eq!(b.len(), PIECE_HEADER + 10);
        assert_eq!(Piece::decode(&b), Some(p));
        assert_eq!(Piece::decode(&b[..PIECE_HEADER - 1]), None);
        let mut bad = b.clone();
        bad[4] = 9;
        assert_eq!(Piece::decode(&bad), None);
        let r = Report {
            samples: vec![190_000, 189_500],
            nacks: vec![4, 5],
        };
        let e = r.encode();
        assert_eq!(Report::decode(&e), Some(r));
        assert_eq!(Report::decode(&e[..e.len() - 1]), None);
        assert_eq!(Report::decode(b"NVR1\xff\x00"), None);
        let long = Report {
            samples: (0..40).collect(),
            nacks: (0..40).collect(),
        };
        let d = Report::decode(&long.encode()).unwrap();
        assert_eq!(d.samples, (8..40).collect::<Vec<_>>());
        assert_eq!(d.nacks, (0..32).collect::<Vec<_>>());
    }

    #[test]
    fn bad_settings_are_refused() {
        assert!(VideoConfig::default().check().is_ok());
        for bad in [
            VideoConfig {
                burst: 2,
                ..VideoConfig::default()
            },
            VideoConfig {
                top_bps: 1_000.0,
                ..VideoConfig::default()
            },
            VideoConfig {
                base_bps: f64::NAN,
                ..VideoConfig::default()
            },
            VideoConfig {
                duration: Duration::ZERO,
                ..VideoConfig::default()
            },
        ] {
            assert!(bad.check().is_err(), "{bad:?}");
        }
    }
}
