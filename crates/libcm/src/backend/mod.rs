//! The two ways libcm reaches a congestion manager: in-process
//! ([`embedded`]) or through the daemon's control socket ([`daemon`]).
//! Both expose the same operations with the same semantics; [`crate::Cm`]
//! picks one.

pub(crate) mod daemon;
pub(crate) mod embedded;
mod link;

use cm_core::{Bytes, Event, FlowId};

use crate::CmEvent;

/// Convert a core event into what the application sees.
pub(crate) fn from_core(ev: Event) -> Option<CmEvent> {
    Some(match ev {
        Event::Grant { flow, bytes } => CmEvent::Send { flow, bytes },
        Event::RateUpdate { flow, estimate } => CmEvent::Update { flow, estimate },
        Event::GrantExpired { flow, bytes } => CmEvent::GrantExpired { flow, bytes },
        Event::FlowReclaimed { flow, .. } => CmEvent::FlowReclaimed { flow },
        _ => return None,
    })
}

/// Convert a daemon message into what the application sees (replies to
/// calls are not events and give `None`).
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
