//! The delay box: a thread that owns two TUN devices (both in a path's router
//! namespace, or one in each end of a network's link) and writes every packet
//! it reads back into the same device one one-way delay later.
//!
//! Packets are read as soon as they are readable, stamped with their arrival time and
//! appended to a FIFO per direction (the delay is constant, so a FIFO is sorted by
//! deadline); the thread sleeps in `ppoll` with a nanosecond timeout until the next
//! deadline (timer slack set to 1 ns) or the next packet, and keeps reading while it
//! spins the last microseconds before a deadline.
//!
//! Behind a path's bottleneck the box keeps the line's spacing: a packet leaves no
//! sooner than one transmission time (at the `tbf`'s rate) after the packet before
//! it, and no later than one transmission time after it was read
//! ([`queues::departure`]). Without that, a packet read a few microseconds late
//! would leave closer to its successor than the line sent them, and a receiver
//! timing a back-to-back bunch would read a capacity above the line's.
//!
//! Reordering and duplication (sender → receiver only, like the loss filter), in the
//! manner of netem's `reorder` and `duplicate` but with the chosen packet made late:
//! each forward packet is, with probability `reorder`, *held back*: its deadline is
//! `reorder_delay` later than the one-way delay's, so packets read after it within
//! `reorder_delay` overtake it. Held packets wait in a second queue kept sorted by
//! deadline, and each write takes the earlier head of the two queues. With probability
//! `duplicate` a forward packet is written to the TUN twice, back to back, when it is
//! due. Both probabilities and the extra delay are atomics the [`Path`] can change
//! while the box runs; the draws use a SplitMix64 generator (Steele, Lea & Flood,
//! OOPSLA 2014) seeded from the clock, and are skipped when a probability is 0.
//!
//! [`Path`]: crate::Path

use std::fs::File;
use std::io;
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

mod queues;
use crate::sys::{open_tun, set_realtime};
use queues::State;

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
    reordered: AtomicU64,
    duplicated: AtomicU64,
}

/// `p` as a threshold for the high 32 bits of a random `u64`: `p · 2³²`, so that
/// `bits < threshold` has probability `p` (0 never, 2³² always).
fn threshold(p: f64) -> u64 {
    (p.clamp(0.0, 1.0) * 4_294_967_296.0).round() as u64
}

/// What the [`Path`](crate::Path) sets while the box runs: the reordering and
/// duplication it applies to forward packets (thresholds from [`threshold`]), and
/// the line rate behind each direction's TUN device (see [`queues::departure`]).
#[derive(Default)]
pub(crate) struct Controls {
    reorder: AtomicU64,
    reorder_delay_ns: AtomicU64,
    duplicate: AtomicU64,
    /// Bits per second of the bottleneck that feeds direction `i` (0: none).
    line_rate_bps: [AtomicU64; 2],
}

impl Controls {
    /// Hold packets back by `delay` with probability `p` (validated by the caller).
    pub(crate) fn set_reorder(&self, p: f64, delay: Duration) {
        let ns = u64::try_from(delay.as_nanos()).unwrap_or(u64::MAX);
        self.reorder_delay_ns.store(ns, Ordering::Relaxed);
        self.reorder.store(threshold(p), Ordering::Relaxed);
    }

    /// Write packets twice with probability `p` (validated by the caller).
    pub(crate) fn set_duplicate(&self, p: f64) {
        self.duplicate.store(threshold(p), Ordering::Relaxed);
    }

    /// The rate of the bottleneck (`tbf`) that direction `dir` (0: forward) reads
    /// behind; 0 when none does.
    pub(crate) fn set_line_rate(&self, dir: usize, rate_bps: u64) {
        self.line_rate_bps[dir].store(rate_bps, Ordering::Relaxed);
    }
}

/// SplitMix64 (Steele, Lea & Flood, OOPSLA 2014): fast, and good enough for
/// Bernoulli draws; the same generator seeds `cm-sim`'s xoshiro.
struct SplitMix64(u64);

impl SplitMix64 {
    fn from_clock() -> Self {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        SplitMix64(t ^ (u64::from(std::process::id()) << 32))
    }

    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// `true` with probability `threshold / 2³²`; draws nothing for 0.
    fn chance(&mut self, threshold: u64) -> bool {
        threshold > 0 && (self.next_u64() >> 32) < threshold
    }
}

/// Counters of one direction of the delay box.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct DirectionStats {
    /// Packets written back (delivered onward), duplicate copies included.
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
    /// Packets held back by the reorder delay (forward direction only).
    #[serde(default)]
    pub reordered: u64,
    /// Extra copies written (duplication; forward direction only).
    #[serde(default)]
    pub duplicated: u64,
}

impl DirectionStats {
    /// The mean lateness of the writes since `earlier` (a snapshot of the same
    /// direction taken before), in microseconds; 0 if there were none.
    pub fn mean_late_us_since(&self, earlier: &DirectionStats) -> f64 {
        let packets = self.packets.saturating_sub(earlier.packets);
        if packets == 0 {
            return 0.0;
        }
        let sum =
            self.mean_late_us * self.packets as f64 - earlier.mean_late_us * earlier.packets as f64;
        sum / packets as f64
    }
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
            reordered: self.reordered.load(Ordering::Relaxed),
            duplicated: self.duplicated.load(Ordering::Relaxed),
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
    controls: Arc<Controls>,
}

impl DelayBox {
    /// Create `tunf` and `tunr` in namespace `ns` and start forwarding with `delay`.
    pub(crate) fn start(ns: &str, delay: Duration) -> Result<DelayBox> {
        Self::start_ends([(ns, TUN_FORWARD), (ns, TUN_REVERSE)], delay)
    }

    /// Create the TUN device `ends[i].1` in namespace `ends[i].0` for direction `i`
    /// (0 is "forward": reordering and duplication apply to it) and start
    /// forwarding with `delay`. The two ends may live in different namespaces
    /// (one duplex link of a [`Network`](crate::topo::Network): each direction's
    /// TUN in its transmitting node).
    pub(crate) fn start_ends(ends: [(&str, &str); 2], delay: Duration) -> Result<DelayBox> {
        let wake = rustix::event::eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK)
            .map_err(|e| NetemError::io("eventfd for the delay box", e.into()))?;
        let wake_thread = wake.try_clone().io_context(|| "dup eventfd")?;
        let counters = Arc::new(Counters::default());
        let c2 = Arc::clone(&counters);
        let controls = Arc::new(Controls::default());
        let i2 = Arc::clone(&controls);
        let ends = ends.map(|(ns, tun)| (ns.to_string(), tun.to_string()));
        let (tx, rx) = mpsc::channel::<Result<()>>();
        let thread = std::thread::Builder::new()
            .name(format!("delaybox-{}", ends[1].1))
            .spawn(move || {
                let setup = (|| -> Result<[File; 2]> {
                    let open = |(ns, tun): &(String, String)| -> Result<File> {
                        netns::enter(ns)?;
                        open_tun(tun).io_context(|| format!("create TUN device {tun} in {ns}"))
                    };
                    Ok([open(&ends[0])?, open(&ends[1])?])
                })();
                match setup {
                    Ok(tuns) => {
                        let _ = tx.send(Ok(()));
                        drop(tx);
                        run(tuns, delay, wake_thread, &c2, &i2);
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
            controls,
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

    /// The forward direction's reordering and duplication and the line rates
    /// (0 until set).
    pub(crate) fn controls(&self) -> &Controls {
        &self.controls
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

fn run(tuns: [File; 2], delay: Duration, wake: OwnedFd, c: &Counters, ctl: &Controls) {
    // Wake up on time, not up to 50 µs late.
    let _ = rustix::thread::set_current_timer_slack(NonZeroU64::new(1));
    // A real-time thread is woken on time even while compilers fill every core; its
    // CPU use is bounded (it sleeps between deadlines, spins at most ~200 µs).
    c.realtime
        .store(set_realtime(REALTIME_PRIORITY).is_ok(), Ordering::Relaxed);
    if serve(&tuns, &mut State::new(delay), &wake, c, ctl).is_err() {
        c.failed.store(true, Ordering::Relaxed);
    }
}

/// Forward packets until asked to stop (`Ok`) or a device fails (`Err`).
fn serve(
    tuns: &[File; 2],
    st: &mut State,
    wake: &OwnedFd,
    c: &Counters,
    ctl: &Controls,
) -> io::Result<()> {
    let mut oversleep_ns: f64 = 50_000.0;
    loop {
        // Deliver everything that is due.
        let next = st.deliver_due(tuns, Instant::now(), c);
        // Sleep until shortly before the next deadline (by the wake-up latency seen so
        // far), then spin the last stretch: writes land within a few µs of their time.
        let mut timeout = None;
        if let Some(n) = next {
            let now = Instant::now();
            let wait = n.saturating_duration_since(now);
            let early = Duration::from_nanos(oversleep_ns as u64 + SPIN_NS);
            if wait <= early {
                // Keep reading while spinning, so that a packet arriving now is
                // stamped now and not when the spin ends.
                while Instant::now() < n {
                    for (i, tun) in tuns.iter().enumerate() {
                        st.read_ready(i, tun, c, ctl)?;
                    }
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
            PollFd::new(wake, PollFlags::IN),
        ];
        match rustix::event::poll(&mut fds, timeout.as_ref()) {
            Ok(_) => {}
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
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
            return Ok(()); // asked to stop
        }
        for (i, tun) in tuns.iter().enumerate() {
            let ev = revents[i];
            if ev.intersects(PollFlags::ERR | PollFlags::HUP | PollFlags::NVAL) {
                return Err(io::Error::other("TUN device error"));
            }
            if ev.contains(PollFlags::IN) {
                st.read_ready(i, tun, c, ctl)?;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mean_lateness_since_a_snapshot_counts_only_the_later_writes() {
        let at = |packets, mean_late_us| DirectionStats {
            packets,
            mean_late_us,
            ..DirectionStats::default()
        };
        // 100 writes 10 µs late, then 300 more 50 µs late: 40 µs over all 400.
        let (before, after) = (at(100, 10.0), at(400, 40.0));
        assert!((after.mean_late_us_since(&before) - 50.0).abs() < 1e-9);
        assert_eq!(after.mean_late_us_since(&after), 0.0, "no writes since");
    }

    #[test]
    fn thresholds_and_draws() {
        assert_eq!(threshold(0.0), 0);
        assert_eq!(threshold(1.0), 1 << 32);
        assert_eq!(threshold(0.5), 1 << 31);
        let mut r = SplitMix64(42);
        assert!(!r.chance(0) && r.chance(1 << 32));
        let n = 200_000;
        let hits = (0..n).filter(|_| r.chance(threshold(0.05))).count();
        // 0.05 ± 4.5 standard deviations (0.00049 at this n).
        let f = hits as f64 / n as f64;
        assert!((f - 0.05).abs() < 0.0022, "{f}");
    }
}
