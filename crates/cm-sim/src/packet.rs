//! Packets, their payloads, and node/link/flow identifiers.

use core::fmt;

use cm_core::Instant;

/// What a packet carries; the engine only needs its size on the wire.
pub trait Payload: Clone + fmt::Debug {
    /// Bytes this packet occupies on the wire (headers included).
    fn wire_len(&self) -> u32;
}

/// A payload that is only a length: for engine tests, benchmarks and cross traffic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RawPayload {
    /// Wire length in bytes.
    pub len: u32,
}

impl Payload for RawPayload {
    fn wire_len(&self) -> u32 {
        self.len
    }
}

/// A node (host or router) of the simulated network.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NodeId(pub u32);

/// A unidirectional link of the simulated network.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LinkId(pub u32);

/// A sender-chosen tag grouping packets for per-flow statistics.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FlowTag(pub u32);

impl NodeId {
    /// The id as a vector index.
    pub const fn index(self) -> usize {
        self.0 as usize
    }
}

impl LinkId {
    /// The id as a vector index.
    pub const fn index(self) -> usize {
        self.0 as usize
    }
}

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "n{}", self.0)
    }
}

impl fmt::Display for LinkId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "l{}", self.0)
    }
}

/// A packet in flight: header fields stamped by the engine plus the payload.
#[derive(Clone, Debug)]
pub struct Packet<P> {
    /// Unique per simulation, in send order.
    pub id: u64,
    /// Sending host.
    pub src: NodeId,
    /// Destination host.
    pub dst: NodeId,
    /// Sender-chosen flow tag.
    pub flow: FlowTag,
    /// When the sender handed it to the engine.
    pub sent_at: Instant,
    /// Transport payload.
    pub payload: P,
}

impl<P: Payload> Packet<P> {
    /// Bytes on the wire.
    #[inline]
    pub fn wire_len(&self) -> u32 {
        self.payload.wire_len()
    }
}
