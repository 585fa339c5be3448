//! A CM context (`cm_ctx`): one [`libcm::Cm`] behind a mutex, the C
//! callbacks registered on it, and the operations both C layers (the
//! papers' implicit context and the explicit `cm_ctx_*` calls) share.
//!
//! Re-entrancy: callbacks are C functions that call back into this library
//! (`cmapp_send` typically calls `cm_notify` and `cm_request`). The mutex is
//! therefore never held while C code runs: [`Ctx::dispatch`] takes the ready
//! events out under the lock, releases it, and calls the callbacks one by
//! one; each call they make takes the lock again.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::ffi::c_void;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::{Mutex, MutexGuard, PoisonError};

use cm_core::{Bytes, Duration, Feedback, FlowId, LossMode, MacroflowId, PathEstimate, Thresholds};
use libcm::{Cm, CmError, CmEvent, Mode};

use crate::guard::{Code, EINVAL, EMSGSIZE, EOVERFLOW};
use crate::{cm_ctx, cm_estimate, cm_flowid};

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
#[allow(unsafe_code)]
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

/// A grant delivered to the papers' `cmapp_send(flow)`, which can only mean
/// "one MTU": the core may grant several MTUs at once (coalesced requests),
/// so such a grant becomes one callback per MTU, and the application's
/// `cm_notify` calls for them are summed and given to the core as the one
/// answer to that grant once every callback has been answered.
#[derive(Clone, Copy, Debug)]
struct Split {
    /// Callbacks of this grant not yet answered by `cm_notify`.
    remaining: u32,
    /// Bytes notified so far for this grant.
    sum: u64,
}

/// Something to hand to a C callback.
enum Delivery {
    Send(FlowId, u64),
    Update(FlowId, PathEstimate),
}

/// One CM context.
pub(crate) struct Ctx {
    state: Mutex<State>,
}

/// A flow id from C: negative ids are invalid.
pub(crate) fn flow_id(f: cm_flowid) -> Result<FlowId, Code> {
    u64::try_from(f).map(FlowId::from_u64).map_err(|_| EINVAL)
}

fn flow_out(f: FlowId) -> Result<cm_flowid, Code> {
    i64::try_from(f.to_u64()).map_err(|_| EOVERFLOW)
}

fn macroflow_out(m: MacroflowId) -> Result<i64, Code> {
    i64::try_from(m.to_u64()).map_err(|_| EOVERFLOW)
}

/// A byte count from C: negative counts are invalid.
pub(crate) fn bytes_in(n: i64) -> Result<u64, Code> {
    u64::try_from(n).map_err(|_| EINVAL)
}

/// Seconds (double) to the core's microseconds; `<= 0` is "no sample".
pub(crate) fn rtt_in(rtt: f64) -> Result<Option<Duration>, Code> {
    if !rtt.is_finite() {
        return Err(EINVAL);
    }
    if rtt <= 0.0 {
        return Ok(None);
    }
    let us = (rtt * 1e6).round();
    if us >= u64::MAX as f64 {
        return Err(EINVAL);
    }
    // In range and non-negative: the cast is exact up to rounding.
    Ok(Some(Duration::from_micros((us as u64).max(1))))
}

/// The C loss-mode constant to the core's.
pub(crate) fn loss_in(mode: i32) -> Result<LossMode, Code> {
    Ok(match mode {
        crate::CM_LOSS_NONE => LossMode::None,
        crate::CM_LOSS_FEEDBACK => LossMode::Transient,
        crate::CM_NO_FEEDBACK => LossMode::Persistent,
        crate::CM_EXPLICIT_CONGESTION => LossMode::Ecn,
        crate::CM_NO_CONGESTION => LossMode::NotCongestion,
        _ => return Err(EINVAL),
    })
}

/// A feedback report from C's `cm_update` arguments.
pub(crate) fn feedback(nsent: i64, nrecd: i64, lossmode: i32, rtt: f64) -> Result<Feedback, Code> {
    let (nsent, nrecd) = (bytes_in(nsent)?, bytes_in(nrecd)?);
    if nrecd > nsent {
        return Err(EINVAL);
    }
    Ok(Feedback {
        nsent: Bytes(nsent),
        nrecd: Bytes(nrecd),
        loss: loss_in(lossmode)?,
        rtt: rtt_in(rtt)?,
    })
}

/// An estimate for C: every unknown field is -1 (never a fake zero).
pub(crate) fn estimate_out(e: &PathEstimate) -> cm_estimate {
    cm_estimate {
        rate: e.rate.map_or(-1.0, |r| r.bytes_per_sec() as f64),
        srtt: e.srtt.map_or(-1.0, Duration::as_secs_f64),
        rttvar: e.rttvar.map_or(-1.0, Duration::as_secs_f64),
        loss: e.loss.unwrap_or(-1.0),
    }
}

/// Check `cm_thresh` factors (finite, >= 1).
pub(crate) fn thresholds(rd: f64, ru: f64, td: f64, tu: f64) -> Result<Thresholds, Code> {
    let t = Thresholds {
        rate_down: rd,
        rate_up: ru,
        rtt_down: td,
        rtt_up: tu,
    };
    t.validate().map_err(|_| EINVAL)?;
    Ok(t)
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

    /// Count a `cm_notify` against the flow's oldest split grant: the bytes
    /// to tell the core now, or `None` while that grant still has
    /// unanswered callbacks. Without a split grant, pass it through.
    fn answer(st: &mut State, flow: FlowId, nsent: u64) -> Option<u64> {
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
        Ok(st.poll_set.as_ref().map_or(inner, |p| p.epoll.as_raw_fd()))
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

    pub(crate) fn enable_sigio(&self) -> Result<(), Code> {
        let mut st = self.lock();
        st.fd_wanted = true;
        Ok(st.cm.0.enable_sigio()?)
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
        // callbacks registered it leaves every event queued for us.
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

fn event_flow(e: &CmEvent) -> Option<FlowId> {
    match *e {
        CmEvent::Send { flow, .. }
        | CmEvent::Update { flow, .. }
        | CmEvent::GrantExpired { flow, .. }
        | CmEvent::FlowReclaimed { flow }
        | CmEvent::Error { flow, .. } => Some(flow),
        _ => None,
    }
}

#[allow(unsafe_code)]
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

#[allow(unsafe_code)]
fn call_update(cb: UpdateCb, me: *mut cm_ctx, flow: cm_flowid, e: &cm_estimate) {
    match cb {
        // SAFETY: as in `call_send`.
        UpdateCb::Paper(f) => unsafe { f(flow, e.rate, e.srtt, e.rttvar, e.loss) },
        // SAFETY: as in `call_send`; `e` outlives the call.
        UpdateCb::Ctx(f, user) => unsafe { f(me, flow, e, user as *mut c_void) },
    }
}

/// poll(2) one descriptor for readability.
#[allow(unsafe_code)]
fn poll_fd(fd: i32, timeout_ms: i32) -> Result<(), Code> {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd on the stack, count 1.
    let r = unsafe { libc::poll(&mut p, 1, timeout_ms.max(-1)) };
    if r < 0 {
        let e = std::io::Error::last_os_error();
        if e.kind() == std::io::ErrorKind::Interrupted {
            return Ok(());
        }
        return Err(Code(-e.raw_os_error().unwrap_or(libc::EIO)));
    }
    Ok(())
}

/// The application's pollable descriptor: an epoll set of libcm's
/// descriptor and an eventfd (readable while events wait in `pending`).
struct PollSet {
    epoll: OwnedFd,
    event: OwnedFd,
}

#[allow(unsafe_code)]
impl PollSet {
    fn new(inner: i32) -> Result<PollSet, Code> {
        let err = || {
            Code(
                -std::io::Error::last_os_error()
                    .raw_os_error()
                    .unwrap_or(libc::EIO),
            )
        };
        // SAFETY: plain system calls with integer flags.
        let (ep, ev) = unsafe {
            (
                libc::epoll_create1(libc::EPOLL_CLOEXEC),
                libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK),
            )
        };
        if ep < 0 || ev < 0 {
            let e = err();
            for fd in [ep, ev] {
                if fd >= 0 {
                    // SAFETY: a descriptor just created and owned by nobody else.
                    drop(unsafe { OwnedFd::from_raw_fd(fd) });
                }
            }
            return Err(e);
        }
        // SAFETY: both were just created and are owned by nothing else.
        let set = unsafe {
            PollSet {
                epoll: OwnedFd::from_raw_fd(ep),
                event: OwnedFd::from_raw_fd(ev),
            }
        };
        for fd in [inner, ev] {
            let mut e = libc::epoll_event {
                events: libc::EPOLLIN as u32,
                u64: fd as u64,
            };
            // SAFETY: a valid epoll descriptor, a live descriptor to add, and
            // an epoll_event on the stack.
            if unsafe { libc::epoll_ctl(ep, libc::EPOLL_CTL_ADD, fd, &mut e) } < 0 {
                return Err(err());
            }
        }
        Ok(set)
    }

    /// Make the eventfd readable (`on`) or not.
    fn set(&self, on: bool) {
        let fd = self.event.as_raw_fd();
        let mut v: u64 = 0;
        // SAFETY: 8-byte read/write of a u64 on our own nonblocking eventfd.
        unsafe {
            if on {
                let one: u64 = 1;
                libc::write(fd, (&raw const one).cast(), 8);
            } else {
                libc::read(fd, (&raw mut v).cast(), 8);
            }
        }
    }
}
