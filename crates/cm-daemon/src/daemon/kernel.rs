//! Kernel TCP connections in macroflows (`cmd --kernel-tcp`): the daemon's
//! side of the `cm` congestion control (`cm_kernel`).
//!
//! Each connection that selects `cm` becomes a flow of a daemon-owned core
//! client, in the macroflow of its destination host and its owner's
//! partition, beside libcm's flows to that host. Its reports become the
//! core calls a CM transport makes:
//!
//! - the bytes it sent since the last report are a `cm_notify`;
//! - the bytes that left its flight since then (by the kernel's own count
//!   of packets in flight) are one `cm_update`, as received unless the
//!   report is a loss, with the latest RTT sample;
//!   fast recovery is a transient loss, a retransmission timeout a
//!   persistent one, CWR an ECN mark;
//! - the kernel's "cwnd-limited" verdict is the core's `window_limited`
//!   (the core does not see the sends until the next report, so the bytes
//!   in flight it counts are too few to tell);
//! - its close is a `cm_close`.
//!
//! After each batch of reports, and at least every [`REFRESH`], every
//! connection is allowed its equal share of its macroflow's window (at
//! least two segments), time-stamped so that the BPF side can tell a live
//! daemon from a gone one (`cm_kernel::wire::STALE`). Every [`REFRESH`]
//! each host's macroflow also publishes a new connection's share, which a
//! connection to that host starts from instead of the kernel's initial
//! window.

use std::net::SocketAddr;

use cm_core::idhash::IdMap;
use cm_core::{Bytes, ClientId, Duration, Feedback, FlowId, Instant, LossMode, OpenParams};
use cm_kernel::{Event, EventKind, KernelTcp};

use super::Daemon;
use crate::error::KernelStartError;
use crate::log;

/// Allowances are re-stamped at least this often (well inside the BPF
/// side's 500 ms staleness).
pub(super) const REFRESH: Duration = Duration::from_millis(100);

/// One kernel connection.
#[derive(Debug)]
pub(super) struct Conn {
    pub(super) flow: FlowId,
    pub(super) local: SocketAddr,
    pub(super) remote: SocketAddr,
    pub(super) uid: u32,
    /// The counters of its last report.
    sent: u64,
    acked: u64,
    /// Bytes the core counts in flight for it.
    in_flight: u64,
    mss: u32,
    /// The allowance last written, and when (`CLOCK_MONOTONIC` ns).
    written: (u32, u64),
}

/// The loaded congestion control and its connections.
pub(super) struct Kernel {
    tcp: KernelTcp,
    client: ClientId,
    pub(super) conns: IdMap<u64, Conn>,
    /// Each connection's id by its core flow (for `cm stat`).
    by_flow: IdMap<FlowId, u64>,
    scratch: Vec<Result<Event, cm_kernel::wire::WireError>>,
    last_refresh: Option<Instant>,
    /// Reports that could not be applied (unknown connection, bad record).
    pub(super) rejected: u64,
}

impl Kernel {
    /// Load `cm` and register the core client that owns its connections.
    pub(super) fn load(core: &mut cm_core::CongestionManager) -> Result<Kernel, KernelStartError> {
        let tcp = KernelTcp::load()?;
        let client = core
            .register_client(cm_clock::now())
            .map_err(|e| KernelStartError::Core(e.to_string()))?;
        Ok(Kernel {
            tcp,
            client,
            conns: IdMap::default(),
            by_flow: IdMap::default(),
            scratch: Vec::new(),
            last_refresh: None,
            rejected: 0,
        })
    }

    /// The ring buffer's descriptor, for the loop's epoll set.
    pub(super) fn fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.tcp.fd()
    }

    /// Reports the ring buffer had no room for (the BPF side's count).
    pub(super) fn dropped(&self) -> u64 {
        self.tcp.dropped()
    }

    /// The kernel connection that is core flow `flow`, if any.
    pub(super) fn conn_of(&self, flow: FlowId) -> Option<&Conn> {
        self.by_flow.get(&flow).and_then(|id| self.conns.get(id))
    }
}

impl Daemon {
    /// Apply every report waiting in the ring buffer, then hand out
    /// allowances.
    pub(super) fn kernel_events(&mut self) {
        let Some(k) = &mut self.kernel else {
            return;
        };
        let mut batch = std::mem::take(&mut k.scratch);
        if let Err(e) = k.tcp.drain(&mut batch) {
            log!(warn, "msg=\"reading kernel TCP reports\" error=\"{e}\"");
        }
        let now = cm_clock::now();
        for ev in batch.drain(..) {
            match ev {
                Ok(ev) => self.kernel_event(now, &ev),
                Err(e) => {
                    log!(warn, "msg=\"bad kernel TCP report\" error=\"{e}\"");
                    if let Some(k) = &mut self.kernel {
                        k.rejected += 1;
                    }
                }
            }
        }
        if let Some(k) = &mut self.kernel {
            k.scratch = batch;
        }
        self.kernel_allow(now);
    }

    fn kernel_event(&mut self, now: Instant, ev: &Event) {
        let Some(k) = &mut self.kernel else {
            return;
        };
        if ev.kind == EventKind::Open {
            let mut p = OpenParams::to(ev.remote);
            p.src = Some(ev.local);
            p.partition = if self.cfg.share_across_users {
                0
            } else {
                u64::from(ev.uid) + 1
            };
            match self.core.open(now, k.client, p) {
                Ok(flow) => {
                    k.by_flow.insert(flow, ev.id);
                    let old = k.conns.insert(
                        ev.id,
                        Conn {
                            flow,
                            local: ev.local,
                            remote: ev.remote,
                            uid: ev.uid,
                            sent: ev.bytes_sent,
                            acked: ev.bytes_acked,
                            in_flight: 0,
                            mss: ev.mss.max(1),
                            written: (0, 0),
                        },
                    );
                    if let Some(old) = old {
                        // The id came back without a close report (one
                        // lost): its old flow goes.
                        k.by_flow.remove(&old.flow);
                        let _ = self.core.close(now, old.flow);
                    }
                    log!(
                        info,
                        "msg=\"kernel connection joined\" id={} local={} remote={} uid={} macroflow={}",
                        ev.id,
                        ev.local,
                        ev.remote,
                        ev.uid,
                        self.core
                            .macroflow_of(flow)
                            .map_or(u64::MAX, |m| m.to_u64())
                    );
                }
                Err(e) => {
                    k.rejected += 1;
                    log!(
                        warn,
                        "msg=\"kernel connection left to Reno\" id={} error=\"{e}\"",
                        ev.id
                    );
                }
            }
            return;
        }
        let Some(c) = k.conns.get_mut(&ev.id) else {
            // Opened before this daemon (a restart): it stays on Reno.
            k.rejected += 1;
            return;
        };
        if ev.kind == EventKind::Close {
            let flow = c.flow;
            k.conns.remove(&ev.id);
            k.by_flow.remove(&flow);
            let _ = self.core.close(now, flow);
            return;
        }
        c.mss = ev.mss.max(1);
        let sent = ev.bytes_sent.saturating_sub(c.sent);
        let acked = ev.bytes_acked.saturating_sub(c.acked);
        c.sent = c.sent.max(ev.bytes_sent);
        c.acked = c.acked.max(ev.bytes_acked);
        if sent > 0 && self.core.notify(now, c.flow, Bytes(sent)).is_ok() {
            c.in_flight += sent;
        }
        // The kernel's verdict that the window held the connection back:
        // its sends since the last report are only now notified, so the
        // flight the core counts understates the one the window allowed
        // (with two segments a connection and delayed ACKs, often to
        // nothing), and the window would stop growing. It holds until the
        // macroflow's next feedback, this report's or another connection's.
        if ev.cwnd_limited {
            let _ = self.core.window_limited(now, c.flow);
        }
        // What left the flight: down to the kernel's own count of packets
        // in flight (SACKed and marked-lost segments are out of it; it is
        // zero once everything is acknowledged).
        let still = u64::from(ev.in_flight) * u64::from(c.mss);
        let resolved = c.in_flight.saturating_sub(still);
        let loss = match ev.kind {
            EventKind::Loss => LossMode::Transient,
            EventKind::Rto => LossMode::Persistent,
            EventKind::Ecn => LossMode::Ecn,
            _ => LossMode::None,
        };
        if resolved == 0 && loss == LossMode::None {
            return;
        }
        // Without a loss signal, what left the flight arrived (cumulatively
        // or selectively acknowledged); with one, only what was
        // cumulatively acknowledged is known to have.
        let nrecd = if loss == LossMode::None {
            resolved
        } else {
            acked.min(resolved)
        };
        let fb = Feedback {
            nsent: Bytes(resolved),
            nrecd: Bytes(nrecd),
            loss,
            rtt: (ev.rtt_us > 0).then(|| Duration::from_micros(u64::from(ev.rtt_us))),
            lost_sent: None,
        };
        match self.core.update(now, c.flow, fb) {
            Ok(()) => c.in_flight -= resolved,
            Err(e) => {
                k.rejected += 1;
                log!(
                    warn,
                    "msg=\"kernel connection feedback refused\" id={} error=\"{e}\"",
                    ev.id
                );
            }
        }
    }

    /// Every connection's equal share of its macroflow's window, stamped now.
    pub(super) fn kernel_allow(&mut self, now: Instant) {
        let Some(k) = &mut self.kernel else {
            return;
        };
        k.last_refresh = Some(now);
        let stamp = cm_kernel::monotonic_ns();
        let _ = self.core.client_heartbeat(now, k.client);
        // Each macroflow's per-flow share, looked up once per call.
        let mut shares: Vec<(cm_core::MacroflowId, u64)> = Vec::new();
        for (&id, c) in &mut k.conns {
            let Ok(mf) = self.core.macroflow_of(c.flow) else {
                continue;
            };
            let share = match shares.iter().find(|(m, _)| *m == mf) {
                Some(&(_, s)) => s,
                None => {
                    let Ok((window, flows)) = self.core.macroflow_window(mf) else {
                        continue;
                    };
                    let n = u64::try_from(flows.max(1)).unwrap_or(1);
                    shares.push((mf, window.get() / n));
                    window.get() / n
                }
            };
            let cwnd = u32::try_from(share.div_ceil(u64::from(c.mss)).max(2)).unwrap_or(u32::MAX);
            // A write is a system call: only for a new value, or to keep
            // an unchanged one fresh.
            let fresh = stamp.saturating_sub(c.written.1) < REFRESH.as_micros() * 1000 / 2;
            if c.written.0 == cwnd && fresh {
                continue;
            }
            match k.tcp.set_allowance(id, stamp, cwnd) {
                Ok(()) => c.written = (cwnd, stamp),
                Err(e) => log!(
                    warn,
                    "msg=\"writing a kernel allowance\" id={id} error=\"{e}\""
                ),
            }
        }
    }

    /// Re-stamp the allowances, and publish every host's window for a new
    /// connection, when [`REFRESH`] has passed.
    pub(super) fn kernel_refresh(&mut self, now: Instant) {
        let due = self
            .kernel
            .as_ref()
            .is_some_and(|k| k.last_refresh.is_none_or(|t| now >= t + REFRESH));
        if due {
            self.kernel_allow(now);
            self.kernel_start_windows();
        }
    }

    /// For each macroflow made for a host, a new connection's share of
    /// its window: window / (flows + 1). The BPF side starts connections
    /// from it (sigcomm1999 §2: a new flow learns from its siblings).
    fn kernel_start_windows(&mut self) {
        let Some(k) = &self.kernel else {
            return;
        };
        let stamp = cm_kernel::monotonic_ns();
        for id in self.core.macroflow_ids() {
            let Ok(info) = self.core.macroflow_info(id) else {
                continue;
            };
            let Some(key) = info.key else {
                continue;
            };
            // Only a window that feedback has measured is worth starting from.
            if info.srtt.is_none() {
                continue;
            }
            let uid = match key.partition {
                0 => cm_kernel::wire::ALL_USERS,
                p => u32::try_from(p - 1).unwrap_or(cm_kernel::wire::ALL_USERS),
            };
            let n = u64::try_from(info.flows.len()).unwrap_or(u64::MAX - 1) + 1;
            if let Err(e) = k
                .tcp
                .set_start_window(key.dst, uid, stamp, info.window.get() / n)
            {
                log!(
                    warn,
                    "msg=\"publishing a start window\" dst={} error=\"{e}\"",
                    key.dst
                );
                return;
            }
        }
    }
}
