//! The delay box: a thread that owns two TUN devices in the router namespace and
//! writes every packet it reads back into the same device one one-way delay later.
//!
//! Packets are read as soon as they are readable, stamped with their arrival time and
//! appended to a FIFO per direction (the delay is constant, so a FIFO is sorted by
//! deadline); the thread sleeps in `ppoll` with a nanosecond timeout until the next
//! deadline (timer slack set to 1 ns) or the next packet.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{ErrorKind, Read, Write};
use std::num::NonZeroU64;
use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::error::{IoContext, NetemError, Result};
use rustix::event::{EventfdFlags, PollFd, PollFlags, Timespec};
use serde::{Deserialize, Serialize};

use crate::netns;
use crate::sys::{open_tun, set_realtime};

/// Name of the forward (sender → receiver) TUN device in the router namespace.
pub const TUN_FORWARD: &str = "tunf";
/// Name of the reverse (receiver → sender) TUN device in the router namespace.
pub const TUN_REVERSE: &str = "tunr";

/// Most packets one direction may hold before the box drops (memory bound).
const MAX_QUEUED: usize = 1 << 20;
/// Most packets read from one device before serving the other and the deadlines.
const READ_BATCH: usize = 64;
/// Spin (rather than sleep) for at most this much beyond the expected wake-up latency.
const SPIN_NS: u64 = 5_000;
/// `SCHED_FIFO` priority of the delay box thread (low among real-time priorities).
const REALTIME_PRIORITY: i32 = 10;
/// Cap of the wake-up latency estimate (so a loaded machine cannot make the box spin long).
const MAX_OVERSLEEP_NS: f64 = 200_000.0;

#[derive(Default)]
struct DirCounters {
    packets: AtomicU64,
    bytes: AtomicU64,
    dropped: AtomicU64,
    max_queued: AtomicU64,
    late_ns_sum: AtomicU64,
    late_ns_max: AtomicU64,
}

/// Counters of one direction of the delay box.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct DirectionStats {
    /// Packets written back (delivered onward).
    pub packets: u64,
    /// Bytes (IP level) written back.
    pub bytes: u64,
    /// Packets dropped by the box (write error or more than 2^20 queued).
    pub dropped: u64,
    /// Largest number of packets held at once.
    pub max_queued: u64,
    /// Mean lateness of a write behind its deadline, in microseconds.
    pub mean_late_us: f64,
    /// Largest lateness of a write behind its deadline, in microseconds.
    pub max_late_us: f64,
}

/// Counters of the delay box, both directions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct DelayBoxStats {
    /// Sender → receiver.
    pub forward: DirectionStats,
    /// Receiver → sender.
    pub reverse: DirectionStats,
    /// The box thread stopped because of an error on a TUN device.
    pub failed: bool,
    /// The box thread runs with real-time priority (`SCHED_FIFO`).
    pub realtime: bool,
}

impl DirCounters {
    fn snapshot(&self) -> DirectionStats {
        let packets = self.packets.load(Ordering::Relaxed);
        let late_sum = self.late_ns_sum.load(Ordering::Relaxed);
        DirectionStats {
            packets,
            bytes: self.bytes.load(Ordering::Relaxed),
            dropped: self.dropped.load(Ordering::Relaxed),
            max_queued: self.max_queued.load(Ordering::Relaxed),
            mean_late_us: if packets == 0 {
                0.0
            } else {
                late_sum as f64 / packets as f64 / 1e3
            },
            max_late_us: self.late_ns_max.load(Ordering::Relaxed) as f64 / 1e3,
        }
    }
}

#[derive(Default)]
struct Counters {
    dirs: [DirCounters; 2],
    failed: AtomicBool,
    realtime: AtomicBool,
}

/// A running delay box; stop it with [`DelayBox::stop`] (also done on drop).
pub(crate) struct DelayBox {
    wake: OwnedFd,
    thread: Option<JoinHandle<()>>,
    counters: Arc<Counters>,
}

impl DelayBox {
    /// Create `tunf` and `tunr` in namespace `ns` and start forwarding with `delay`.
    pub(crate) fn start(ns: &str, delay: Duration) -> Result<DelayBox> {
        let wake = rustix::event::eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK)
            .map_err(|e| NetemError::io("eventfd for the delay box", e.into()))?;
        let wake_thread = wake.try_clone().io_context(|| "dup eventfd")?;
        let counters = Arc::new(Counters::default());
        let c2 = Arc::clone(&counters);
        let ns_name = ns.to_string();
        let (tx, rx) = mpsc::channel::<Result<()>>();
        let thread = std::thread::Builder::new()
            .name(format!("delaybox-{ns}"))
            .spawn(move || {
                let setup = (|| -> Result<[File; 2]> {
                    netns::enter(&ns_name)?;
                    let f = open_tun(TUN_FORWARD).io_context(|| "create TUN device tunf")?;
                    let r = open_tun(TUN_REVERSE).io_context(|| "create TUN device tunr")?;
                    Ok([f, r])
                })();
                match setup {
                    Ok(tuns) => {
                        let _ = tx.send(Ok(()));
                        drop(tx);
                        run(tuns, delay, wake_thread, &c2);
                    }
                    Err(e) => {
                        let _ = tx.send(Err(e));
                    }
                }
            })
            .io_context(|| "spawn the delay box thread")?;
        let mut dbox = DelayBox {
            wake,
            thread: Some(thread),
            counters,
        };
        match rx.recv() {
            Ok(Ok(())) => Ok(dbox),
            Ok(Err(e)) => {
                let _ = dbox.stop();
                Err(e)
            }
            Err(_) => {
                let _ = dbox.stop();
                Err(NetemError::Thread("delay box".into()))
            }
        }
    }

    /// Counters so far.
    pub(crate) fn stats(&self) -> DelayBoxStats {
        DelayBoxStats {
            forward: self.counters.dirs[0].snapshot(),
            reverse: self.counters.dirs[1].snapshot(),
            failed: self.counters.failed.load(Ordering::Relaxed),
            realtime: self.counters.realtime.load(Ordering::Relaxed),
        }
    }

    /// Stop the thread and close the TUN devices (which deletes them).
    pub(crate) fn stop(&mut self) -> Result<()> {
        let Some(t) = self.thread.take() else {
            return Ok(());
        };
        rustix::io::write(&self.wake, &1u64.to_ne_bytes())
            .map_err(|e| NetemError::io("wake the delay box", e.into()))?;
        t.join().map_err(|_| NetemError::Thread("delay box".into()))
    }
}

impl Drop for DelayBox {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}

fn timespec(d: Duration) -> Timespec {
    Timespec {
        tv_sec: d.as_secs() as _,
        tv_nsec: d.subsec_nanos() as _,
    }
}

fn run(tuns: [File; 2], delay: Duration, wake: OwnedFd, c: &Counters) {
    // Wake up on time, not up to 50 µs late.
    let _ = rustix::thread::set_current_timer_slack(NonZeroU64::new(1));
    // A real-time thread is woken on time even while compilers fill every core; its
    // CPU use is bounded (it sleeps between deadlines, spins at most ~200 µs).
    c.realtime
        .store(set_realtime(REALTIME_PRIORITY).is_ok(), Ordering::Relaxed);
    let mut queues: [VecDeque<(Instant, Vec<u8>)>; 2] = [VecDeque::new(), VecDeque::new()];
    let mut pool: Vec<Vec<u8>> = Vec::new();
    let mut buf = vec![0u8; 65536];
    let mut oversleep_ns: f64 = 50_000.0;
    loop {
        // Deliver everything that is due.
        let now = Instant::now();
        let mut next: Option<Instant> = None;
        for (i, q) in queues.iter_mut().enumerate() {
            let dc = &c.dirs[i];
            while let Some((deadline, _)) = q.front() {
                if *deadline > now {
                    next = Some(next.map_or(*deadline, |n| n.min(*deadline)));
                    break;
                }
                let Some((deadline, pkt)) = q.pop_front() else {
                    break;
                };
                match (&tuns[i]).write(&pkt) {
                    Ok(_) => {
                        dc.packets.fetch_add(1, Ordering::Relaxed);
                        dc.bytes.fetch_add(pkt.len() as u64, Ordering::Relaxed);
                        let late = now.saturating_duration_since(deadline).as_nanos() as u64;
                        dc.late_ns_sum.fetch_add(late, Ordering::Relaxed);
                        dc.late_ns_max.fetch_max(late, Ordering::Relaxed);
                    }
                    Err(_) => {
                        dc.dropped.fetch_add(1, Ordering::Relaxed);
                    }
                }
                pool.push(pkt);
            }
        }
        // Sleep until shortly before the next deadline (by the wake-up latency seen so
        // far), then spin the last stretch: writes land within a few µs of their time.
        let mut timeout = None;
        if let Some(n) = next {
            let now = Instant::now();
            let wait = n.saturating_duration_since(now);
            let early = Duration::from_nanos(oversleep_ns as u64 + SPIN_NS);
            if wait <= early {
                while Instant::now() < n {
                    std::hint::spin_loop();
                }
                continue;
            }
            timeout = Some(wait - early);
        }
        let wake_at = timeout.map(|t| Instant::now() + t);
        let timeout = timeout.map(timespec);
        let mut fds = [
            PollFd::new(&tuns[0], PollFlags::IN),
            PollFd::new(&tuns[1], PollFlags::IN),
            PollFd::new(&wake, PollFlags::IN),
        ];
        match rustix::event::poll(&mut fds, timeout.as_ref()) {
            Ok(_) => {}
            Err(rustix::io::Errno::INTR) => continue,
            Err(_) => {
                c.failed.store(true, Ordering::Relaxed);
                return;
            }
        }
        let revents = [fds[0].revents(), fds[1].revents(), fds[2].revents()];
        if let Some(w) = wake_at {
            if revents.iter().all(|r| r.is_empty()) {
                // Timed out: learn how late the kernel wakes this thread (EWMA, capped).
                let over = Instant::now().saturating_duration_since(w).as_nanos() as f64;
                oversleep_ns = (0.9 * oversleep_ns + 0.1 * over).min(MAX_OVERSLEEP_NS);
            }
        }
        if !revents[2].is_empty() {
            return; // asked to stop
        }
        for i in 0..2 {
            let ev = revents[i];
            if ev.intersects(PollFlags::ERR | PollFlags::HUP | PollFlags::NVAL) {
                c.failed.store(true, Ordering::Relaxed);
                return;
            }
            if !ev.contains(PollFlags::IN) {
                continue;
            }
            for _ in 0..READ_BATCH {
                match (&tuns[i]).read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => {
                        let arrival = Instant::now();
                        let q = &mut queues[i];
                        if q.len() >= MAX_QUEUED {
                            c.dirs[i].dropped.fetch_add(1, Ordering::Relaxed);
                            continue;
                        }
                        let mut pkt = pool.pop().unwrap_or_else(|| Vec::with_capacity(2048));
                        pkt.clear();
                        pkt.extend_from_slice(&buf[..n]);
                        q.push_back((arrival + delay, pkt));
                        c.dirs[i]
                            .max_queued
                            .fetch_max(q.len() as u64, Ordering::Relaxed);
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                    Err(_) => {
                        c.failed.store(true, Ordering::Relaxed);
                        return;
                    }
                }
            }
        }
    }
}
