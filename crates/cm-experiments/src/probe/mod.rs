//! Probe-driven CM hosts on the simulator: the CM protocol (`cm_proto`,
//! sigcomm1999 §4.2–4.3) between a sender CM and a receiver CM, for
//! applications that give the CM no feedback at all.
//!
//! [`ProbeSender`] is the sibling of [`crate::alf::AlfSender`]: one
//! `cm_core::CongestionManager`, exactly as the daemon runs it, and
//! always-backlogged request/callback applications that send one datagram
//! per grant (sigcomm1999 §3.1). Their receiver says nothing back; the
//! sender CM learns loss and RTT from its [`cm_proto::Endpoint`] instead:
//! the handshake (§4.3), probes every `srtt / probes_per_rtt` (§4.2.1), and
//! responses turned into `cm_update` feedback. [`ProbeReceiver`] runs the
//! receiver CM: it counts the data, detects loss from the CM header's
//! sequence numbers, and answers probes.
//!
//! Control packets (SYN, SYN-ACK, RST, PROBE, RESPONSE) travel the
//! simulated network as packets of their own, encoded as `cm_proto`
//! encodes them, `encoded length + 28` bytes (IP/UDP) on the wire; headed
//! data is `16 + payload + 28` bytes.
//!
//! # Modes
//!
//! - [`Mode::Header`]: data carries the CM header (Fig 10); the receiver
//!   declares losses from sequence-number gaps, and a report that carries
//!   losses is `LossMode::Transient` feedback. Data sent while the
//!   handshake runs goes bare (`on_send_bare`) and is reported delivered
//!   with the SYN-ACK, as `cm_proto` specifies.
//! - [`Mode::Headerless`] (§4.2.2, a receiving application that cannot
//!   take the header): the prober still negotiates (a receiver CM must be
//!   there to count and answer probes), and still accounts every datagram
//!   (`on_send`, so its probes carry the bytes sent before them), but the
//!   host *omits the header on the wire*: the receiver counts bare bytes
//!   per flow (`on_bare_data`, the driver identifying the flow as a socket
//!   pair would) and can detect no loss. The sender infers loss from each
//!   report's raw `interval` counts with [`cm_proto::undo::ReorderUndo`]
//!   (the paper's rule with undo) or [`cm_proto::undo::NaiveCount`] (every
//!   shortfall a loss): a decrease is a `Transient` update (after
//!   `checkpoint` when undo may follow), an undo calls `undo_reduction`,
//!   and a stored period that closes without undo `commit_reduction`s.
//!   The counts are bytes where §4.2.2 counts packets: every datagram is
//!   one MTU grant, so the comparisons (equal, fewer) are the same.
//!   A header-less application opens its flow only once the handshake has
//!   completed: bytes sent bare during the handshake are outside the
//!   prober's accounting (it reports them with the SYN-ACK), yet a
//!   receiver that counts bare bytes would count them too, and its
//!   cumulative count would then exceed what the prober knows was sent
//!   (a response `cm_proto` refuses as forged). Waiting one handshake
//!   round trip keeps both sides' counts over the same bytes.
//!
//! Flow tags: headed (accounted) data carries the app's tag, data sent
//! outside the prober's accounting (during the handshake) [`bare_tag`] of
//! it, control packets [`CONTROL`] towards the receiver and [`RESPONSES`]
//! back, so the engine's per-flow statistics give the true loss of the
//! data the prober accounts.

mod receiver;
mod sender;

pub use receiver::{ProbeReceiver, Received};
pub use sender::{ProbeApp, ProbeSender};

use cm_sim::{FlowTag, Payload};

/// IP + UDP header bytes added to every datagram on the wire.
pub const HEADERS: u32 = 28;
/// Tag of control packets towards the receiver CM (SYN, PROBE).
pub const CONTROL: FlowTag = FlowTag(0x4000_0000);
/// Tag of control packets back to the sender CM (SYN-ACK, RST, RESPONSE).
pub const RESPONSES: FlowTag = FlowTag(0xC000_0000);
/// Bit set in the tag of data sent outside the prober's accounting.
pub const BARE_BIT: u32 = 0x2000_0000;

/// The tag of `tag`'s data sent without the prober's accounting.
pub const fn bare_tag(tag: FlowTag) -> FlowTag {
    FlowTag(tag.0 | BARE_BIT)
}

/// How the sender's CM learns of loss.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Data carries the CM header; the receiver CM detects loss (§4.3).
    Header,
    /// No header on the wire; loss inferred from byte counts (§4.2.2).
    Headerless(Inference),
}

/// Header-less loss inference (sigcomm1999 §4.2.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Inference {
    /// The paper's rule with the undo of false reductions.
    Undo,
    /// Every report with fewer bytes received than sent is a loss.
    Naive,
}

impl Mode {
    /// Short name for tables.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Header => "header",
            Mode::Headerless(Inference::Undo) => "undo",
            Mode::Headerless(Inference::Naive) => "naive",
        }
    }
}

/// What travels in a probe-driven experiment.
#[derive(Clone, Debug)]
pub enum ProbePacket {
    /// A datagram of flow `flow` (the number in its CM header, or the
    /// socket pair that identifies it when it has none).
    Data {
        /// The flow.
        flow: u32,
        /// The CM header, when it carries one.
        header: Option<[u8; cm_proto::wire::HEADER_LEN]>,
        /// Application payload bytes.
        len: u32,
    },
    /// An encoded CM control datagram (to or from the CM port).
    Control(Vec<u8>),
    /// Cross traffic (not CM-controlled).
    Cross {
        /// Bytes on the wire.
        len: u32,
    },
}

impl Payload for ProbePacket {
    fn wire_len(&self) -> u32 {
        match self {
            ProbePacket::Data { header, len, .. } => {
                let h = header.map_or(0, |h| h.len() as u32);
                len + h + HEADERS
            }
            ProbePacket::Control(b) => u32::try_from(b.len()).unwrap_or(u32::MAX) + HEADERS,
            ProbePacket::Cross { len } => *len,
        }
    }
}
