//! The real clock, as the core's microsecond [`cm_core::Instant`].

use std::time::Instant as StdInstant;

/// Microseconds since this clock was made (the core's epoch).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Clock {
    epoch: StdInstant,
}

impl Clock {
    pub(crate) fn new() -> Self {
        Clock {
            epoch: StdInstant::now(),
        }
    }

    pub(crate) fn now(&self) -> cm_core::Instant {
        let us = self.epoch.elapsed().as_micros();
        cm_core::Instant::from_micros(u64::try_from(us).unwrap_or(u64::MAX))
    }

    /// How long from now until `t` (zero if past).
    pub(crate) fn until(&self, t: cm_core::Instant) -> std::time::Duration {
        std::time::Duration::from_micros(t.saturating_since(self.now()).as_micros())
    }
}
