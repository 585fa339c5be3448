//! # cm-clock: the real clocks of the Congestion Manager's drivers
//!
//! `cm-core` never reads a clock: its drivers pass time in as a
//! [`cm_core::Instant`], integer microseconds since an epoch of the
//! driver's choosing. Every driver that runs on real time (libcm's embedded
//! mode and its CC-UDP sockets, the daemon, `cm demo`, `cm flow`, the ttcp
//! transports, the benchmarks) takes that epoch from here, so that instants
//! made in different threads and modules of one process compare.
//!
//! It sits beside the core, below every I/O crate:
//!
//! ```text
//! cm-core (no clock)  <-  cm-clock (real clock)  <-  libcm, cm-daemon, cm-ttcp, cm
//! ```
//!
//! ```
//! let t0 = cm_clock::now();
//! std::thread::sleep(std::time::Duration::from_millis(2));
//! let t1 = cm_clock::now();
//! assert!(t1.saturating_since(t0).as_micros() >= 2_000);
//! // Back and forth between the core's instants and std's.
//! let std_t = cm_clock::to_std(t1);
//! assert!(cm_clock::from_std(std_t) >= t1);
//! ```
#![warn(missing_docs)]

mod threads;

pub use threads::{ThreadCpu, named_thread_cpu, threads};

use std::sync::OnceLock;
use std::time::{Duration as StdDuration, Instant as StdInstant, SystemTime, UNIX_EPOCH};

static EPOCH: OnceLock<StdInstant> = OnceLock::new();

/// The process-wide epoch: [`cm_core::Instant::ZERO`] is this moment (the
/// first time an instant was converted or [`epoch`] called in the process).
pub fn epoch() -> StdInstant {
    *EPOCH.get_or_init(StdInstant::now)
}

/// Now, as the core's [`cm_core::Instant`] (µs since [`epoch`]).
pub fn now() -> cm_core::Instant {
    from_std(StdInstant::now())
}

/// A [`std::time::Instant`] as the core's [`cm_core::Instant`] (µs since
/// [`epoch`]; instants before the epoch are [`cm_core::Instant::ZERO`]).
pub fn from_std(t: StdInstant) -> cm_core::Instant {
    let us = t.saturating_duration_since(epoch()).as_micros();
    cm_core::Instant::from_micros(u64::try_from(us).unwrap_or(u64::MAX))
}

/// A core instant back as a [`std::time::Instant`], rounded up to the next
/// microsecond so that a wait until it never ends before the deadline.
pub fn to_std(t: cm_core::Instant) -> StdInstant {
    epoch() + StdDuration::from_micros(t.as_micros().saturating_add(1))
}

/// How long from now until `t` (zero if `t` has passed).
pub fn until(t: cm_core::Instant) -> StdDuration {
    StdDuration::from_micros(t.saturating_since(now()).as_micros())
}

/// A core duration as a [`std::time::Duration`].
pub fn to_std_duration(d: cm_core::Duration) -> StdDuration {
    StdDuration::from_micros(d.as_micros())
}

/// A [`std::time::Duration`] as a core duration (saturating at
/// [`cm_core::Duration::MAX`]).
pub fn from_std_duration(d: StdDuration) -> cm_core::Duration {
    cm_core::Duration::from_micros(u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
}

/// Seconds from [`epoch`] to `t`.
pub fn secs_since_epoch(t: StdInstant) -> f64 {
    t.saturating_duration_since(epoch()).as_secs_f64()
}

/// Seconds since the Unix epoch, now (wall-clock time for logs and
/// reports; never used to drive the CM).
pub fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// CPU time (user + system) the calling thread has used
/// (`CLOCK_THREAD_CPUTIME_ID`).
pub fn thread_cpu() -> StdDuration {
    cpu_clock(rustix::time::ClockId::ThreadCPUTime)
}

/// CPU time (user + system) the whole process has used
/// (`CLOCK_PROCESS_CPUTIME_ID`).
pub fn process_cpu() -> StdDuration {
    cpu_clock(rustix::time::ClockId::ProcessCPUTime)
}

fn cpu_clock(id: rustix::time::ClockId) -> StdDuration {
    let ts = rustix::time::clock_gettime(id);
    StdDuration::new(
        u64::try_from(ts.tv_sec).unwrap_or(0),
        u32::try_from(ts.tv_nsec).unwrap_or(0),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_never_ends_early() {
        let _ = epoch(); // instants before the epoch saturate to zero
        let t = StdInstant::now();
        let core = from_std(t);
        assert!(to_std(core) >= t);
        assert!(to_std(core) - t <= StdDuration::from_micros(2));
    }

    #[test]
    fn before_the_epoch_is_zero() {
        let e = epoch();
        let before = e.checked_sub(StdDuration::from_secs(1)).unwrap_or(e);
        assert_eq!(from_std(before), cm_core::Instant::ZERO);
    }

    #[test]
    fn thread_cpu_grows_with_work() {
        let a = thread_cpu();
        let mut x = 0u64;
        let until = StdInstant::now() + StdDuration::from_millis(20);
        while StdInstant::now() < until {
            x = x.wrapping_mul(31).wrapping_add(7);
        }
        std::hint::black_box(x);
        assert!(thread_cpu() > a);
        assert!(process_cpu() >= thread_cpu());
    }
}
