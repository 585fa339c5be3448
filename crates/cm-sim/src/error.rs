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
    /// Reordering probability outside `[0, 1]` (or NaN), or a non-zero
    /// probability with a zero `reorder_delay` (which could not reorder).
    #[error(
        "link {from}->{to} has reorder probability outside [0, 1], or reorder > 0 with a zero reorder_delay"
    )]
    InvalidReorder {
        /// Link source.
        from: NodeId,
        /// Link destination.
        to: NodeId,
    },
    /// Duplication probability outside `[0, 1]` (or NaN).
    #[error("link {from}->{to} has duplicate probability outside [0, 1]")]
    InvalidDuplicate {
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

/// A node that must be a host is not: the shared check behind
/// [`SendError`] and [`TopologyError`]'s `UnknownNode` and `NotAHost`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum NotAHost {
    /// Not a node of the topology.
    Unknown(NodeId),
    /// A router.
    Router(NodeId),
}

impl From<NotAHost> for SendError {
    fn from(e: NotAHost) -> Self {
        match e {
            NotAHost::Unknown(n) => SendError::UnknownNode(n),
            NotAHost::Router(n) => SendError::NotAHost(n),
        }
    }
}

impl From<NotAHost> for TopologyError {
    fn from(e: NotAHost) -> Self {
        match e {
            NotAHost::Unknown(n) => TopologyError::UnknownNode(n),
            NotAHost::Router(n) => TopologyError::NotAHost(n),
        }
    }
}
