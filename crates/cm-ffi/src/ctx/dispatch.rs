//! Delivering events to the C callbacks, one at a time with no lock held,
//! and the bookkeeping that keeps the papers' one-MTU `cmapp_send` exact.

use std::ffi::c_void;
use std::sync::MutexGuard;

use cm_core::{FlowId, PathEstimate};
use libcm::{CmError, CmEvent};

use super::{Ctx, DISPATCH_BATCH, SendCb, State, UpdateCb};
use crate::convert::{estimate_out, flow_out};
use crate::guard::Code;
use crate::{cm_ctx, cm_estimate, cm_flowid};

/// A grant delivered to the papers' `cmapp_send(flow)`, which can only mean
/// "one MTU": the core may grant several MTUs at once (coalesced requests),
/// so such a grant becomes one callback per MTU, and the application's
/// `cm_notify` calls for them are summed and given to the core as the one
/// answer to that grant once every callback has been answered.
#[derive(Clone, Copy, Debug)]
pub(super) struct Split {
    /// Callbacks of this grant not yet answered by `cm_notify`.
    pub(super) remaining: u32,
    /// Bytes notified so far for this grant.
    pub(super) sum: u64,
}

/// Something to hand to a C callback.
enum Delivery {
    Send(FlowId, u64),
    Update(FlowId, PathEstimate),
}

impl Ctx {
    /// Count a `cm_notify` against the flow's oldest split grant: the bytes
    /// to tell the core now, or `None` while that grant still has
    /// unanswered callbacks. Without a split grant, pass it through.
    pub(super) fn answer(st: &mut State, flow: FlowId, nsent: u64) -> Option<u64> {
        let Some(q) = st.splits.get_mut(&flow) else {
            return Some(nsent);
        };
        let Some(front) = q.front_mut() else {
            st.splits.remove(&flow);
            return Some(nsent);
        };
        front.sum = front.sum.saturating_add(nsent);
        front.remaining = front.remaining.saturating_sub(1);
        if front.remaining > 0 {
            return None;
        }
        let sum = front.sum;
        q.pop_front();
        if q.is_empty() {
            st.splits.remove(&flow);
        }
        Some(sum)
    }

    /// Deliver every ready event to the callbacks. Events the callbacks
    /// cause are delivered by the next dispatch. Returns how many callbacks
    /// were made.
    pub(crate) fn dispatch(&self, me: *mut cm_ctx) -> Result<usize, Code> {
        let (work, on_send, on_update) = {
            let mut st = self.lock();
            st.depth += 1;
            if st.depth == 1 {
                // Calls made by callbacks go to the daemon in one batch.
                st.cm.0.set_autoflush(false);
            }
            match Self::take_events(&mut st) {
                Ok(w) => (w, st.on_send, st.on_update),
                Err(e) => {
                    let _ = self.leave(st);
                    return Err(e.into());
                }
            }
        };
        let mut delivered = 0usize;
        for d in work {
            match d {
                Delivery::Send(flow, bytes) => {
                    if let (Some(cb), Ok(id)) = (on_send, flow_out(flow)) {
                        call_send(cb, me, id, bytes);
                        delivered += 1;
                    }
                }
                Delivery::Update(flow, est) => {
                    if let (Some(cb), Ok(id)) = (on_update, flow_out(flow)) {
                        call_update(cb, me, id, &estimate_out(&est));
                        delivered += 1;
                    }
                }
            }
        }
        let st = self.lock();
        self.leave(st)?;
        Ok(delivered)
    }

    /// Take the ready events out of the `Cm` and turn them into callbacks.
    fn take_events(st: &mut State) -> Result<Vec<Delivery>, CmError> {
        let mut evs: Vec<CmEvent> = st.pending.drain(..).collect();
        // libcm's dispatch clears the pollable descriptor; with no Rust
        // callbacks registered it leaves every event queued for this context.
        st.cm.0.dispatch()?;
        while evs.len() < DISPATCH_BATCH {
            match st.cm.0.poll_event()? {
                Some(ev) => evs.push(ev),
                None => break,
            }
        }
        let mut work = Vec::with_capacity(evs.len());
        for ev in evs {
            match ev {
                // A grant that was on its way when the application closed
                // the flow: no callback for a dead flow (its MTU is gone
                // with it, so there is nothing to split the grant by).
                CmEvent::Send { flow, .. } if st.cm.0.mtu(flow).is_err() => {}
                CmEvent::Send { flow, bytes } => match st.on_send {
                    Some(SendCb::Paper(_)) => {
                        let mtu = u64::from(st.cm.0.mtu(flow).unwrap_or(1).max(1));
                        let n = bytes.get().div_ceil(mtu).max(1);
                        let n = u32::try_from(n).unwrap_or(u32::MAX);
                        st.splits.entry(flow).or_default().push_back(Split {
                            remaining: n,
                            sum: 0,
                        });
                        for i in 0..u64::from(n) {
                            let part = bytes.get().saturating_sub(i * mtu).min(mtu);
                            work.push(Delivery::Send(flow, part));
                        }
                    }
                    Some(SendCb::Ctx(..)) => work.push(Delivery::Send(flow, bytes.get())),
                    // No callback: decline the grant so the macroflow's
                    // other flows are not held up (cm-implementation-linux
                    // §2.1.3, `cm_notify(flow, 0)`).
                    None => st.cm.0.notify(flow, 0)?,
                },
                CmEvent::Update { flow, estimate } if st.on_update.is_some() => {
                    work.push(Delivery::Update(flow, estimate));
                }
                CmEvent::GrantExpired { flow, bytes } => {
                    // The core withdrew a grant that was not answered in
                    // time (RFC 3124 §3). The papers' API has no callback
                    // for that, and the application may never have seen
                    // the grant (e.g. it was still on its way): ask again
                    // on its behalf so its request is not silently lost.
                    // An application that did send declines the extra
                    // grant with cm_notify(flow, 0).
                    if let Some(q) = st.splits.get_mut(&flow) {
                        q.pop_front();
                    }
                    let mtu = u64::from(st.cm.0.mtu(flow).unwrap_or(1).max(1));
                    // One-MTU requests, as the papers' cm_request makes.
                    for _ in 0..bytes.get().div_ceil(mtu).clamp(1, 1024) {
                        match st.cm.0.request(flow) {
                            Ok(()) => {}
                            Err(CmError::Core(cm_core::Error::UnknownFlow(_))) => break,
                            Err(e) => return Err(e),
                        }
                    }
                }
                // Reclaimed flows and late refusals have no callback in the
                // papers' API; the next call on such a flow reports it.
                _ => {}
            }
        }
        if st.fd_wanted {
            // Re-arm for what is left (readable at once if anything is).
            st.cm.0.pollable_fd()?;
        }
        Self::signal(st);
        Ok(work)
    }

    /// End a dispatch: the outermost one flushes the batched calls.
    fn leave(&self, mut st: MutexGuard<'_, State>) -> Result<(), Code> {
        st.depth = st.depth.saturating_sub(1);
        if st.depth == 0 {
            st.cm.0.set_autoflush(true);
            st.cm.0.flush()?;
            if st.fd_wanted {
                st.cm.0.pollable_fd()?;
            }
            Self::sweep(&mut st)?;
        }
        Ok(())
    }
}

pub(super) fn event_flow(e: &CmEvent) -> Option<FlowId> {
    match *e {
        CmEvent::Send { flow, .. }
        | CmEvent::Update { flow, .. }
        | CmEvent::GrantExpired { flow, .. }
        | CmEvent::FlowReclaimed { flow }
        | CmEvent::Error { flow, .. } => Some(flow),
        _ => None,
    }
}

fn call_send(cb: SendCb, me: *mut cm_ctx, flow: cm_flowid, bytes: u64) {
    match cb {
        // SAFETY: the application registered this function with the
        // documented type; no lock is held while it runs.
        SendCb::Paper(f) => unsafe { f(flow) },
        // SAFETY: as above; `me` is the context being dispatched, kept
        // alive by the caller's `Arc` for the duration of the call.
        SendCb::Ctx(f, user) => unsafe { f(me, flow, bytes, user as *mut c_void) },
    }
}

fn call_update(cb: UpdateCb, me: *mut cm_ctx, flow: cm_flowid, e: &cm_estimate) {
    match cb {
        // SAFETY: as in `call_send`.
        UpdateCb::Paper(f) => unsafe { f(flow, e.rate, e.srtt, e.rttvar, e.loss) },
        // SAFETY: as in `call_send`; `e` outlives the call.
        UpdateCb::Ctx(f, user) => unsafe { f(me, flow, e, user as *mut c_void) },
    }
}
