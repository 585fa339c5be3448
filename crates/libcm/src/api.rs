//! The flow operations of the API, one method per paper call, each
//! implemented for both backends with the same meaning.

use core::net::SocketAddr;

use cm_core::{Bytes, Feedback, FlowId, MacroflowId, OpenParams, PathEstimate, Thresholds};
use cm_ipc::{ToClient, ToDaemon};

use crate::error::CmError;
use crate::{Backend, Cm};

impl Cm {
    /// After a fire-and-forget call: send it now unless calls are being
    /// batched (inside a dispatch, or with autoflush off).
    pub(crate) fn after_call(&mut self) -> Result<(), CmError> {
        match &mut self.backend {
            Backend::Daemon(d) if self.autoflush && !self.dispatching => d.flush(),
            // Batching: send once enough calls have gathered.
            Backend::Daemon(d) if d.batch_full(self.batch_limit) => d.flush(),
            Backend::Daemon(_) => Ok(()),
            Backend::Embedded(e) => {
                e.pump(&mut self.events);
                if !self.dispatching {
                    e.rearm(!self.events.is_empty())?;
                }
                Ok(())
            }
        }
    }

    /// `cm_open(src, dst)`: a new flow to `dst`, in the macroflow of its
    /// destination host.
    pub fn open(&mut self, src: Option<SocketAddr>, dst: SocketAddr) -> Result<FlowId, CmError> {
        match &mut self.backend {
            Backend::Embedded(e) => {
                let now = e.now();
                let mut p = OpenParams::to(dst);
                p.src = src;
                Ok(e.core.open(now, e.client, p)?)
            }
            Backend::Daemon(d) => match d.call(|seq| ToDaemon::Open { seq, src, dst })? {
                ToClient::Opened { flow, .. } => Ok(FlowId::from_u64(flow)),
                _ => Err(CmError::Invalid("unexpected reply to open")),
            },
        }
    }

    /// `cm_mtu(flow)`: the largest grant unit on the flow's path.
    pub fn mtu(&mut self, flow: FlowId) -> Result<u32, CmError> {
        if let Some(&m) = self.mtus.get(&flow) {
            return Ok(m);
        }
        let m = match &mut self.backend {
            Backend::Embedded(e) => u32::try_from(e.core.mtu(flow)?.get()).unwrap_or(u32::MAX),
            Backend::Daemon(d) => match d.call(|seq| ToDaemon::Mtu {
                seq,
                flow: flow.to_u64(),
            })? {
                ToClient::Mtu { mtu, .. } => mtu,
                _ => return Err(CmError::Invalid("unexpected reply to mtu")),
            },
        };
        self.mtus.insert(flow, m);
        Ok(m)
    }

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
        match &mut self.backend {
            Backend::Embedded(e) => {
                let now = e.now();
                e.core.request_mtus(now, flow, k)?;
            }
            Backend::Daemon(d) => d.push(&ToDaemon::Request {
                flow: flow.to_u64(),
                k,
            })?,
        }
        self.after_call()
    }

    /// `cm_notify(flow, nsent)`: `nsent` bytes were sent on the flow (0
    /// declines the oldest grant).
    pub fn notify(&mut self, flow: FlowId, nsent: u64) -> Result<(), CmError> {
        match &mut self.backend {
            Backend::Embedded(e) => {
                let now = e.now();
                e.core.notify(now, flow, Bytes(nsent))?;
            }
            Backend::Daemon(d) => d.push(&ToDaemon::Notify {
                flow: flow.to_u64(),
                nsent,
            })?,
        }
        self.after_call()
    }

    /// `cm_update(flow, nsent, nrecd, lossmode, rtt)`: feedback from the
    /// receiver. `fb.nsent` bytes were resolved, `fb.nrecd` of them arrived.
    pub fn update(&mut self, flow: FlowId, fb: Feedback) -> Result<(), CmError> {
        if fb.nrecd > fb.nsent {
            return Err(CmError::Invalid("nrecd exceeds nsent"));
        }
        match &mut self.backend {
            Backend::Embedded(e) => {
                let now = e.now();
                e.core.update(now, flow, fb)?;
            }
            Backend::Daemon(d) => d.push(&ToDaemon::Update {
                flow: flow.to_u64(),
                nsent: fb.nsent.get(),
                nrecd: fb.nrecd.get(),
                loss: fb.loss,
                rtt_us: fb.rtt.map(cm_core::Duration::as_micros),
            })?,
        }
        self.after_call()
    }

    /// `cm_query(flow)`: the flow's share of the path's rate, the path's
    /// smoothed RTT and variation, and its loss rate; `None` fields have no
    /// estimate yet.
    pub fn query(&mut self, flow: FlowId) -> Result<PathEstimate, CmError> {
        match &mut self.backend {
            Backend::Embedded(e) => Ok(e.core.query(flow)?),
            Backend::Daemon(d) => match d.call(|seq| ToDaemon::Query {
                seq,
                flow: flow.to_u64(),
            })? {
                ToClient::Estimate { estimate, .. } => Ok(estimate.into()),
                _ => Err(CmError::Invalid("unexpected reply to query")),
            },
        }
    }

    /// `cm_register_update` for one flow: turn [`crate::CmEvent::Update`]
    /// notifications on (reporting the current estimate at once) or off.
    pub fn set_rate_updates(&mut self, flow: FlowId, on: bool) -> Result<(), CmError> {
        match &mut self.backend {
            Backend::Embedded(e) => {
                let now = e.now();
                e.core.set_rate_updates(now, flow, on)?;
            }
            Backend::Daemon(d) => d.push(&ToDaemon::RateUpdates {
                flow: flow.to_u64(),
                on,
            })?,
        }
        self.after_call()
    }

    /// `cm_thresh(down, up)`: report when the rate falls to 1/`rate_down`
    /// or rises to `rate_up` times the last report (likewise the RTT);
    /// subscribes the flow to updates.
    pub fn thresh(&mut self, flow: FlowId, t: Thresholds) -> Result<(), CmError> {
        t.validate()?;
        match &mut self.backend {
            Backend::Embedded(e) => {
                let now = e.now();
                e.core.set_thresholds(now, flow, t)?;
            }
            Backend::Daemon(d) => d.push(&ToDaemon::Thresh {
                flow: flow.to_u64(),
                rate_down: t.rate_down,
                rate_up: t.rate_up,
                rtt_down: t.rtt_down,
                rtt_up: t.rtt_up,
            })?,
        }
        self.after_call()
    }

    /// `cm_getmacroflow(flow)`.
    pub fn macroflow_of(&mut self, flow: FlowId) -> Result<MacroflowId, CmError> {
        match &mut self.backend {
            Backend::Embedded(e) => Ok(e.core.macroflow_of(flow)?),
            Backend::Daemon(d) => match d.call(|seq| ToDaemon::GetMacroflow {
                seq,
                flow: flow.to_u64(),
            })? {
                ToClient::Macroflow { id, .. } => Ok(MacroflowId::from_u64(id)),
                _ => Err(CmError::Invalid("unexpected reply to getmacroflow")),
            },
        }
    }

    /// `cm_setmacroflow(flow, target)`: move the flow into `target`, or into
    /// a macroflow of its own with `None`. Returns its macroflow.
    pub fn set_macroflow(
        &mut self,
        flow: FlowId,
        target: Option<MacroflowId>,
    ) -> Result<MacroflowId, CmError> {
        self.mtus.remove(&flow);
        match &mut self.backend {
            Backend::Embedded(e) => {
                let now = e.now();
                Ok(e.core.set_macroflow(now, flow, target)?)
            }
            Backend::Daemon(d) => match d.call(|seq| ToDaemon::SetMacroflow {
                seq,
                flow: flow.to_u64(),
                target: target.map(MacroflowId::to_u64),
            })? {
                ToClient::Macroflow { id, .. } => Ok(MacroflowId::from_u64(id)),
                _ => Err(CmError::Invalid("unexpected reply to setmacroflow")),
            },
        }
    }

    /// The flow's scheduler weight within its macroflow (1..=65535).
    pub fn set_weight(&mut self, flow: FlowId, weight: u32) -> Result<(), CmError> {
        match &mut self.backend {
            Backend::Embedded(e) => {
                let now = e.now();
                e.core.set_weight(now, flow, weight)?;
            }
            Backend::Daemon(d) => d.push(&ToDaemon::SetWeight {
                flow: flow.to_u64(),
                weight,
            })?,
        }
        self.after_call()
    }

    /// `cm_close(flow)`: the flow ends; its share goes to its siblings.
    pub fn close(&mut self, flow: FlowId) -> Result<(), CmError> {
        self.mtus.remove(&flow);
        self.buffered.remove(&flow);
        match &mut self.backend {
            Backend::Embedded(e) => {
                let now = e.now();
                e.core.close(now, flow)?;
            }
            Backend::Daemon(d) => d.push(&ToDaemon::Close {
                flow: flow.to_u64(),
            })?,
        }
        self.after_call()
    }

    // ---- bulk calls (cm-implementation-linux §5) -------------------------

    /// `cm_bulk_request`: several requests in one call (one message to the
    /// daemon). Stops at the first error.
    pub fn bulk_request(&mut self, reqs: &[(FlowId, u32)]) -> Result<(), CmError> {
        self.batched(|cm| reqs.iter().try_for_each(|&(f, k)| cm.request_mtus(f, k)))
    }

    /// `cm_bulk_notify`: several notifications in one call.
    pub fn bulk_notify(&mut self, sent: &[(FlowId, u64)]) -> Result<(), CmError> {
        self.batched(|cm| sent.iter().try_for_each(|&(f, n)| cm.notify(f, n)))
    }

    /// `cm_bulk_update`: several feedback reports in one call.
    pub fn bulk_update(&mut self, fbs: &[(FlowId, Feedback)]) -> Result<(), CmError> {
        self.batched(|cm| fbs.iter().try_for_each(|&(f, fb)| cm.update(f, fb)))
    }

    /// `cm_bulk_query`: the estimates of several flows in one round trip.
    pub fn bulk_query(&mut self, flows: &[FlowId]) -> Result<Vec<PathEstimate>, CmError> {
        match &mut self.backend {
            Backend::Embedded(e) => flows
                .iter()
                .map(|&f| e.core.query(f).map_err(CmError::from))
                .collect(),
            Backend::Daemon(d) => d
                .call_many(flows.len(), |i, seq| ToDaemon::Query {
                    seq,
                    flow: flows[i].to_u64(),
                })?
                .into_iter()
                .map(|r| match r {
                    ToClient::Estimate { estimate, .. } => Ok(estimate.into()),
                    ToClient::Error { code, .. } => Err(CmError::Daemon(code)),
                    _ => Err(CmError::Invalid("unexpected reply to query")),
                })
                .collect(),
        }
    }

    /// Run `f` with flushing deferred, then flush once.
    fn batched<T>(&mut self, f: impl FnOnce(&mut Cm) -> Result<T, CmError>) -> Result<T, CmError> {
        let was = self.autoflush;
        self.autoflush = false;
        let r = f(self);
        self.autoflush = was;
        let flushed = self.after_call();
        let v = r?;
        flushed?;
        Ok(v)
    }

    /// Daemon mode: with `false`, calls are gathered and sent to the daemon
    /// together once [`Cm::set_batch_limit`] of them wait, or when the
    /// application calls [`Cm::flush`], [`Cm::next_timeout`], [`Cm::wait`],
    /// [`Cm::pollable_fd`] or any call that returns a value. An
    /// application that sleeps on its own must call one of those first.
    /// With `true` (the default) every call outside a dispatch is sent at
    /// once, and calls made from callbacks go out at the end of the
    /// dispatch. Embedded mode has nothing to batch.
    pub fn set_autoflush(&mut self, on: bool) {
        self.autoflush = on;
    }

    /// How many calls may wait in a batch (with autoflush off) before they
    /// are sent (default 32; at least 1). A batch of fire-and-forget calls
    /// only (`notify`, `update`, ...) may grow 8 times larger before it is
    /// sent on its own, since the daemon answers none of them: it goes with
    /// the next request or call with a reply, or when the application is
    /// about to sleep, in the order the calls were made.
    pub fn set_batch_limit(&mut self, calls: usize) {
        self.batch_limit = calls.max(1);
    }

    /// Daemon mode: how long, before sleeping, libcm polls the daemon
    /// connection for the answer to calls it just sent (a grant for a
    /// request, a reply), yielding the CPU between polls: in
    /// [`Cm::next_timeout`] (which then returns zero if the answer came),
    /// [`Cm::wait`], and calls that wait for a reply. It spins at most once
    /// per batch sent, so at most this long per sleep, and adaptively: the
    /// spin doubles (up to this) while answers come within it and halves
    /// (down to 10 µs) while they come later or not at all, e.g. when the
    /// window is full. A thread that keeps polling is not put to sleep and
    /// woken again, which costs ~50 µs across CPUs (cm-ipc "Waiting: spin,
    /// then block"). Default 500 µs; zero never spins. Embedded mode never
    /// waits for an answer.
    pub fn set_spin(&mut self, spin: std::time::Duration) {
        if let Backend::Daemon(d) = &mut self.backend {
            d.spin = spin;
            d.spin_now = spin;
        }
    }

    /// Send batched calls to the daemon now (no-op in embedded mode).
    pub fn flush(&mut self) -> Result<(), CmError> {
        match &mut self.backend {
            Backend::Daemon(d) => d.flush(),
            Backend::Embedded(_) => Ok(()),
        }
    }
}
