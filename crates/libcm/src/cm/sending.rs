//! Asking to send and saying what was sent: `cm_request`, the k-MTU
//! request, `cm_notify`, `cm_register_send` and their bulk forms
//! (cm-implementation-linux §2.1, §5; RFC 3124 §4.2).

use cm_core::{Bytes, FlowId};
use cm_ipc::ToDaemon;

use super::{Cm, SendCallback};
use crate::error::CmError;

impl Cm {
    /// `cm_request(flow)`: ask to send one MTU; a [`crate::CmEvent::Send`]
    /// follows when the macroflow's window, pacing and scheduler allow.
    pub fn request(&mut self, flow: FlowId) -> Result<(), CmError> {
        self.request_mtus(flow, 1)
    }

    /// The k-MTU request: one grant may then cover up to `k` MTUs.
    pub fn request_mtus(&mut self, flow: FlowId, k: u32) -> Result<(), CmError> {
        if k == 0 {
            return Err(CmError::Invalid("request of zero MTUs"));
        }
        self.check_request(flow, k)?;
        self.fire(
            flow,
            |core, now, flow| core.request_mtus(now, flow, k),
            |flow| ToDaemon::Request {
                flow: flow.to_u64(),
                k,
            },
        )?;
        self.note_request(flow);
        Ok(())
    }

    /// A request for `k` MTUs however many: as several k-MTU requests of
    /// at most the CM's limit ([`Cm::request_mtus`] refuses more), which
    /// the CM adds together. For senders whose run of data is larger than
    /// one request may be (a queue of datagrams, two GSO runs of TCP/CM).
    pub fn request_mtus_split(&mut self, flow: FlowId, k: u32) -> Result<(), CmError> {
        let most = self.request_limit().max(1);
        let mut left = k;
        while left > 0 {
            let n = left.min(most);
            self.request_mtus(flow, n)?;
            left -= n;
        }
        Ok(())
    }

    /// `cm_notify(flow, nsent)`: `nsent` bytes were sent on the flow (0
    /// declines the oldest grant).
    pub fn notify(&mut self, flow: FlowId, nsent: u64) -> Result<(), CmError> {
        self.check_flow(flow)?;
        self.fire(
            flow,
            |core, now, flow| core.notify(now, flow, Bytes(nsent)),
            |flow| ToDaemon::Notify {
                flow: flow.to_u64(),
                nsent,
            },
        )
    }

    /// `cm_register_send`: the function called for each grant during
    /// [`Cm::dispatch`] (the paper's `cmapp_send`).
    pub fn register_send(&mut self, cb: impl FnMut(&mut Cm, FlowId, Bytes) + 'static) {
        self.on_send = Some(Box::new(cb) as SendCallback);
    }

    /// `cm_bulk_request`: several requests in one call (one message to the
    /// daemon). Stops at the first error.
    pub fn bulk_request(&mut self, reqs: &[(FlowId, u32)]) -> Result<(), CmError> {
        self.batched(|cm| reqs.iter().try_for_each(|&(f, k)| cm.request_mtus(f, k)))
    }

    /// `cm_bulk_notify`: several notifications in one call.
    pub fn bulk_notify(&mut self, sent: &[(FlowId, u64)]) -> Result<(), CmError> {
        self.batched(|cm| sent.iter().try_for_each(|&(f, n)| cm.notify(f, n)))
    }
}
