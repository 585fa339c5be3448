//! Spin-then-block waiting for the daemon's loop.
//!
//! A cross-CPU wake-up of a sleeping thread costs ~50 µs on the target
//! machine (a 2-CPU VM), several times the work of a whole
//! loop turn. While clients are busy, the next frame usually arrives within
//! microseconds of the last, so after a turn that did work the loop keeps
//! polling without blocking for a bounded time, yielding the CPU between
//! polls so that runnable threads (the clients themselves, on a machine
//! with few cores) are not held up, and blocks only once that time passed
//! with nothing to do. A frame that arrives while the loop spins needs no
//! wake-up at all.
//!
//! This is the two-phase waiting of adaptive locks and busy-polling
//! sockets: spin for about the cost of blocking, then block (Karlin et
//! al., "Empirical studies of competitive spinning for a shared-memory
//! multiprocessor", SOSP 1991; Linux `SO_BUSY_POLL` /
//! `net.core.busy_poll`). An idle daemon blocks: the spin only follows
//! activity, so it costs no CPU when no client is active.

use std::time::{Duration, Instant};

/// When the loop may poll instead of block.
#[derive(Debug)]
pub(crate) struct Spin {
    budget: Duration,
    /// The last time a poll found work (None: never, or the budget is 0).
    last_active: Option<Instant>,
}

impl Spin {
    /// Spin for up to `budget` after the last activity (zero: never spin).
    pub(crate) fn new(budget: Duration) -> Self {
        Spin {
            budget,
            last_active: None,
        }
    }

    /// Whether the next wait should be a non-blocking poll, at `now` (the
    /// loop reads the clock once per turn and passes it around).
    pub(crate) fn spinning(&self, now: Instant) -> bool {
        self.last_active
            .is_some_and(|t| now.saturating_duration_since(t) < self.budget)
    }

    /// Record what the last wait found, at `now`. An empty poll while
    /// spinning gives the CPU to any other runnable thread before the next
    /// one.
    pub(crate) fn observe(&mut self, found_work: bool, now: Instant) {
        if found_work {
            if !self.budget.is_zero() {
                self.last_active = Some(now);
            }
        } else if self.spinning(now) {
            std::thread::yield_now();
        } else {
            self.last_active = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_budget_never_spins() {
        let mut s = Spin::new(Duration::ZERO);
        let t = Instant::now();
        s.observe(true, t);
        assert!(!s.spinning(t));
    }

    #[test]
    fn spins_after_work_then_blocks() {
        let mut s = Spin::new(Duration::from_millis(20));
        let t0 = Instant::now();
        assert!(!s.spinning(t0), "an idle loop blocks from the start");
        s.observe(true, t0);
        assert!(s.spinning(t0 + Duration::from_millis(19)));
        let later = t0 + Duration::from_millis(30);
        assert!(!s.spinning(later), "the spin is bounded");
        s.observe(false, later);
        assert!(!s.spinning(later));
        s.observe(true, later);
        assert!(s.spinning(later), "new work starts a new spin");
    }
}
