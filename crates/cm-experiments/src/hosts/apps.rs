//! The CBR and layered-audio applications of a [`CmHost`](super::CmHost).

use cm_core::{FlowId, Instant, Thresholds};
use cm_sim::{FlowTag, NodeId};
use cm_transport::{AudioConfig, AudioSender, CbrSource};

/// A constant-bit-rate application (not congestion controlled).
#[derive(Clone, Copy, Debug)]
pub struct CbrSpec {
    /// Receiver host.
    pub dst: NodeId,
    /// Flow tag.
    pub tag: FlowTag,
    /// Payload rate, bit/s.
    pub rate_bps: u64,
    /// Payload bytes per packet.
    pub len: u32,
    /// First packet.
    pub start: Instant,
    /// No packet at or after this time.
    pub stop: Option<Instant>,
}

/// A layered audio application on the CM (sigcomm1999 §3.2.2).
#[derive(Clone, Debug)]
pub struct AudioSpec {
    /// Receiver host.
    pub dst: NodeId,
    /// Flow tag.
    pub tag: FlowTag,
    /// First packet.
    pub start: Instant,
    /// Encodings and packet size.
    pub config: AudioConfig,
    /// Rate-update thresholds given to `cm_thresh`.
    pub thresholds: Thresholds,
}

#[derive(Clone, Debug)]
pub(super) struct AudioApp {
    pub(super) spec: AudioSpec,
    pub(super) sender: Option<AudioSender>,
    pub(super) flow: Option<FlowId>,
}

#[derive(Clone, Debug)]
pub(super) struct CbrApp {
    pub(super) spec: CbrSpec,
    pub(super) source: CbrSource,
}
