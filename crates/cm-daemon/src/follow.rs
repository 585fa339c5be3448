//! Running beside the busiest client: the daemon moves its thread to the
//! CPU on which its busiest shared-memory client waits for it.
//!
//! Why: a libcm client that waits for an answer polls its ring and yields
//! its CPU (`Cm::set_spin`). With the daemon queued on that same CPU, the
//! daemon runs at once, answers, and the client continues: a hand-off
//! between two threads of one CPU, the rings hot in its cache. With the
//! daemon on another CPU, every answer needs a wake-up there (an
//! inter-processor interrupt, ~50 µs on the target VM) and preempts
//! whatever else runs on that CPU: on a 2-CPU machine, the application's
//! own receiver or sender. The idea is Linux's Receive Flow Steering
//! (`Documentation/networking/scaling.rst`, "RFS"): do the work for a flow
//! on the CPU where the application consuming it runs. Measured with the
//! libcm API benchmark at 1200 B: see the README's benchmark section.
//!
//! Rules:
//! - A client says where it waits: libcm writes its CPU into the shared
//!   region each time it starts polling-and-yielding for an answer, and
//!   the daemon takes (clears) it once per period, so only a client that
//!   waited so in the period has a CPU (a stale one, written once by a
//!   client that then never waits again, would pin the daemon beside a
//!   thread that does not hand its CPU over). A client that
//!   sleeps while it waits has no CPU to hand over and is not followed:
//!   measured with `cm flow` (which sleeps in `poll`), following it cost
//!   20-40% of its throughput.
//! - Only CPUs of the affinity mask the daemon started with (systemd's
//!   `CPUAffinity=`, `taskset`): it never widens what it was given.
//! - One decision per [`PERIOD`], for the client that published the most
//!   frames in it among those that say where they wait (a busier one that
//!   does not must not hide it), if at least [`BUSY_FRAMES`] (busy, not a
//!   heartbeat), and a move only after [`STEADY_PERIODS`] busy periods
//!   from the same CPU with none from another between them (a client the
//!   kernel bounces between CPUs is not chased every millisecond).
//! - After [`QUIET`] without a busy client, the start mask is restored and
//!   the kernel places the daemon again (looked at on the loop's next turn:
//!   an idle loop turns at least every 100 ms).
//! - The CPU is a hint the client writes in shared memory: a client that
//!   lies can only move the daemon among the CPUs it may use anyway.
//! - Beside a thread that busy-polls without yielding, the daemon would get
//!   the CPU only when the kernel preempts that thread (milliseconds;
//!   measured: a `cm flow` whose poll loop never slept fell from 80,000 to
//!   1,500 datagrams/s). So the loop measures, while pinned, the gaps of at
//!   least [`LONG_GAP`] between turns whose wait did not sleep (it polled,
//!   so only the scheduler kept it away): if they add up to half of a
//!   [`STARVE_WINDOW`], it lets go and following stays off for
//!   [`HOLD_MIN`], doubling up to [`HOLD_MAX`] while it recurs (logged,
//!   with the time kept off). Measured with temporary instrumentation of
//!   this loop: 75-97 ms of such gaps per 100 ms beside that busy-polling
//!   loop, 0-4 ms beside the API benchmark's sender, which yields.
//! - `follow_client_cpu = false` (or `--no-follow-client-cpu`) turns it off.

use std::time::{Duration, Instant};

use rustix::thread::{CpuSet, sched_getaffinity, sched_setaffinity};

use crate::log;

/// How often the busiest client is looked at.
pub(crate) const PERIOD: Duration = Duration::from_millis(1);
/// Busy periods from the same CPU, none from another between them, before
/// the daemon moves there (a client the kernel bounces between CPUs is not
/// chased every millisecond).
pub(crate) const STEADY_PERIODS: u32 = 3;
/// Frames in a period that make a client busy.
pub(crate) const BUSY_FRAMES: u64 = 4;
/// Time without a busy client before the start mask is restored.
pub(crate) const QUIET: Duration = Duration::from_millis(100);
/// A gap this long between loop turns that did not sleep counts as time
/// the daemon was kept off its CPU.
pub(crate) const LONG_GAP: Duration = Duration::from_micros(500);
/// Starved: long gaps fill half of this window.
pub(crate) const STARVE_WINDOW: Duration = Duration::from_millis(100);
/// How long following stays off after starving, at first and at most.
pub(crate) const HOLD_MIN: Duration = Duration::from_secs(1);
pub(crate) const HOLD_MAX: Duration = Duration::from_secs(64);

/// The daemon thread's CPU placement.
#[derive(Debug)]
pub(crate) struct Follow {
    start_mask: CpuSet,
    /// The CPU the thread is pinned to (None: the start mask).
    pinned: Option<usize>,
    period_start: Instant,
    /// When a client was last busy.
    last_busy: Instant,
    /// The CPU the busiest client published from in recent periods, and
    /// for how many in a row.
    seen: Option<(usize, u32)>,
    /// When the loop last turned.
    last_turn: Instant,
    /// The current starvation window: its start, and its long gaps.
    window_start: Instant,
    kept_off: Duration,
    /// No following before this (it starved there).
    hold_until: Option<Instant>,
    /// The next hold (doubles while starving recurs).
    hold: Duration,
    /// Times it let go because it starved (for the log at shutdown).
    pub(crate) starved: u64,
    /// Moves made (for the log at shutdown and tests).
    pub(crate) moves: u64,
}

/// Prints a CPU set as its list of CPUs.
struct CpuSetDebug<'a>(&'a CpuSet);

impl std::fmt::Debug for CpuSetDebug<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let cpus: Vec<usize> = (0..CpuSet::MAX_CPU).filter(|&c| self.0.is_set(c)).collect();
        write!(f, "{cpus:?}")
    }
}

impl Follow {
    /// Following from the calling thread's current mask; `None` when that
    /// mask cannot be read or holds one CPU (nowhere to move).
    pub(crate) fn new() -> Option<Follow> {
        let start_mask = sched_getaffinity(None).ok()?;
        if start_mask.count() < 2 {
            return None;
        }
        Some(Follow {
            start_mask,
            pinned: None,
            period_start: Instant::now(),
            last_busy: Instant::now(),
            seen: None,
            last_turn: Instant::now(),
            window_start: Instant::now(),
            kept_off: Duration::ZERO,
            hold_until: None,
            hold: HOLD_MIN,
            starved: 0,
            moves: 0,
        })
    }

    /// Every loop turn: `polled` says the wait before it did not sleep. A
    /// pinned thread kept off its CPU for half a [`STARVE_WINDOW`] lets go
    /// and holds off. Returns false if following must stop (moving failed).
    pub(crate) fn turn(&mut self, now: Instant, polled: bool) -> bool {
        let gap = now.saturating_duration_since(self.last_turn);
        self.last_turn = now;
        if self.pinned.is_none() {
            self.window_start = now;
            self.kept_off = Duration::ZERO;
            return true;
        }
        if polled && gap >= LONG_GAP {
            self.kept_off += gap;
        }
        if now.saturating_duration_since(self.window_start) < STARVE_WINDOW {
            return true;
        }
        let kept_off = std::mem::take(&mut self.kept_off);
        self.window_start = now;
        if kept_off < STARVE_WINDOW / 2 {
            return true;
        }
        self.starved += 1;
        // Doubling while it recurs; back to the minimum after a calm spell.
        let recent = self.hold_until.is_some_and(|t| now < t + self.hold);
        self.hold = if recent {
            (self.hold * 2).min(HOLD_MAX)
        } else {
            HOLD_MIN
        };
        self.hold_until = Some(now + self.hold);
        log!(
            info,
            "msg=\"starved beside the client followed; letting go\" kept_off_ms={} \
             of_ms={} hold_s={}",
            kept_off.as_millis(),
            STARVE_WINDOW.as_millis(),
            self.hold.as_secs()
        );
        self.unpin()
    }

    /// Whether a period has ended (then call [`Follow::decide`]).
    pub(crate) fn due(&self, now: Instant) -> bool {
        now.duration_since(self.period_start) >= PERIOD
    }

    /// End a period in which the busiest client published `frames` frames
    /// from `cpu` (as it says). Returns false if moving failed and
    /// following should stop.
    pub(crate) fn decide(&mut self, now: Instant, frames: u64, cpu: Option<u32>) -> bool {
        self.period_start = now;
        let target = cpu
            .and_then(|c| usize::try_from(c).ok())
            .filter(|&c| c < CpuSet::MAX_CPU && self.start_mask.is_set(c));
        let held = self.hold_until.is_some_and(|t| now < t);
        match target {
            Some(c) if frames >= BUSY_FRAMES && !held => {
                self.last_busy = now;
                let n = match self.seen {
                    Some((s, n)) if s == c => n.saturating_add(1),
                    _ => 1,
                };
                self.seen = Some((c, n));
                if self.pinned != Some(c) && n >= STEADY_PERIODS {
                    let mut set = CpuSet::new();
                    set.set(c);
                    return self.apply(&set, Some(c));
                }
            }
            _ => {
                if now.duration_since(self.last_busy) >= QUIET && self.pinned.is_some() {
                    return self.unpin();
                }
            }
        }
        true
    }

    /// Back to the start mask.
    fn unpin(&mut self) -> bool {
        let mask = self.start_mask;
        self.apply(&mask, None)
    }

    fn apply(&mut self, set: &CpuSet, pinned: Option<usize>) -> bool {
        match sched_setaffinity(None, set) {
            Ok(()) => {
                self.pinned = pinned;
                self.moves += 1;
                true
            }
            Err(e) => {
                log!(
                    warn,
                    "msg=\"cannot move the daemon thread; not following clients' CPUs\" \
                     cpus=\"{:?}\" error=\"{e}\"",
                    CpuSetDebug(set)
                );
                // Back to where it started, if that still works.
                let _ = sched_setaffinity(None, &self.start_mask);
                self.pinned = None;
                false
            }
        }
    }

    /// The CPU the thread is pinned to, if any.
    #[cfg(test)]
    pub(crate) fn pinned(&self) -> Option<usize> {
        self.pinned
    }
}

impl Drop for Follow {
    /// Leave the thread as it was found (the daemon may run embedded in a
    /// program, as in the benchmark and tests).
    fn drop(&mut self) {
        if self.pinned.is_some() {
            let _ = sched_setaffinity(None, &self.start_mask);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: u64, t0: Instant) -> Instant {
        t0 + Duration::from_millis(ms)
    }

    /// A busy client on `cpu` for [`STEADY_PERIODS`] periods from `t`.
    fn steady(f: &mut Follow, t: Instant, cpu: u32) -> bool {
        (0..STEADY_PERIODS).all(|i| f.decide(t + PERIOD * i, 50, Some(cpu)))
    }

    #[test]
    fn follows_a_busy_client_within_the_start_mask_then_lets_go() {
        let Some(mut f) = Follow::new() else {
            return; // a one-CPU machine: nothing to follow
        };
        let t0 = Instant::now();
        let cpus: Vec<usize> = (0..CpuSet::MAX_CPU)
            .filter(|&c| f.start_mask.is_set(c))
            .collect();
        let c = cpus[1] as u32;
        // A heartbeat does not move the daemon.
        assert!(f.decide(at(1, t0), BUSY_FRAMES - 1, Some(c)));
        assert_eq!(f.pinned(), None);
        // A busy client does, once it has stayed on its CPU a while.
        assert!(f.decide(at(1, t0), 50, Some(c)));
        assert_eq!(f.pinned(), None, "not after one period");
        assert!(steady(&mut f, at(2, t0), c));
        assert_eq!(f.pinned(), Some(c as usize));
        let now = sched_getaffinity(None).unwrap();
        assert!(now.is_set(c as usize) && now.count() == 1);
        // A CPU outside the start mask (or absurd) is ignored.
        assert!(f.decide(at(3, t0), 50, Some(u32::MAX - 1)));
        assert_eq!(f.pinned(), Some(c as usize));
        // A few long polling gaps are not starvation...
        assert!(f.turn(at(3, t0), true));
        assert!(f.turn(at(5, t0), true));
        assert!(f.turn(at(110, t0), false));
        assert_eq!(f.pinned(), Some(c as usize));
        // ...but a window mostly spent kept off the CPU is: let go, and hold
        // off even for a busy client.
        let mut t = at(110, t0);
        while f.pinned().is_some() {
            t += Duration::from_millis(4);
            assert!(f.turn(t, true));
            assert!(t < at(400, t0), "never let go");
        }
        assert_eq!(f.starved, 1);
        assert!(f.decide(t, 50, Some(c)));
        assert_eq!(f.pinned(), None, "held off");
        // After the hold it follows again, and a sleeping loop's long gaps
        // are not starvation.
        let t = t + HOLD_MIN;
        assert!(steady(&mut f, t, c));
        assert_eq!(f.pinned(), Some(c as usize), "following again");
        assert!(f.turn(t + Duration::from_millis(300), false));
        assert!(f.turn(t + Duration::from_millis(301), false));
        assert_eq!(f.pinned(), Some(c as usize));
        // Quiet, but not long enough: still there.
        let busy = t + PERIOD * STEADY_PERIODS;
        assert!(f.decide(busy + QUIET / 2, 0, None));
        assert_eq!(f.pinned(), Some(c as usize));
        // Quiet long enough: the start mask is back.
        assert!(f.decide(busy + QUIET, 0, None));
        assert_eq!(f.pinned(), None);
        assert_eq!(
            sched_getaffinity(None).unwrap().count(),
            f.start_mask.count()
        );
    }
}
