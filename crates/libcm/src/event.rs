//! What the application is told: [`CmEvent`], the papers' callbacks as
//! values, and how the core's events and the daemon's messages become one.

use cm_core::{Bytes, Event, FlowId, PathEstimate};
use cm_ipc::ErrorCode;

/// Something the application is told (the papers' callbacks).
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub enum CmEvent {
    /// `cmapp_send`: the flow may send up to `bytes` now; answer with
    /// [`crate::Cm::notify`] (0 declines).
    Send {
        /// The flow.
        flow: FlowId,
        /// Bytes granted (one MTU, or up to k for a k-MTU request).
        bytes: Bytes,
    },
    /// `cmapp_update`: the flow's rate or RTT crossed its thresholds.
    Update {
        /// The flow.
        flow: FlowId,
        /// The new estimate.
        estimate: PathEstimate,
    },
    /// A grant was not answered in time and was withdrawn.
    GrantExpired {
        /// The flow.
        flow: FlowId,
        /// Bytes withdrawn.
        bytes: Bytes,
    },
    /// The flow was closed by the CM.
    FlowReclaimed {
        /// The flow.
        flow: FlowId,
    },
    /// The daemon refused an earlier fire-and-forget call on this flow.
    Error {
        /// The flow (or id 0).
        flow: FlowId,
        /// Why.
        code: ErrorCode,
    },
    /// A daemon-mode handle moved to another CM: to an embedded one when
    /// the daemon went away, back to a daemon when one listens again
    /// ([`crate::Cm::status`]).
    Status {
        /// The CM it runs on now.
        status: Status,
    },
}

/// Which CM a [`crate::Cm`] runs on now (see [`crate::Cm::status`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// An embedded CM by choice ([`crate::Cm::embedded`]).
    Embedded,
    /// The host's daemon.
    Daemon,
    /// An embedded CM standing in for a daemon that went away; libcm
    /// reconnects when one listens again.
    Fallback,
}

impl CmEvent {
    /// The flow the event is about (`None` for [`CmEvent::Status`]).
    pub fn flow(&self) -> Option<FlowId> {
        match *self {
            CmEvent::Send { flow, .. }
            | CmEvent::Update { flow, .. }
            | CmEvent::GrantExpired { flow, .. }
            | CmEvent::FlowReclaimed { flow }
            | CmEvent::Error { flow, .. } => Some(flow),
            CmEvent::Status { .. } => None,
        }
    }

    /// The event with the application's flow id (`to_app`: the CM's ids
    /// to the application's, empty before any move).
    pub(crate) fn to_app(self, to_app: &cm_core::idhash::IdMap<FlowId, FlowId>) -> CmEvent {
        if to_app.is_empty() {
            return self;
        }
        self.with_flow(|f| to_app.get(&f).copied().unwrap_or(f))
    }

    /// The same event with its flow id mapped by `f`.
    pub(crate) fn with_flow(self, f: impl FnOnce(FlowId) -> FlowId) -> CmEvent {
        match self {
            CmEvent::Send { flow, bytes } => CmEvent::Send {
                flow: f(flow),
                bytes,
            },
            CmEvent::Update { flow, estimate } => CmEvent::Update {
                flow: f(flow),
                estimate,
            },
            CmEvent::GrantExpired { flow, bytes } => CmEvent::GrantExpired {
                flow: f(flow),
                bytes,
            },
            CmEvent::FlowReclaimed { flow } => CmEvent::FlowReclaimed { flow: f(flow) },
            CmEvent::Error { flow, code } => CmEvent::Error {
                flow: f(flow),
                code,
            },
            s @ CmEvent::Status { .. } => s,
        }
    }

    /// A core event as the application sees it (embedded mode).
    pub(crate) fn from_core(ev: Event) -> Option<CmEvent> {
        Some(match ev {
            Event::Grant { flow, bytes } => CmEvent::Send { flow, bytes },
            Event::RateUpdate { flow, estimate } => CmEvent::Update { flow, estimate },
            Event::GrantExpired { flow, bytes } => CmEvent::GrantExpired { flow, bytes },
            Event::FlowReclaimed { flow, .. } => CmEvent::FlowReclaimed { flow },
            _ => return None,
        })
    }

    /// A daemon message as the application sees it (replies to calls are
    /// not events and give `None`).
    pub(crate) fn from_wire(m: &cm_ipc::ToClient) -> Option<CmEvent> {
        use cm_ipc::ToClient as T;
        Some(match *m {
            T::Grant { flow, bytes } => CmEvent::Send {
                flow: FlowId::from_u64(flow),
                bytes: Bytes(bytes),
            },
            T::RateUpdate { flow, estimate } => CmEvent::Update {
                flow: FlowId::from_u64(flow),
                estimate: estimate.into(),
            },
            T::GrantExpired { flow, bytes } => CmEvent::GrantExpired {
                flow: FlowId::from_u64(flow),
                bytes: Bytes(bytes),
            },
            T::Error { seq: 0, flow, code } => CmEvent::Error {
                flow: FlowId::from_u64(flow),
                code,
            },
            _ => return None,
        })
    }
}
