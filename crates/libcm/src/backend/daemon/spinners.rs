//! How many of this process's threads may spin for an answer at once.
//!
//! A spinning client is runnable for the whole spin, yielding between
//! polls, and `sched_yield` gives the CPU to the daemon only if the
//! scheduler picks it next. With more spinning threads than CPUs, the
//! daemon that is to answer them gets a share of one thread among all of
//! them, and spinning cannot make its answer come sooner. So at most one
//! thread per CPU but one (at least one) spins; the others sleep on their
//! doorbells at once. (`cm bench load --bulk --clients 1000` showed what
//! client threads that do not sleep do to the daemon: 90% of both CPUs to
//! the clients, 6% to the daemon, and the load stalled. The cause there
//! was a reply wait that polled without end, fixed in `block_for`; this
//! bound keeps the bounded spins from doing the same in a smaller way.)
//! Separate processes do not share this count; there, the adaptive spin
//! (module docs of `daemon`) shrinks when answers come late.

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
