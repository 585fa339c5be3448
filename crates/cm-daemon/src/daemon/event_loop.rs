//! The daemon's event loop: one thread, epoll over the control socket,
//! the clients, a timerfd at the core's next deadline and a signal pipe.
//!
//! Each loop turn reads every frame the ready clients sent, applies their
//! calls to the core, services the core's timers, routes the core's events
//! (grants, rate updates) to their flows' clients, and sends each client
//! one frame with everything for it: one system call per client per turn,
//! however many packets' worth of calls it carried.

use std::io::Read;
use std::sync::atomic::Ordering;

use cm_core::{Event, Instant};
use cm_ipc::ToClient;
use rustix::event::epoll;
use rustix::io::Errno;
use rustix::net::{RecvFlags, SocketFlags, accept_with, recv, sockopt};
use rustix::time::{Itimerspec, TimerfdTimerFlags, Timespec, timerfd_settime};

use super::{Daemon, KERNEL, LISTENER, RING_BIT, SIGNALS, TIMER, admission};
use crate::error::DaemonError;
use crate::log;
use crate::session::{FlushResult, Session};
use crate::spin::Spin;

/// Core deadlines this close (µs) are polled for instead of armed.
const DUE_SOON_US: u64 = 20;
/// Frames read from one client per loop turn (fairness between clients).
const FRAMES_PER_TURN: usize = 64;
/// While shared rings keep the loop busy, the epoll set (sockets, the
/// timerfd, doorbells) is looked at at least this often (µs): the rings
/// are read from memory every turn, and a turn right after one that read
/// frames skips the system call (two of the three per hand-off with a
/// client sharing the daemon's CPU, `api_overhead`'s `alf/shm`).
const EPOLL_EVERY_US: u128 = 50;

impl Daemon {
    /// Serve until stopped; removes the socket file on the way out.
    pub fn run(&mut self) -> Result<(), DaemonError> {
        log!(info, "msg=\"listening\" socket={}", self.path.display());
        let mut events = Vec::with_capacity(256);
        let max_wait = Timespec {
            tv_sec: 0,
            tv_nsec: 100_000_000,
        };
        let no_wait = Timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        let mut spin = Spin::new(std::time::Duration::from_micros(self.cfg.spin_us));
        // The last turn read ring frames, and when epoll was last asked.
        let mut rings_busy = false;
        let mut epolled = std::time::Instant::now();
        // The clock, read once per turn right after the wait and passed
        // to everything the turn does (in a busy VM a clock reading costs
        // far more than its 25 ns on a quiet one: eight per turn were 16%
        // of the daemon's CPU under `api_overhead`'s `alf/shm` there).
        let mut t = epolled;
        if self.cfg.follow_client_cpu && self.cfg.shared_memory {
            self.follow = crate::follow::Follow::new();
        }
        while !self.stop.load(Ordering::SeqCst) {
            events.clear();
            // Block only when not spinning, no core deadline is near and no
            // shared ring holds a frame (checked after asking its client to
            // ring, see `rings.rs`).
            let block = !self.due_soon && !spin.spinning(t) && self.arm_rings();
            let timeout = if block { &max_wait } else { &no_wait };
            let since = t.saturating_duration_since(epolled).as_micros();
            let polled = block || !rings_busy || since >= EPOLL_EVERY_US;
            if polled {
                match epoll::wait(
                    &self.epoll,
                    rustix::buffer::spare_capacity(&mut events),
                    Some(timeout),
                ) {
                    Ok(_) | Err(Errno::INTR) => {}
                    Err(e) => return Err(e.into()),
                }
            }
            t = std::time::Instant::now();
            let now = cm_clock::from_std(t);
            if polled {
                epolled = t;
            }
            if block {
                self.disarm_rings();
            }
            // Kernel TCP reports alone do not make the loop spin: the next
            // batch is a quarter RTT away, not a client's next frame.
            let mut work = events.iter().any(|e| e.data.u64() != KERNEL);
            for ev in &events {
                let token = ev.data.u64();
                let flags = ev.flags;
                match token {
                    LISTENER => self.accept_all(),
                    TIMER => {
                        let mut b = [0u8; 8];
                        let _ = rustix::io::read(&self.timer, &mut b);
                        self.armed = None;
                    }
                    SIGNALS => {
                        let mut b = [0u8; 16];
                        if let Some(s) = &mut self.signals {
                            let _ = s.read(&mut b);
                        }
                        log!(info, "msg=\"signal received, shutting down\"");
                        self.stop.store(true, Ordering::SeqCst);
                    }
                    KERNEL => self.kernel_events(),
                    t if t & RING_BIT != 0 => self.doorbell(t & !RING_BIT),
                    t => {
                        if flags.contains(epoll::EventFlags::IN) {
                            self.read_client(t);
                        }
                        if flags.intersects(epoll::EventFlags::HUP | epoll::EventFlags::ERR)
                            && self.sessions.contains_key(&t)
                        {
                            // Read what is left first (done above), then drop.
                            self.read_ring(t, now);
                            self.drop_session(t, "hangup");
                        }
                    }
                }
            }
            // Shared rings are read by looking, doorbell or not.
            rings_busy = self.read_rings(now);
            work |= rings_busy;
            self.follow_busiest(!block, t);
            spin.observe(work, t);
            self.turn(t, now);
        }
        // Leave the thread's CPU affinity as it was found.
        if let Some(f) = self.follow.take() {
            log!(
                info,
                "msg=\"stopped following clients' CPUs\" moves={} starved={}",
                f.moves,
                f.starved
            );
        }
        self.shutdown();
        Ok(())
    }

    /// Timers, events to clients, output, timer re-arm, at the turn's
    /// time (`t`, and `now` as the core's instant).
    fn turn(&mut self, t: std::time::Instant, now: Instant) {
        self.check_memory(t);
        if self.core.poll_timeout().is_some_and(|t| t <= now) {
            self.core.handle_timeout(now);
        }
        self.kernel_refresh(now);
        self.route_events();
        let mut dead = Vec::new();
        for (&t, s) in &mut self.sessions {
            if s.has_output() {
                // Interest in writability changes only when a client's socket
                // fills or drains: no epoll call on the common path.
                let want_out = match s.flush() {
                    FlushResult::Done => false,
                    FlushResult::Blocked => true,
                    FlushResult::Dead => {
                        dead.push(t);
                        continue;
                    }
                };
                // A shared ring that is full waits for the client's doorbell.
                if want_out != s.want_out && s.rings.is_none() {
                    let mut flags = epoll::EventFlags::IN;
                    if want_out {
                        flags |= epoll::EventFlags::OUT;
                    }
                    if epoll::modify(&self.epoll, &s.fd, epoll::EventData::new_u64(t), flags)
                        .is_ok()
                    {
                        s.want_out = want_out;
                    }
                }
            }
        }
        for t in dead {
            self.drop_session(t, "not reading its socket");
        }
        self.rearm(now);
    }

    /// Hand the core's events to the clients owning their flows.
    pub(super) fn route_events(&mut self) {
        while let Some(ev) = self.core.poll_event() {
            let (flow, msg) = match ev {
                Event::Grant { flow, bytes } => (
                    flow,
                    ToClient::Grant {
                        flow: flow.to_u64(),
                        bytes: bytes.get(),
                    },
                ),
                Event::RateUpdate { flow, estimate } => (
                    flow,
                    ToClient::RateUpdate {
                        flow: flow.to_u64(),
                        estimate: estimate.into(),
                    },
                ),
                Event::GrantExpired { flow, bytes } => (
                    flow,
                    ToClient::GrantExpired {
                        flow: flow.to_u64(),
                        bytes: bytes.get(),
                    },
                ),
                Event::FlowReclaimed { flow, .. } => {
                    self.peers.remove(&flow.to_u64());
                    if let Some(t) = self.owner.remove(&flow.to_u64()) {
                        if let Some(s) = self.sessions.get_mut(&t) {
                            s.flows = s.flows.saturating_sub(1);
                        }
                    }
                    continue;
                }
                _ => continue,
            };
            if let Some(s) = self
                .owner
                .get(&flow.to_u64())
                .and_then(|t| self.sessions.get_mut(t))
            {
                s.push(&msg);
            }
        }
    }

    /// Keep the timerfd at or before the core's next deadline. A later
    /// deadline is left to the armed (earlier) expiry, which re-arms on
    /// firing: one `timerfd_settime` per real change, not per loop turn.
    ///
    /// A deadline within [`DUE_SOON_US`] is not armed at all: the loop polls
    /// without blocking until it passes. Programming a timer costs more than
    /// the wait (on the target VM each `timerfd_settime` exits to the
    /// hypervisor, ~10 µs) and a sub-tick timer cannot fire sooner anyway;
    /// under a stream of such deadlines (a pacing shaper in debt, aging
    /// steps of a microsecond-RTT path) re-arming took half the daemon's CPU.
    fn rearm(&mut self, now: Instant) {
        let want = self.core.poll_timeout();
        let soon = Instant::from_micros(now.as_micros().saturating_add(DUE_SOON_US));
        self.due_soon = want.is_some_and(|t| t <= soon);
        if self.due_soon {
            return;
        }
        let keep = match (self.armed, want) {
            (Some(a), Some(w)) => a <= w,
            // An armed expiry with nothing due is a harmless early wake-up.
            (_, None) => true,
            (None, Some(_)) => false,
        };
        if keep {
            return;
        }
        let value = match want {
            None => Timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            Some(t) => {
                let us = t.saturating_since(cm_clock::now()).as_micros().max(1);
                Timespec {
                    tv_sec: i64::try_from(us / 1_000_000).unwrap_or(i64::MAX),
                    tv_nsec: i64::try_from((us % 1_000_000) * 1000).unwrap_or(0),
                }
            }
        };
        let spec = Itimerspec {
            it_interval: Timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: value,
        };
        if timerfd_settime(&self.timer, TimerfdTimerFlags::empty(), &spec).is_ok() {
            self.armed = want;
        }
    }

    fn accept_all(&mut self) {
        loop {
            let fd = match accept_with(&self.listener, SocketFlags::CLOEXEC | SocketFlags::NONBLOCK)
            {
                Ok(fd) => fd,
                Err(Errno::AGAIN) => return,
                Err(Errno::INTR | Errno::CONNABORTED) => continue,
                Err(e) => {
                    log!(error, "msg=\"accept failed\" error=\"{e}\"");
                    return;
                }
            };
            let Ok(cred) = sockopt::socket_peercred(&fd) else {
                log!(warn, "msg=\"client refused: no peer credentials\"");
                continue;
            };
            let (uid, pid) = (
                cred.uid.as_raw(),
                u32::try_from(cred.pid.as_raw_nonzero().get()).unwrap_or(0),
            );
            if let Err((name, value)) = self.admit(uid) {
                log!(
                    warn,
                    "msg=\"client refused: limit {name} = {value} reached\" uid={uid} pid={pid}"
                );
                admission::tell_refused(&fd, name, value);
                continue;
            }
            let token = self.next_token;
            self.next_token += 1;
            if epoll::add(
                &self.epoll,
                &fd,
                epoll::EventData::new_u64(token),
                epoll::EventFlags::IN,
            )
            .is_err()
            {
                continue;
            }
            let now = cm_clock::now().as_micros();
            self.sessions.insert(
                token,
                Session::new(fd, uid, pid, self.cfg.max_messages_per_sec, now),
            );
            log!(
                info,
                "msg=\"client connected\" session={token} uid={uid} pid={pid}"
            );
        }
    }

    fn read_client(&mut self, token: u64) {
        for _ in 0..FRAMES_PER_TURN {
            let Some(s) = self.sessions.get(&token) else {
                return;
            };
            let n = match recv(&s.fd, &mut self.rbuf, RecvFlags::DONTWAIT) {
                Ok((0, _)) => {
                    self.drop_session(token, "closed");
                    return;
                }
                Ok((n, _)) => n.min(self.rbuf.len()),
                Err(Errno::AGAIN) => return,
                Err(Errno::INTR) => continue,
                Err(e) => {
                    self.drop_session(token, &format!("read error {e}"));
                    return;
                }
            };
            let frame = std::mem::take(&mut self.rbuf);
            let now = cm_clock::now();
            self.handle_frame(token, &frame[..n], now);
            self.rbuf = frame;
        }
    }

    /// A client is gone: close its flows (their macroflows keep serving the
    /// other clients) and forget it.
    pub(super) fn drop_session(&mut self, token: u64, why: &str) {
        self.drop_session_at(token, why, cm_clock::now());
    }

    /// [`Daemon::drop_session`] at `now`.
    pub(super) fn drop_session_at(&mut self, token: u64, why: &str, now: Instant) {
        let Some(s) = self.sessions.remove(&token) else {
            return;
        };
        let _ = epoll::delete(&self.epoll, &s.fd);
        if let Some(l) = &s.rings {
            // The client holds the same eventfd: it would stay in the loop's
            // epoll set after the daemon closes its copy unless removed here.
            let _ = epoll::delete(&self.epoll, &l.bell_in);
        }
        let mut reclaimed = 0;
        if let Some(c) = s.client {
            if let Ok(flows) = self.core.client_flows(c) {
                for f in flows {
                    self.owner.remove(&f.to_u64());
                    self.peers.remove(&f.to_u64());
                }
            }
            reclaimed = self.core.close_client(now, c).unwrap_or(0);
            self.by_client.remove(&c);
        }
        log!(
            info,
            "msg=\"client gone\" session={token} uid={} pid={} reason=\"{why}\" flows_reclaimed={reclaimed}",
            s.uid,
            s.pid
        );
    }

    fn shutdown(&mut self) {
        let tokens: Vec<u64> = self.sessions.keys().copied().collect();
        for t in tokens {
            self.drop_session(t, "daemon shutdown");
        }
        let _ = std::fs::remove_file(&self.path);
        if let Some(k) = self.kernel.take() {
            let (connections, rejected, dropped) = (k.conns.len(), k.rejected, k.dropped());
            // Dropping the handle closes the struct_ops link.
            drop(k);
            log!(
                info,
                "msg=\"kernel TCP congestion control unregistered\" still_listed={} open_connections={connections} reports_rejected={rejected} reports_dropped={dropped}",
                cm_kernel::registered()
            );
        }
        log!(info, "msg=\"stopped\"");
    }
}
