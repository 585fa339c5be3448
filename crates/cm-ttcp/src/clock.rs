//! Wall time as the transports' [`cm_core::Instant`] (microseconds since a
//! process-wide epoch), and the calling thread's CPU time.

use std::sync::OnceLock;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

static EPOCH: OnceLock<Instant> = OnceLock::new();

/// The process epoch: every timestamp in a [`crate::Summary`] (`start_s`,
/// `end_s`) is in seconds since this instant, so senders and receivers in
/// different threads of one process line up.
pub fn epoch() -> Instant {
    *EPOCH.get_or_init(Instant::now)
}

/// `t` as a [`cm_core::Instant`] (µs since [`epoch`]).
pub(crate) fn to_cm(t: Instant) -> cm_core::Instant {
    let us = t.saturating_duration_since(epoch()).as_micros();
    cm_core::Instant::from_micros(u64::try_from(us).unwrap_or(u64::MAX))
}

/// A [`cm_core::Instant`] back as wall time, rounded up to the next
/// microsecond so a wait never ends before the deadline.
pub(crate) fn from_cm(t: cm_core::Instant) -> Instant {
    epoch() + Duration::from_micros(t.as_micros().saturating_add(1))
}

/// Seconds since [`epoch`].
pub(crate) fn secs(t: Instant) -> f64 {
    t.saturating_duration_since(epoch()).as_secs_f64()
}

/// Seconds since the Unix epoch, now.
pub(crate) fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// CPU time (user + system) the calling thread has used.
pub(crate) fn thread_cpu() -> Duration {
    let ts = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    Duration::new(
        u64::try_from(ts.tv_sec).unwrap_or(0),
        u32::try_from(ts.tv_nsec).unwrap_or(0),
    )
}
