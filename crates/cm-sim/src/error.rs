//! Typed errors for topology construction, host attachment and sending.

use crate::packet::NodeId;

/// Bad topology or attachment input.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TopologyError {
    /// A node id that the topology does not contain.
    #[error("unknown node {0}")]
    UnknownNode(NodeId),
    /// A link with zero bandwidth would never transmit.
    #[error("link {from}->{to} has zero bandwidth")]
    ZeroBandwidth {
        /// Link source.
        from: NodeId,
        /// Link destination.
        to: NodeId,
    },
    /// Random loss probability outside `[0, 1]` (or NaN).
    #[error("link {from}->{to} has loss probability outside [0, 1]")]
    InvalidLoss {
        /// Link source.
        from: NodeId,
        /// Link destination.
        to: NodeId,
    },
    /// A link from a node to itself.
    #[error("self-loop link at {0}")]
    SelfLoop(NodeId),
    /// Some host cannot reach another host (hosts do not forward).
    #[error("no route from {from} to {to}")]
    Unroutable {
        /// Source host.
        from: NodeId,
        /// Destination host.
        to: NodeId,
    },
    /// Attaching a host implementation to a router node.
    #[error("node {0} is a router, not a host")]
    NotAHost(NodeId),
    /// Attaching a second host implementation to the same node.
    #[error("node {0} already has a host attached")]
    HostAlreadyAttached(NodeId),
}

/// Why [`Ctx::send`](crate::Ctx::send) refused a packet.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SendError {
    /// The destination is not a node of the topology.
    #[error("unknown destination {0}")]
    UnknownNode(NodeId),
    /// No path leads from the sender to the destination.
    #[error("no route from {from} to {to}")]
    Unroutable {
        /// Sender.
        from: NodeId,
        /// Destination.
        to: NodeId,
    },
    /// The destination (or injecting source) is a router, not a host.
    #[error("node {0} is a router, not a host")]
    NotAHost(NodeId),
    /// A host sending to itself.
    #[error("host {0} sent a packet to itself")]
    SelfAddressed(NodeId),
}
