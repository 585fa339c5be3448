//! A CM context (`cm_ctx`): one [`libcm::Cm`] behind a mutex, the C
//! callbacks registered on it, and the operations both C layers (the
//! papers' implicit context and the explicit `cm_ctx_*` calls) share.
//!
//! Re-entrancy: callbacks are C functions that call back into this library
//! (`cmapp_send` typically calls `cm_notify` and `cm_request`). The mutex is
//! therefore never held while C code runs: [`Ctx::dispatch`] takes the ready
//! events out under the lock, releases it, and calls the callbacks one by
//! one; each call they make takes the lock again (see `dispatch`).

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::ffi::c_void;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::{Mutex, MutexGuard, PoisonError};

use cm_core::controller::ControllerConfig;
use cm_core::{Feedback, FlowId, MacroflowId, Rate, Thresholds};
use libcm::{Cm, CmError, CmEvent, Mode};

use crate::convert::{estimate_out, flow_out, macroflow_out};
use crate::guard::{Code, EINVAL, EMSGSIZE, EOPNOTSUPP};
use crate::poll::{PollSet, poll_fd};
use crate::{cm_ctx, cm_estimate, cm_flowid};

mod dispatch;

use dispatch::{Split, event_flow};

/// The papers' `cmapp_send(flow)`.
pub(crate) type PaperSend = unsafe extern "C" fn(cm_flowid);
/// The papers' `cmapp_update(flow, rate, srtt, rttvar, loss)`.
pub(crate) type PaperUpdate = unsafe extern "C" fn(cm_flowid, f64, f64, f64, f64);
/// `cmapp_send` of an explicit context: context, flow, bytes granted, user data.
pub(crate) type CtxSend = unsafe extern "C" fn(*mut cm_ctx, cm_flowid, u64, *mut c_void);
/// `cmapp_update` of an explicit context: context, flow, estimate, user data.
pub(crate) type CtxUpdate =
    unsafe extern "C" fn(*mut cm_ctx, cm_flowid, *const cm_estimate, *mut c_void);

/// A registered send callback.
#[derive(Clone, Copy)]
pub(crate) enum SendCb {
    Paper(PaperSend),
    /// The function and the user pointer (kept as an address).
    Ctx(CtxSend, usize),
}

/// A registered update callback.
#[derive(Clone, Copy)]
pub(crate) enum UpdateCb {
    Paper(PaperUpdate),
    Ctx(CtxUpdate, usize),
}

/// A [`Cm`] that may move between threads.
struct SendCm(Cm);

// SAFETY: `Cm` is `!Send` only because of its boxed Rust callbacks
// (`register_send` / `register_update` take non-`Send` closures). This crate
// never registers Rust callbacks on the `Cm` it wraps (C callbacks live in
// `State`, as plain function pointers), so those fields are always `None`;
// everything else in `Cm` (the core, descriptors, queues) is `Send`. Access
// is serialised by the mutex in `Ctx`.
unsafe impl Send for SendCm {}

/// At most this many events are taken per dispatch (the rest stay ready).
const DISPATCH_BATCH: usize = 4096;

pub(crate) struct State {
    cm: SendCm,
    /// Flows opened through this context and not closed.
    flows: BTreeSet<FlowId>,
    on_send: Option<SendCb>,
    on_update: Option<UpdateCb>,
    /// Context-wide `cm_thresh(down, up)`, applied to every flow.
    thresh: Option<Thresholds>,
    /// Events taken out of the `Cm` (by `wait`) and not yet delivered.
    pending: VecDeque<CmEvent>,
    /// Nesting depth of `dispatch` (callbacks may dispatch again).
    depth: u32,
    /// The application asked for the pollable descriptor: keep it armed.
    fd_wanted: bool,
    /// The descriptor given to the application (see [`Ctx::fd`]).
    poll_set: Option<PollSet>,
    /// Grants delivered to a papers'-style `cmapp_send` and not yet fully
    /// answered, oldest first, per flow (see [`Split`]).
    splits: HashMap<FlowId, VecDeque<Split>>,
}

/// One CM context.
pub(crate) struct Ctx {
    state: Mutex<State>,
}

impl Ctx {
    pub(crate) fn new(cm: Cm) -> Ctx {
        Ctx {
            state: Mutex::new(State {
                cm: SendCm(cm),
                flows: BTreeSet::new(),
                on_send: None,
                on_update: None,
                thresh: None,
                pending: VecDeque::new(),
                depth: 0,
                fd_wanted: false,
                poll_set: None,
                splits: HashMap::new(),
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A poisoned lock means a panic was caught inside a call; the Cm's
        // own state is still consistent between calls, so carry on.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Run `f` on the `Cm` (never call C from inside `f`).
    fn with<T>(&self, f: impl FnOnce(&mut Cm) -> Result<T, CmError>) -> Result<T, Code> {
        Ok(f(&mut self.lock().cm.0)?)
    }

    pub(crate) fn mode(&self) -> Mode {
        self.lock().cm.0.mode()
    }

    /// Which CM the context runs on now (`CM_STATUS_*`).
    pub(crate) fn status(&self) -> libcm::Status {
        self.lock().cm.0.status()
    }

    /// Whether a daemon-mode context moves to an embedded CM when the
    /// daemon goes away.
    pub(crate) fn set_failover(&self, on: bool) {
        self.lock().cm.0.set_failover(on);
    }

    /// Subscribe `flow` to rate updates per the context's settings.
    fn subscribe(st: &mut State, flow: FlowId) -> Result<(), CmError> {
        match st.thresh {
            Some(t) => st.cm.0.thresh(flow, t),
            None => st.cm.0.set_rate_updates(flow, true),
        }
    }

    pub(crate) fn open(&self, src: Option<SocketAddr>, dst: SocketAddr) -> Result<cm_flowid, Code> {
        let mut st = self.lock();
        let flow = st.cm.0.open(src, dst)?;
        let id = self.opened(&mut st, flow)?;
        Self::sweep(&mut st)?;
        Ok(id)
    }

    fn opened(&self, st: &mut State, flow: FlowId) -> Result<cm_flowid, Code> {
        st.flows.insert(flow);
        if st.on_update.is_some() {
            if let Err(e) = Self::subscribe(st, flow) {
                let _ = st.cm.0.close(flow);
                st.flows.remove(&flow);
                return Err(e.into());
            }
        }
        flow_out(flow)
    }

    pub(crate) fn open_buffered(
        &self,
        sock: UdpSocket,
        dst: SocketAddr,
    ) -> Result<cm_flowid, Code> {
        let mut st = self.lock();
        let flow = st.cm.0.open_buffered(sock, dst)?;
        let id = self.opened(&mut st, flow)?;
        Self::sweep(&mut st)?;
        Ok(id)
    }

    pub(crate) fn close(&self, flow: FlowId) -> Result<(), Code> {
        let mut st = self.lock();
        st.cm.0.close(flow)?;
        st.flows.remove(&flow);
        st.splits.remove(&flow);
        st.pending.retain(|e| event_flow(e) != Some(flow));
        Ok(())
    }

    pub(crate) fn mtu(&self, flow: FlowId) -> Result<u32, Code> {
        self.with_reply(|cm| cm.mtu(flow))
    }

    pub(crate) fn request(&self, flow: FlowId, k: u32) -> Result<(), Code> {
        self.with(|cm| cm.request_mtus(flow, k))
    }

    pub(crate) fn notify(&self, flow: FlowId, nsent: u64) -> Result<(), Code> {
        let mut st = self.lock();
        match Self::answer(&mut st, flow, nsent) {
            Some(n) => Ok(st.cm.0.notify(flow, n)?),
            None => Ok(()),
        }
    }

    pub(crate) fn update(&self, flow: FlowId, fb: Feedback) -> Result<(), Code> {
        self.with(|cm| cm.update(flow, fb))
    }

    pub(crate) fn query(&self, flow: FlowId) -> Result<cm_estimate, Code> {
        self.with_reply(|cm| cm.query(flow))
            .map(|e| estimate_out(&e))
    }

    pub(crate) fn getmacroflow(&self, flow: FlowId) -> Result<i64, Code> {
        macroflow_out(self.with_reply(|cm| cm.macroflow_of(flow))?)
    }

    pub(crate) fn setmacroflow(&self, mflow: i64, flow: FlowId) -> Result<i64, Code> {
        // RFC 3124 §4.4: -1 (any negative id here) asks for a new macroflow.
        let target = u64::try_from(mflow).ok().map(MacroflowId::from_u64);
        macroflow_out(self.with_reply(|cm| cm.set_macroflow(flow, target))?)
    }

    pub(crate) fn set_weight(&self, flow: FlowId, w: u32) -> Result<(), Code> {
        self.with(|cm| cm.set_weight(flow, w))
    }

    pub(crate) fn set_controller(&self, flow: FlowId, cfg: &ControllerConfig) -> Result<(), Code> {
        self.with_reply(|cm| cm.set_controller(flow, cfg))
    }

    pub(crate) fn set_capacity(&self, flow: FlowId, capacity: Option<Rate>) -> Result<(), Code> {
        self.with(|cm| cm.set_capacity(flow, capacity))
    }

    pub(crate) fn register_send(&self, cb: Option<SendCb>) {
        self.lock().on_send = cb;
    }

    /// Register (or with `None` remove) the update callback: every flow of
    /// the context, present and future, is subscribed while one is set.
    pub(crate) fn register_update(&self, cb: Option<UpdateCb>) -> Result<(), Code> {
        let mut st = self.lock();
        st.on_update = cb;
        let flows: Vec<FlowId> = st.flows.iter().copied().collect();
        for f in flows {
            match cb {
                Some(_) => Self::subscribe(&mut st, f)?,
                None => st.cm.0.set_rate_updates(f, false)?,
            }
        }
        Ok(())
    }

    /// Context-wide thresholds (the papers' `cm_thresh(down, up)`): apply to
    /// every flow now (if an update callback is registered) and later.
    pub(crate) fn thresh_all(&self, t: Thresholds) -> Result<(), Code> {
        let mut st = self.lock();
        st.thresh = Some(t);
        if st.on_update.is_some() {
            let flows: Vec<FlowId> = st.flows.iter().copied().collect();
            for f in flows {
                st.cm.0.thresh(f, t)?;
            }
        }
        Ok(())
    }

    /// Per-flow thresholds (RFC 3124's four factors); subscribes the flow.
    pub(crate) fn thresh_flow(&self, flow: FlowId, t: Thresholds) -> Result<(), Code> {
        self.with(|cm| cm.thresh(flow, t))
    }

    pub(crate) fn send(&self, flow: FlowId, data: &[u8]) -> Result<(), Code> {
        let mut st = self.lock();
        let mtu = st.cm.0.mtu(flow)?;
        if data.len() > mtu as usize {
            return Err(EMSGSIZE);
        }
        Ok(st.cm.0.send(flow, data)?)
    }

    pub(crate) fn bulk_request(&self, flows: &[FlowId]) -> Result<(), Code> {
        let reqs: Vec<(FlowId, u32)> = flows.iter().map(|&f| (f, 1)).collect();
        self.with(|cm| cm.bulk_request(&reqs))
    }

    pub(crate) fn bulk_notify(&self, sent: &[(FlowId, u64)]) -> Result<(), Code> {
        let mut st = self.lock();
        let fwd: Vec<(FlowId, u64)> = sent
            .iter()
            .filter_map(|&(f, n)| Self::answer(&mut st, f, n).map(|n| (f, n)))
            .collect();
        Ok(st.cm.0.bulk_notify(&fwd)?)
    }

    pub(crate) fn bulk_update(&self, fbs: &[(FlowId, Feedback)]) -> Result<(), Code> {
        self.with(|cm| cm.bulk_update(fbs))
    }

    pub(crate) fn bulk_query(&self, flows: &[FlowId]) -> Result<Vec<cm_estimate>, Code> {
        let ests = self.with_reply(|cm| cm.bulk_query(flows))?;
        Ok(ests.iter().map(estimate_out).collect())
    }

    /// The application's descriptor: an epoll set holding libcm's own
    /// pollable descriptor and an eventfd raised while events wait here.
    /// libcm's descriptor alone is not enough in daemon mode: a call that
    /// waits for a reply reads the grants that arrive meanwhile off the
    /// socket, and [`Ctx::sweep`] keeps them, so the socket no longer shows
    /// them.
    pub(crate) fn fd(&self) -> Result<i32, Code> {
        let mut st = self.lock();
        st.fd_wanted = true;
        let inner = st.cm.0.pollable_fd()?.as_raw_fd();
        if st.poll_set.is_none() {
            st.poll_set = Some(PollSet::new(inner)?);
        }
        Self::signal(&st);
        Ok(st.poll_set.as_ref().map_or(inner, |p| p.fd()))
    }

    /// Raise or clear the eventfd to match `pending`.
    fn signal(st: &State) {
        if let Some(p) = &st.poll_set {
            p.set(!st.pending.is_empty());
        }
    }

    /// Daemon mode: take out the events a reply-waiting call left in libcm's
    /// inbox (where no descriptor shows them) and raise the eventfd.
    fn sweep(st: &mut State) -> Result<(), CmError> {
        if st.cm.0.mode() == Mode::Daemon && st.depth == 0 {
            while let Some(ev) = st.cm.0.poll_event()? {
                st.pending.push_back(ev);
            }
        }
        Self::signal(st);
        Ok(())
    }

    /// Run a call that waits for a reply, then [`Ctx::sweep`].
    fn with_reply<T>(&self, f: impl FnOnce(&mut Cm) -> Result<T, CmError>) -> Result<T, Code> {
        let mut st = self.lock();
        let v = f(&mut st.cm.0)?;
        Self::sweep(&mut st)?;
        Ok(v)
    }

    /// SIGIO on libcm's descriptor: daemon mode only (the embedded CM's
    /// timerfd raises no SIGIO, so succeeding there would leave the
    /// application waiting for a signal that never comes).
    pub(crate) fn enable_sigio(&self) -> Result<(), Code> {
        let mut st = self.lock();
        if st.cm.0.mode() == Mode::Embedded {
            return Err(EOPNOTSUPP);
        }
        // SIGIO's default action ends the process: asking for it with no
        // handler installed would kill the application at the first grant.
        if !sigio_handled() {
            return Err(EINVAL);
        }
        st.fd_wanted = true;
        Ok(st.cm.0.enable_sigio()?)
    }

    /// Daemon mode: the longest wait for a reply (milliseconds, > 0).
    pub(crate) fn set_reply_timeout(&self, ms: i32) -> Result<(), Code> {
        let ms = u64::try_from(ms).map_err(|_| EINVAL)?;
        let mut st = self.lock();
        Ok(st
            .cm
            .0
            .set_reply_timeout(std::time::Duration::from_millis(ms))?)
    }

    /// Block until an event may be ready or `timeout_ms` passes (negative:
    /// no limit in daemon mode; embedded: until the CM's next timer). The
    /// lock is not held while blocking on the descriptor.
    pub(crate) fn wait(&self, timeout_ms: i32) -> Result<(), Code> {
        let fd = {
            let mut st = self.lock();
            if !st.pending.is_empty() {
                return Ok(());
            }
            if let Some(ev) = st.cm.0.poll_event()? {
                st.pending.push_back(ev);
                return Ok(());
            }
            if timeout_ms < 0 && st.cm.0.mode() == Mode::Embedded {
                // Nothing wakes an embedded CM but its own timers.
                st.cm.0.wait(None)?;
                return Ok(());
            }
            st.cm.0.pollable_fd()?.as_raw_fd()
        };
        poll_fd(fd, timeout_ms)
    }
}

/// Whether SIGIO is caught or ignored (not left to its default action,
/// which terminates the process).
fn sigio_handled() -> bool {
    // SAFETY: sigaction with a NULL new action only reads the current
    // disposition into `old`, a zeroed sigaction owned by this frame.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        if libc::sigaction(libc::SIGIO, std::ptr::null(), &raw mut old) != 0 {
            return false;
        }
        old.sa_sigaction != libc::SIG_DFL
    }
}
