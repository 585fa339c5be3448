//! Outputs of the core, polled by the driver (`poll_event`).

use crate::flow::PathEstimate;
use crate::id::{ClientId, FlowId};
use crate::units::Bytes;

/// Something the driver must act on.
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub enum Event {
    /// The flow may send up to `bytes` now (`cmapp_send`): one MTU for a
    /// plain request, up to k MTUs for a k-MTU request. Answer with
    /// `notify` (zero bytes declines the grant).
    Grant {
        /// The flow.
        flow: FlowId,
        /// Bytes granted.
        bytes: Bytes,
    },
    /// The flow's rate or RTT crossed its thresholds (`cmapp_update`).
    RateUpdate {
        /// The flow.
        flow: FlowId,
        /// The new estimate.
        estimate: PathEstimate,
    },
    /// A grant was not used within its lifetime and was withdrawn.
    GrantExpired {
        /// The flow.
        flow: FlowId,
        /// Bytes withdrawn.
        bytes: Bytes,
    },
    /// A vanished client's flow was closed by the CM.
    FlowReclaimed {
        /// The flow.
        flow: FlowId,
        /// Its client.
        client: ClientId,
    },
}
