//! How many of this process's threads may spin for an answer at once.
//!
//! A spinning client is runnable for the whole spin, yielding between
//! polls, and `sched_yield` gives the CPU to the daemon only if the
//! scheduler picks it next. With many more spinning clients than CPUs, the
//! daemon gets its fair share of one thread among all of them: at 1000
//! client threads on 2 CPUs (`cm bench load --bulk --clients 1000`) the
//! clients' spins took 90% of the machine and the daemon 6%, its answers
//! took longer than the spins, and the load stalled until the clients'
//! reply timeouts ran out. So at most one thread per CPU but one (at least
//! one) spins; the others sleep on their doorbells at once. Separate
//! processes do not share this count; there, the adaptive spin (module
//! docs of `daemon`) shrinks when answers come late.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

static SPINNING: AtomicUsize = AtomicUsize::new(0);

/// Threads of this process allowed to spin at once.
fn limit() -> usize {
    static LIMIT: OnceLock<usize> = OnceLock::new();
    *LIMIT.get_or_init(|| {
        std::thread::available_parallelism()
            .map_or(1, std::num::NonZeroUsize::get)
            .saturating_sub(1)
            .max(1)
    })
}

/// A place among the spinning threads, given back when dropped.
pub(super) struct Slot(());

impl Drop for Slot {
    fn drop(&mut self) {
        SPINNING.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A place to spin in, or `None` when enough threads spin already.
pub(super) fn take() -> Option<Slot> {
    if SPINNING.fetch_add(1, Ordering::AcqRel) >= limit() {
        SPINNING.fetch_sub(1, Ordering::AcqRel);
        return None;
    }
    Some(Slot(()))
}
