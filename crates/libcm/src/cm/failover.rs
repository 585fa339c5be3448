//! Carrying on without the daemon: when the host's `cmd` exits, crashes or
//! restarts, a daemon-mode [`Cm`] moves its flows onto an embedded CM in
//! the process and keeps them congestion controlled, then rejoins a daemon
//! when one listens again.
//!
//! States ([`Status`]) and transitions:
//!
//! - `Daemon` → `Fallback`: any call (or the event pump) finds the daemon
//!   connection closed (`EPIPE`, `ECONNRESET`, hang-up). It is noticed at
//!   the next call that touches the connection; an application asleep in
//!   [`Cm::wait`] or on [`Cm::pollable_fd`] is woken by the hang-up. Every
//!   flow of this handle is opened again on an embedded CM, each
//!   macroflow resuming from the window the daemon last reported
//!   (`rate × srtt` of its flows, refreshed once a second) or, with no
//!   report yet, from the initial window: never unlimited. Flows that
//!   waited for a grant are asked for one again. Weights, thresholds, rate
//!   subscriptions and controllers are kept. The call that noticed runs on
//!   the embedded CM and succeeds; calls batched for the daemon and bytes
//!   it counted in flight are lost with it.
//! - `Fallback` → `Daemon`: every 50 ms, doubling to 1 s, libcm tries to
//!   connect to the same socket path (in [`Cm::poll_event`],
//!   [`Cm::dispatch`], [`Cm::wait`] and [`Cm::next_timeout`], which wake
//!   for it). On success the flows are opened on the daemon (which starts
//!   their macroflows afresh) and waiting flows ask again.
//!
//! Flow ids stay the application's across both moves: libcm maps them to
//! the ids of the CM in use. Macroflow ids are those of the CM in use. Each
//! move is reported as a [`CmEvent::Status`] and by [`Cm::status`].
//! [`Cm::set_failover`]`(false)` keeps the old behaviour: every call
//! returns [`CmError::Disconnected`].

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration as StdDuration, Instant as StdInstant};

use cm_core::Instant;

use cm_core::controller::ControllerConfig;
use cm_core::idhash::IdMap;
use cm_core::{Bytes, Config, FlowId, OpenParams, PathEstimate, Thresholds};
use cm_ipc::{ToClient, ToDaemon};

use super::Cm;
use crate::backend::Backend;
use crate::backend::daemon::{DaemonConn, Transport};
use crate::backend::embedded::Embedded;
use crate::error::CmError;
use crate::event::{CmEvent, Status};

/// First wait before reconnecting, doubled per failed attempt.
const RETRY_FIRST: StdDuration = StdDuration::from_millis(50);
/// Longest wait between reconnection attempts.
const RETRY_MAX: StdDuration = StdDuration::from_secs(1);
/// How often the daemon's estimates of this handle's flows are refreshed
/// (what a fallback resumes from).
const REFRESH_EVERY: StdDuration = StdDuration::from_secs(1);
/// Longest wait for a refresh or a reconnection's welcome: a daemon that
/// is slow now is tried again later rather than stalling the application.
const QUICK_TIMEOUT: StdDuration = StdDuration::from_millis(200);
/// App ids handed out after a move start here (never a CM's own id).
const SYNTHETIC_BASE: u64 = 1 << 62;

/// What libcm keeps of one of its flows to open it elsewhere.
#[derive(Clone, Debug)]
pub(crate) struct FlowRecord {
    src: Option<SocketAddr>,
    dst: SocketAddr,
    weight: Option<u32>,
    thresholds: Option<Thresholds>,
    rate_updates: bool,
    controller: Option<ControllerConfig>,
    /// Requested since its last grant.
    wants: bool,
    /// The daemon's last estimate, and when it came.
    estimate: Option<PathEstimate>,
    estimated_at: Option<StdInstant>,
}

/// The failover state of a [`Cm`].
#[derive(Debug)]
pub(crate) struct Failover {
    /// Move to an embedded CM when the daemon goes (default on).
    pub enabled: bool,
    /// The daemon's socket and transport (`None`: embedded by choice).
    path: Option<(PathBuf, Transport)>,
    pub status: Status,
    /// App id → id in the CM in use, once a move happened.
    to_backend: IdMap<FlowId, FlowId>,
    pub(crate) to_app: IdMap<FlowId, FlowId>,
    next_synthetic: u64,
    retry_at: Option<Instant>,
    backoff: StdDuration,
    refreshed: StdInstant,
    /// Moves so far (both directions).
    pub moves: u64,
}

impl Failover {
    pub(crate) fn new(path: Option<(PathBuf, Transport)>) -> Failover {
        Failover {
            enabled: true,
            status: if path.is_some() {
                Status::Daemon
            } else {
                Status::Embedded
            },
            path,
            to_backend: IdMap::default(),
            to_app: IdMap::default(),
            next_synthetic: SYNTHETIC_BASE,
            retry_at: None,
            backoff: RETRY_FIRST,
            refreshed: StdInstant::now(),
            moves: 0,
        }
    }
}

impl Cm {
    /// Which CM this handle runs on now (see the `failover` module docs).
    pub fn status(&self) -> Status {
        self.fo.status
    }

    /// An embedded CM standing in for the daemon expected at `path`
    /// (its socket file is there, nobody listens): `Fallback` from the
    /// start, joining the daemon when one listens.
    pub(super) fn standing_in(path: PathBuf) -> Result<Cm, CmError> {
        let t = match std::env::var("CM_TRANSPORT").as_deref() {
            Ok("socket") => Transport::Socket,
            _ => Transport::SharedMemory,
        };
        let mut cm = Cm::embedded(Config::default())?;
        cm.fo = Failover::new(Some((path, t)));
        cm.fo.status = Status::Fallback;
        cm.retry_in(RETRY_FIRST);
        Ok(cm)
    }

    /// Whether a daemon-mode handle moves its flows to an embedded CM when
    /// the daemon goes away (default `true`); with `false` every call then
    /// fails with [`CmError::Disconnected`].
    pub fn set_failover(&mut self, on: bool) {
        self.fo.enabled = on;
    }

    /// The id of `app` in the CM in use.
    pub(super) fn bid(&self, app: FlowId) -> FlowId {
        if self.fo.to_backend.is_empty() {
            return app;
        }
        // An id this handle never gave out names no flow anywhere.
        self.fo
            .to_backend
            .get(&app)
            .copied()
            .unwrap_or(FlowId::from_u64(u64::MAX))
    }

    /// Keep the flows' records up to date with an event the application
    /// is about to see (in its ids): grants, estimates, reclaims.
    pub(super) fn observe(&mut self, ev: &CmEvent) {
        match *ev {
            CmEvent::Send { flow, .. } => self.note(flow, |r| r.wants = false),
            CmEvent::Update { flow, estimate } => self.note_estimate(flow, estimate),
            CmEvent::FlowReclaimed { flow } => self.forget(flow),
            _ => {}
        }
    }

    /// A flow was opened as `id` in the CM in use: its application id.
    pub(super) fn opened(
        &mut self,
        id: FlowId,
        src: Option<SocketAddr>,
        dst: SocketAddr,
    ) -> FlowId {
        if self.fo.path.is_none() {
            return id;
        }
        let app = if self.fo.to_backend.is_empty() {
            id
        } else {
            let app = FlowId::from_u64(self.fo.next_synthetic);
            self.fo.next_synthetic += 1;
            self.fo.to_backend.insert(app, id);
            self.fo.to_app.insert(id, app);
            app
        };
        self.own.insert(
            app,
            FlowRecord {
                src,
                dst,
                weight: None,
                thresholds: None,
                rate_updates: false,
                controller: None,
                wants: false,
                estimate: None,
                estimated_at: None,
            },
        );
        app
    }

    /// The flow is gone (closed here or reclaimed by the CM).
    pub(super) fn forget(&mut self, app: FlowId) {
        self.own.remove(&app);
        self.mtus.remove(&app);
        if let Some(id) = self.fo.to_backend.remove(&app) {
            self.fo.to_app.remove(&id);
        }
    }

    /// Remember what a call set on `app`, to set it again after a move.
    pub(super) fn note(&mut self, app: FlowId, f: impl FnOnce(&mut FlowRecord)) {
        if let Some(r) = self.own.get_mut(&app) {
            f(r);
        }
    }

    pub(super) fn note_weight(&mut self, app: FlowId, w: u32) {
        self.note(app, |r| r.weight = Some(w));
    }
    pub(super) fn note_thresholds(&mut self, app: FlowId, t: Thresholds) {
        self.note(app, |r| {
            r.thresholds = Some(t);
            r.rate_updates = true;
        });
    }
    pub(super) fn note_rate_updates(&mut self, app: FlowId, on: bool) {
        self.note(app, |r| r.rate_updates = on);
    }
    pub(super) fn note_controller(&mut self, app: FlowId, c: &ControllerConfig) {
        self.note(app, |r| r.controller = Some(c.clone()));
    }
    pub(super) fn note_request(&mut self, app: FlowId) {
        self.note(app, |r| r.wants = true);
    }
    pub(super) fn note_estimate(&mut self, app: FlowId, e: PathEstimate) {
        self.note(app, |r| {
            r.estimate = Some(e);
            r.estimated_at = Some(StdInstant::now());
        });
    }

    /// Whether `e` means the daemon is gone and this handle should move.
    pub(super) fn should_fail_over(&self, e: &CmError) -> bool {
        if !self.fo.enabled || !matches!(self.backend, Backend::Daemon(_)) {
            return false;
        }
        match e {
            CmError::Disconnected => true,
            CmError::Io(io) => matches!(
                io.kind(),
                std::io::ErrorKind::BrokenPipe
                    | std::io::ErrorKind::ConnectionReset
                    | std::io::ErrorKind::NotConnected
            ),
            _ => false,
        }
    }

    /// Move every flow of this handle to an embedded CM (module docs).
    pub(super) fn fail_over(&mut self) -> Result<(), CmError> {
        let mut e = Embedded::new(Config::default())?;
        let now = cm_clock::now();
        let mut apps: Vec<FlowId> = self.own.keys().copied().collect();
        apps.sort_by_key(|f| f.to_u64());
        let (mut to_backend, mut to_app) = (IdMap::default(), IdMap::default());
        // The window each destination host's macroflow resumes from: the
        // sum of its flows' last rates times their smoothed RTT.
        let mut windows: Vec<(cm_core::MacroflowId, u64, Option<cm_core::Duration>)> = Vec::new();
        for app in apps {
            let Some(r) = self.own.get(&app).cloned() else {
                continue;
            };
            let mut p = OpenParams::to(r.dst);
            p.src = r.src;
            let id = e.core.open(now, e.client, p)?;
            to_backend.insert(app, id);
            to_app.insert(id, app);
            apply_settings(&mut e, now, id, &r)?;
            let mf = e.core.macroflow_of(id)?;
            if let Some(PathEstimate {
                rate: Some(rate),
                srtt: Some(srtt),
                ..
            }) = r.estimate
            {
                let w = u64::try_from(
                    u128::from(rate.bytes_per_sec()) * u128::from(srtt.as_micros()) / 1_000_000,
                )
                .unwrap_or(u64::MAX);
                match windows.iter_mut().find(|x| x.0 == mf) {
                    Some(x) => x.1 = x.1.saturating_add(w),
                    None => windows.push((mf, w, Some(srtt))),
                }
            }
        }
        for (mf, w, srtt) in windows {
            e.core.resume_macroflow(now, mf, Bytes(w), srtt)?;
        }
        for (&app, &id) in &to_backend {
            if self.own.get(&app).is_some_and(|r| r.wants) {
                e.core.request(now, id)?;
            }
        }
        self.backend = Backend::Embedded(Box::new(e));
        self.fo.to_backend = to_backend;
        self.fo.to_app = to_app;
        self.mtus.clear();
        self.moved(Status::Fallback);
        self.fo.backoff = RETRY_FIRST;
        self.retry_in(RETRY_FIRST);
        self.after_move()
    }

    /// In `Fallback`, when due: connect to the daemon again and move the
    /// flows there. A failed attempt waits twice as long for the next.
    pub(super) fn maybe_reconnect(&mut self) -> Result<(), CmError> {
        if self.fo.status != Status::Fallback
            || self.fo.retry_at.is_none_or(|t| cm_clock::now() < t)
        {
            return Ok(());
        }
        let Some((path, transport)) = self.fo.path.clone() else {
            return Ok(());
        };
        let Ok(mut d) = DaemonConn::connect_within(&path, transport, QUICK_TIMEOUT) else {
            self.back_off();
            return Ok(());
        };
        let mut apps: Vec<FlowId> = self.own.keys().copied().collect();
        apps.sort_by_key(|f| f.to_u64());
        let records: Vec<FlowRecord> = apps
            .iter()
            .filter_map(|a| self.own.get(a).cloned())
            .collect();
        let opened = d.call_many(records.len(), |i, seq| ToDaemon::Open {
            seq,
            src: records[i].src,
            dst: records[i].dst,
        });
        let Ok(replies) = opened else {
            self.back_off();
            return Ok(());
        };
        let (mut to_backend, mut to_app) = (IdMap::default(), IdMap::default());
        for ((app, r), reply) in apps.iter().zip(&records).zip(replies) {
            let ToClient::Opened { flow, .. } = reply else {
                // Refused (a limit): the flow is gone for this handle.
                self.forget(*app);
                continue;
            };
            let id = FlowId::from_u64(flow);
            to_backend.insert(*app, id);
            to_app.insert(id, *app);
            settings_to_daemon(&mut d, id, r)?;
        }
        d.flush()?;
        self.backend = Backend::Daemon(Box::new(d));
        self.fo.to_backend = to_backend;
        self.fo.to_app = to_app;
        self.fo.retry_at = None;
        self.fo.refreshed = StdInstant::now();
        self.mtus.clear();
        self.moved(Status::Daemon);
        self.after_move()
    }

    /// Daemon mode, once a second: the daemon's estimates of this handle's
    /// flows that none of its own queries or rate updates refreshed in the
    /// last `REFRESH_EVERY` (an application that queries pays nothing), for
    /// a fallback to resume from. A slow daemon skips a turn.
    pub(super) fn maybe_refresh(&mut self) -> Result<(), CmError> {
        if self.fo.status != Status::Daemon
            || self.own.is_empty()
            || self.fo.refreshed.elapsed() < REFRESH_EVERY
        {
            return Ok(());
        }
        self.fo.refreshed = StdInstant::now();
        let apps: Vec<FlowId> = self
            .own
            .iter()
            .filter(|(_, r)| r.estimated_at.is_none_or(|t| t.elapsed() >= REFRESH_EVERY))
            .map(|(&a, _)| a)
            .collect();
        if apps.is_empty() {
            return Ok(());
        }
        let ids: Vec<FlowId> = apps.iter().map(|&a| self.bid(a)).collect();
        let Backend::Daemon(d) = &mut self.backend else {
            return Ok(());
        };
        let saved = d.reply_timeout;
        d.reply_timeout = QUICK_TIMEOUT;
        let r = d.call_many(ids.len(), |i, seq| ToDaemon::Query {
            seq,
            flow: ids[i].to_u64(),
        });
        d.reply_timeout = saved;
        match r {
            Ok(replies) => {
                for (app, reply) in apps.into_iter().zip(replies) {
                    if let ToClient::Estimate { estimate, .. } = reply {
                        self.note_estimate(app, estimate.into());
                    }
                }
                Ok(())
            }
            Err(CmError::Timeout(_)) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Before gathering events: refresh the daemon's estimates when due
    /// (moving if the daemon is found gone), or reconnect when due.
    pub(super) fn failover_tick(&mut self) -> Result<(), CmError> {
        match self.fo.status {
            Status::Daemon => match self.maybe_refresh() {
                Err(e) if self.should_fail_over(&e) => self.fail_over(),
                r => r,
            },
            Status::Fallback => self.maybe_reconnect(),
            Status::Embedded => Ok(()),
        }
    }

    /// A failed reconnection: the next waits twice as long (up to 1 s).
    fn back_off(&mut self) {
        self.fo.backoff = (self.fo.backoff * 2).min(RETRY_MAX);
        self.retry_in(self.fo.backoff);
    }

    /// The next reconnection attempt in `d`; the embedded CM's waits and
    /// descriptor wake for it.
    fn retry_in(&mut self, d: StdDuration) {
        let at = cm_clock::now() + cm_core::Duration::from_micros(d.as_micros() as u64);
        self.fo.retry_at = Some(at);
        if let Backend::Embedded(e) = &mut self.backend {
            e.wake_at = Some(at);
            let _ = e.rearm(false);
        }
    }

    fn moved(&mut self, to: Status) {
        self.fo.status = to;
        self.fo.moves += 1;
        self.events.push_back(CmEvent::Status { status: to });
    }

    /// After a move: the application's descriptor watches the new CM.
    fn after_move(&mut self) -> Result<(), CmError> {
        if self.outer.is_some() {
            self.watch_backend()?;
        }
        Ok(())
    }
}

/// A flow's settings on an embedded CM.
fn apply_settings(
    e: &mut Embedded,
    now: cm_core::Instant,
    id: FlowId,
    r: &FlowRecord,
) -> Result<(), CmError> {
    if let Some(w) = r.weight {
        e.core.set_weight(now, id, w)?;
    }
    if let Some(c) = &r.controller {
        let mf = e.core.macroflow_of(id)?;
        e.core.set_controller(now, mf, c)?;
    }
    if let Some(t) = r.thresholds {
        e.core.set_thresholds(now, id, t)?;
    } else if r.rate_updates {
        e.core.set_rate_updates(now, id, true)?;
    }
    Ok(())
}

/// A flow's settings sent to a daemon (and a request if it waited).
fn settings_to_daemon(d: &mut DaemonConn, id: FlowId, r: &FlowRecord) -> Result<(), CmError> {
    let flow = id.to_u64();
    if let Some(weight) = r.weight {
        d.push(&ToDaemon::SetWeight { flow, weight })?;
    }
    if let Some(t) = r.thresholds {
        d.push(&ToDaemon::Thresh {
            flow,
            rate_down: t.rate_down,
            rate_up: t.rate_up,
            rtt_down: t.rtt_down,
            rtt_up: t.rtt_up,
        })?;
    } else if r.rate_updates {
        d.push(&ToDaemon::RateUpdates { flow, on: true })?;
    }
    if r.wants {
        d.push(&ToDaemon::Request { flow, k: 1 })?;
    }
    Ok(())
}
