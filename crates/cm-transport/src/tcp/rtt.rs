//! The retransmission timer (RFC 6298): the SRTT and RTTVAR smoothing of
//! [`cm_core::rtt::RttEstimator`] (RFC 6298 §2), with TCP's clock
//! granularity, RTO bounds and exponential backoff on top.

use cm_core::Duration;

/// Clock granularity G of RFC 6298 §2.
const GRANULARITY: Duration = Duration::from_micros(1_000);

/// SRTT, RTTVAR and the backed-off RTO.
#[derive(Clone, Copy, Debug)]
pub struct RttEstimator {
    smoothed: cm_core::rtt::RttEstimator,
    backoff: u32,
    min_rto: Duration,
    max_rto: Duration,
    initial_rto: Duration,
    /// Smallest sample so far.
    min_rtt: Option<Duration>,
}

impl RttEstimator {
    /// No samples yet.
    pub fn new(min_rto: Duration, max_rto: Duration, initial_rto: Duration) -> Self {
        RttEstimator {
            smoothed: cm_core::rtt::RttEstimator::new(),
            backoff: 0,
            min_rto,
            max_rto,
            initial_rto,
            min_rtt: None,
        }
    }

    /// Fold in a valid sample (RFC 6298 §2.2, §2.3). A valid sample also
    /// ends exponential backoff (Karn: keep the backed-off RTO until then).
    pub fn on_sample(&mut self, r: Duration) {
        self.smoothed.on_sample(r);
        self.min_rtt = Some(self.min_rtt.map_or(r, |m| m.min(r)));
        self.backoff = 0;
    }

    /// End exponential backoff without a new sample: the RTO falls back
    /// to SRTT + max(G, 4*RTTVAR) (for transports that never retransmit,
    /// where any ack shows the path alive, e.g. CC-UDP).
    pub fn end_backoff(&mut self) {
        self.backoff = 0;
    }

    /// Double the RTO (RFC 6298 §5.5).
    pub fn back_off(&mut self) {
        self.backoff = self.backoff.saturating_add(1).min(16);
    }

    /// The current RTO: SRTT + max(G, 4*RTTVAR), clamped, then backed off.
    pub fn rto(&self) -> Duration {
        let base = match (self.smoothed.srtt(), self.smoothed.rttvar()) {
            (Some(s), Some(var)) => s + GRANULARITY.max(var.saturating_mul(4)),
            _ => self.initial_rto,
        };
        let base = base.max(self.min_rto).min(self.max_rto);
        base.saturating_mul(1 << self.backoff).min(self.max_rto)
    }

    /// The smallest RTT sample so far: a lower bound on the path's round
    /// trip, used to tell an ACK of an original transmission from an ACK
    /// of its retransmission after a timeout.
    pub fn min_rtt(&self) -> Option<Duration> {
        self.min_rtt
    }

    /// Smoothed RTT.
    pub fn srtt(&self) -> Option<Duration> {
        self.smoothed.srtt()
    }

    /// Number of doublings in effect.
    pub fn backoff(&self) -> u32 {
        self.backoff
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc6298_first_and_later_samples() {
        let mut e = RttEstimator::new(
            Duration::from_millis(200),
            Duration::from_secs(60),
            Duration::from_secs(1),
        );
        assert_eq!(e.rto(), Duration::from_secs(1));
        e.on_sample(Duration::from_millis(100));
        // 100 + 4 * 50 = 300 ms.
        assert_eq!(e.rto(), Duration::from_millis(300));
        e.on_sample(Duration::from_millis(100));
        // rttvar = 3/4 * 50 = 37.5 ms; rto = 100 + 150 = 250 ms.
        assert_eq!(e.rto(), Duration::from_micros(250_000));
        e.back_off();
        e.back_off();
        assert_eq!(e.rto(), Duration::from_secs(1));
        e.on_sample(Duration::from_millis(100));
        assert_eq!(e.backoff(), 0);
    }

    #[test]
    fn rto_is_clamped() {
        let mut e = RttEstimator::new(
            Duration::from_millis(200),
            Duration::from_secs(2),
            Duration::from_secs(1),
        );
        e.on_sample(Duration::from_millis(1));
        assert_eq!(e.rto(), Duration::from_millis(200));
        for _ in 0..20 {
            e.back_off();
        }
        assert_eq!(e.rto(), Duration::from_secs(2));
    }
}
