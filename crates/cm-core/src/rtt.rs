//! Round-trip time estimation for a macroflow.
//!
//! One estimator per macroflow; samples from all of its flows are combined,
//! so a new flow starts with its siblings' estimate (sigcomm1999 §2, shared
//! state learning). Smoothing follows RFC 6298 §2 (alpha = 1/8, beta = 1/4);
//! the minimum RTT over the current activity period drives exponential aging
//! (sigcomm1999 §4.4).

use crate::time::Duration;

/// Smoothed RTT, RTT variation and minimum RTT of a macroflow.
#[derive(Clone, Copy, Debug, Default)]
pub struct RttEstimator {
    srtt: Option<Duration>,
    rttvar: Duration,
    min_rtt: Option<Duration>,
    latest: Option<Duration>,
    samples: u64,
}

/// Clock granularity G of RFC 6298 §2.4: the core's clock ticks in microseconds.
const GRANULARITY: Duration = Duration::from_micros(1);

impl RttEstimator {
    /// An estimator with no samples yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Feed one RTT sample (RFC 6298 §2.2 for the first, §2.3 afterwards).
    /// The caller has validated that the sample is non-zero and sane.
    pub fn on_sample(&mut self, r: Duration) {
        let r_us = r.as_micros();
        match self.srtt {
            None => {
                // RFC 6298 §2.2: SRTT <- R, RTTVAR <- R/2.
                self.srtt = Some(r);
                self.rttvar = Duration::from_micros(r_us / 2);
            }
            Some(srtt) => {
                // RFC 6298 §2.3: RTTVAR <- 3/4 RTTVAR + 1/4 |SRTT - R'|,
                //                SRTT   <- 7/8 SRTT   + 1/8 R'.
                let s = srtt.as_micros();
                let err = s.abs_diff(r_us);
                let var = (3 * u128::from(self.rttvar.as_micros()) + u128::from(err)) / 4;
                let srtt = (7 * u128::from(s) + u128::from(r_us)) / 8;
                self.rttvar = Duration::from_micros(var as u64);
                self.srtt = Some(Duration::from_micros(srtt as u64));
            }
        }
        self.min_rtt = Some(self.min_rtt.map_or(r, |m| m.min(r)));
        self.latest = Some(r);
        self.samples += 1;
    }

    /// Smoothed RTT; `None` before the first sample.
    pub fn srtt(&self) -> Option<Duration> {
        self.srtt
    }

    /// RTT variation; `None` before the first sample.
    pub fn rttvar(&self) -> Option<Duration> {
        self.srtt.map(|_| self.rttvar)
    }

    /// Minimum RTT over the current activity period; `None` before a sample.
    pub fn min_rtt(&self) -> Option<Duration> {
        self.min_rtt
    }

    /// The most recent sample.
    pub fn latest(&self) -> Option<Duration> {
        self.latest
    }

    /// Number of samples taken.
    pub fn samples(&self) -> u64 {
        self.samples
    }

    /// Retransmission-timeout-style bound (RFC 6298 §2.3):
    /// `max(min_rto, SRTT + max(G, 4 RTTVAR))`, or `initial` before any sample.
    pub fn rto(&self, min_rto: Duration, initial: Duration) -> Duration {
        match self.srtt {
            None => initial,
            Some(s) => {
                let var4 = self.rttvar.saturating_mul(4);
                (s + var4.max(GRANULARITY)).max(min_rto)
            }
        }
    }

    /// Start a new activity period: the minimum RTT is forgotten (it is kept
    /// "over the duration of activity", sigcomm1999 §4.4) while the smoothed
    /// estimate stays as the best prior.
    pub fn new_activity_period(&mut self) {
        self.min_rtt = self.srtt.map(|s| self.latest.map_or(s, |l| l.min(s)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn first_sample_sets_srtt_and_half_rttvar() {
        // RFC 6298 §2.2
        let mut e = RttEstimator::new();
        assert_eq!(e.srtt(), None);
        assert_eq!(e.rttvar(), None, "no estimate is not the same as zero");
        e.on_sample(ms(100));
        assert_eq!(e.srtt(), Some(ms(100)));
        assert_eq!(e.rttvar(), Some(ms(50)));
        assert_eq!(e.min_rtt(), Some(ms(100)));
    }

    #[test]
    fn later_samples_use_rfc6298_gains() {
        // RFC 6298 §2.3 with alpha = 1/8, beta = 1/4.
        let mut e = RttEstimator::new();
        e.on_sample(ms(100));
        e.on_sample(ms(200));
        // rttvar = 3/4*50 + 1/4*100 = 62.5ms; srtt = 7/8*100 + 1/8*200 = 112.5ms
        assert_eq!(e.rttvar(), Some(Duration::from_micros(62_500)));
        assert_eq!(e.srtt(), Some(Duration::from_micros(112_500)));
        assert_eq!(e.min_rtt(), Some(ms(100)));
        e.on_sample(ms(40));
        assert_eq!(e.min_rtt(), Some(ms(40)));
    }

    #[test]
    fn rto_has_floor_and_initial_value() {
        let mut e = RttEstimator::new();
        assert_eq!(
            e.rto(ms(200), Duration::from_secs(1)),
            Duration::from_secs(1)
        );
        e.on_sample(ms(10));
        // 10 + 4*5 = 30ms < floor
        assert_eq!(e.rto(ms(200), Duration::from_secs(1)), ms(200));
        assert_eq!(e.rto(ms(1), Duration::from_secs(1)), ms(30));
    }

    #[test]
    fn activity_period_resets_minimum_to_current_path() {
        let mut e = RttEstimator::new();
        e.on_sample(ms(20));
        for _ in 0..50 {
            e.on_sample(ms(80));
        }
        assert_eq!(e.min_rtt(), Some(ms(20)));
        e.new_activity_period();
        let m = e.min_rtt().unwrap();
        assert!(
            m > ms(70),
            "min RTT restarts from the current path, got {m}"
        );
    }
}
