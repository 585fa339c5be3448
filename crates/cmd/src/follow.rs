//! Running beside the busiest client: the daemon moves its thread to the
//! CPU its busiest shared-memory client publishes from.
//!
//! Why: a client that waits for a grant yields its CPU. With the daemon
//! queued on that same CPU, the daemon runs at once, grants, and the client
//! continues: a hand-off between two threads of one CPU, the rings hot in
//! its cache. With the daemon on another CPU, every answer needs a wake-up
//! there (an inter-processor interrupt, ~50 µs on the target VM) and
//! preempts whatever else runs on that CPU: on a 2-CPU machine, the
//! application's own receiver or sender. The idea is Linux's Receive Flow
//! Steering (`Documentation/networking/scaling.rst`, "RFS"): do the work
//! for a flow on the CPU where the application consuming it runs. Measured
//! with the libcm API benchmark at 1200 B (sender and receiver threads on
//! 2 CPUs): see the README's benchmark section.
//!
//! Rules:
//! - Only CPUs of the affinity mask the daemon started with (systemd's
//!   `CPUAffinity=`, `taskset`): it never widens what it was given.
//! - At most one decision per [`PERIOD`], for the client that published
//!   the most frames in it, and only if that is at least [`BUSY_FRAMES`]
//!   (a busy client, not a heartbeat).
//! - After [`QUIET`] without a busy client, the start mask is restored and
//!   the kernel places the daemon again (looked at on the loop's next turn:
//!   an idle loop turns at least every 100 ms).
//! - The CPU is a hint the client writes in shared memory: a client that
//!   lies can only move the daemon among the CPUs it may use anyway.
//! - `follow_client_cpu = false` (or `--no-follow-client-cpu`) turns it off.

use std::time::{Duration, Instant};

use rustix::thread::{CpuSet, sched_getaffinity, sched_setaffinity};

use crate::log;

/// How often the busiest client is looked at.
pub(crate) const PERIOD: Duration = Duration::from_millis(1);
/// Frames in a period that make a client busy.
pub(crate) const BUSY_FRAMES: u64 = 4;
/// Time without a busy client before the start mask is restored.
pub(crate) const QUIET: Duration = Duration::from_millis(100);

/// The daemon thread's CPU placement.
#[derive(Debug)]
pub(crate) struct Follow {
    start_mask: CpuSet,
    /// The CPU the thread is pinned to (None: the start mask).
    pinned: Option<usize>,
    period_start: Instant,
    /// When a client was last busy.
    last_busy: Instant,
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
            moves: 0,
        })
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
        match target {
            Some(c) if frames >= BUSY_FRAMES => {
                self.last_busy = now;
                if self.pinned != Some(c) {
                    let mut set = CpuSet::new();
                    set.set(c);
                    return self.apply(&set, Some(c));
                }
            }
            _ => {
                if now.duration_since(self.last_busy) >= QUIET && self.pinned.is_some() {
                    let mask = self.start_mask;
                    return self.apply(&mask, None);
                }
            }
        }
        true
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
        // A busy client does.
        assert!(f.decide(at(2, t0), 50, Some(c)));
        assert_eq!(f.pinned(), Some(c as usize));
        let now = sched_getaffinity(None).unwrap();
        assert!(now.is_set(c as usize) && now.count() == 1);
        // A CPU outside the start mask (or absurd) is ignored.
        assert!(f.decide(at(3, t0), 50, Some(u32::MAX - 1)));
        assert_eq!(f.pinned(), Some(c as usize));
        // Quiet, but not long enough: still there.
        assert!(f.decide(at(50, t0), 0, None));
        assert_eq!(f.pinned(), Some(c as usize));
        // Quiet long enough: the start mask is back.
        assert!(f.decide(at(2, t0) + QUIET, 0, None));
        assert_eq!(f.pinned(), None);
        assert_eq!(
            sched_getaffinity(None).unwrap().count(),
            f.start_mask.count()
        );
    }
}
