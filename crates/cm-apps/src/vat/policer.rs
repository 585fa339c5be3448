//! The policer of cm-implementation-linux §3.6: long-term adaptation of a
//! source that cannot change its rate, by dropping frames preemptively.
//!
//! It is a token bucket filled at the CM's rate for the flow (what
//! `cm_query` reports), averaged over a window of seconds so that the
//! controller's short-term probing does not reach it: short-term variation
//! is the application buffer's job. Until the CM has a rate (before the
//! first RTT sample), everything passes.

use std::time::Duration;

use cm_core::Instant;

/// A token bucket at the CM's long-term rate.
#[derive(Clone, Debug)]
pub struct Policer {
    window: f64,
    depth: f64,
    tokens: f64,
    rate: Option<f64>,
    last: Option<Instant>,
}

impl Policer {
    /// A policer averaging over `window` whose bucket holds `depth` bytes
    /// (a few frames: the burst it lets through at once).
    pub fn new(window: Duration, depth: usize) -> Self {
        Policer {
            window: window.as_secs_f64().max(1e-3),
            depth: depth as f64,
            tokens: depth as f64,
            rate: None,
            last: None,
        }
    }

    /// The long-term rate it polices to, bytes/s (`None` before the CM has
    /// one).
    pub fn rate(&self) -> Option<f64> {
        self.rate
    }

    /// Take the CM's current rate for the flow (bytes/s) at `now`, and fill
    /// the bucket for the time since the last call.
    pub fn observe(&mut self, now: Instant, cm_rate: Option<f64>) {
        let dt = self
            .last
            .map_or(0.0, |l| now.saturating_since(l).as_secs_f64());
        self.last = Some(now);
        if let Some(r) = self.rate {
            self.tokens = (self.tokens + r * dt).min(self.depth);
        }
        if let Some(c) = cm_rate.filter(|c| c.is_finite() && *c > 0.0) {
            // An exponentially weighted mean with time constant `window`.
            let w = 1.0 - (-dt / self.window).exp();
            self.rate = Some(self.rate.map_or(c, |r| r + w * (c - r)));
        }
    }

    /// Whether a frame of `bytes` passes (call [`Policer::observe`] first).
    pub fn admit(&mut self, bytes: usize) -> bool {
        if self.rate.is_none() {
            return true;
        }
        if self.tokens >= bytes as f64 {
            self.tokens -= bytes as f64;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: u64) -> Instant {
        Instant::ZERO + cm_core::Duration::from_millis(ms)
    }

    /// 200-byte frames every 20 ms (10 kB/s) against a CM rate of 5 kB/s:
    /// about half pass once the mean has settled; at 20 kB/s all pass.
    #[test]
    fn passes_the_long_term_rate() {
        for (cm_rate, expect) in [(5_000.0, 0.5), (20_000.0, 1.0)] {
            let mut p = Policer::new(Duration::from_secs(1), 400);
            let mut passed = 0;
            for i in 0..3_000u64 {
                p.observe(at(i * 20), Some(cm_rate));
                if p.admit(200) && i >= 500 {
                    passed += 1;
                }
            }
            let share = f64::from(passed) / 2_500.0;
            assert!((share - expect).abs() < 0.02, "{cm_rate}: {share}");
        }
    }

    #[test]
    fn everything_passes_before_the_cm_has_a_rate() {
        let mut p = Policer::new(Duration::from_secs(1), 400);
        for i in 0..100 {
            p.observe(at(i), None);
            assert!(p.admit(1_000));
        }
        assert_eq!(p.rate(), None);
    }

    /// A short dip of the CM's rate (one window halving for 200 ms) barely
    /// moves the long-term rate; a lasting one does.
    #[test]
    fn short_dips_are_averaged_away() {
        let mut p = Policer::new(Duration::from_secs(2), 400);
        for i in 0..200 {
            p.observe(at(i * 20), Some(10_000.0));
        }
        for i in 200..210 {
            p.observe(at(i * 20), Some(5_000.0));
        }
        let r = p.rate().unwrap_or(0.0);
        assert!(r > 9_400.0, "{r}");
        for i in 210..1000 {
            p.observe(at(i * 20), Some(5_000.0));
        }
        let r = p.rate().unwrap_or(0.0);
        assert!(r < 5_100.0, "{r}");
    }
}
