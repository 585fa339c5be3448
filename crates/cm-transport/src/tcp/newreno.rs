//! NewReno's congestion window (RFC 5681 §3, RFC 6582 §3.2, RFC 3465).

use super::config::Growth;

/// cwnd and ssthresh of one connection in NewReno mode.
#[derive(Clone, Copy, Debug)]
pub(crate) struct NewRenoCc {
    pub cwnd: u64,
    pub ssthresh: u64,
    mss: u64,
    growth: Growth,
    /// RFC 3465 §2.1 bytes_acked in congestion avoidance.
    abc_acc: u64,
}

impl NewRenoCc {
    pub(crate) fn new(
        mss: u64,
        initial_window: u64,
        ssthresh: Option<u64>,
        growth: Growth,
    ) -> Self {
        NewRenoCc {
            cwnd: initial_window * mss,
            ssthresh: ssthresh.unwrap_or(u64::MAX / 4),
            mss,
            growth,
            abc_acc: 0,
        }
    }

    /// Restart from one segment (RFC 5681 §3.1: IW is 1 MSS after a lost SYN).
    pub(crate) fn set_window(&mut self, segments: u64) {
        self.cwnd = segments * self.mss;
    }

    /// An ACK of `acked` new bytes outside recovery.
    pub(crate) fn on_ack(&mut self, acked: u64) {
        let mss = self.mss;
        if self.cwnd < self.ssthresh {
            // Slow start: RFC 5681 §3.1 eq. 2 (ACK counting), or RFC 3465
            // §2.2 with L = 2*SMSS.
            self.cwnd += match self.growth {
                Growth::AckCounting => mss,
                Growth::ByteCounting => acked.min(2 * mss),
            };
        } else {
            match self.growth {
                // RFC 5681 §3.1 eq. 3: cwnd += SMSS*SMSS/cwnd, at least 1.
                Growth::AckCounting => self.cwnd += (mss * mss / self.cwnd).max(1),
                // RFC 3465 §2.1: one SMSS per cwnd of bytes acknowledged.
                Growth::ByteCounting => {
                    self.abc_acc += acked;
                    if self.abc_acc >= self.cwnd {
                        self.abc_acc -= self.cwnd;
                        self.cwnd += mss;
                    }
                }
            }
        }
    }

    /// Third duplicate ACK: RFC 6582 §3.2 step 2 / RFC 5681 §3.2 steps 2-3.
    pub(crate) fn on_enter_recovery(&mut self, flight: u64) {
        self.ssthresh = (flight / 2).max(2 * self.mss);
        self.cwnd = self.ssthresh + 3 * self.mss;
        self.abc_acc = 0;
    }

    /// Entering SACK loss recovery: RFC 6675 §5 step (4.2),
    /// ssthresh = cwnd = FlightSize / 2 (with RFC 5681 eq. 4's floor of
    /// 2 SMSS). cwnd then stays put for the whole recovery; what may be sent
    /// is cwnd - pipe (step C).
    pub(crate) fn on_enter_sack_recovery(&mut self, flight: u64) {
        self.ssthresh = (flight / 2).max(2 * self.mss);
        self.cwnd = self.ssthresh;
        self.abc_acc = 0;
    }

    /// Another duplicate ACK in recovery: RFC 6582 §3.2 step 4 (inflate).
    pub(crate) fn on_dupack_in_recovery(&mut self) {
        self.cwnd += self.mss;
    }

    /// Partial ACK: RFC 6582 §3.2 step 5 (deflate by the amount acked, add
    /// back one SMSS if at least one SMSS was acked).
    pub(crate) fn on_partial_ack(&mut self, acked: u64) {
        self.cwnd = self.cwnd.saturating_sub(acked).max(self.mss);
        if acked >= self.mss {
            self.cwnd += self.mss;
        }
    }

    /// Full ACK: RFC 6582 §3.2 step 3 option (1):
    /// cwnd = min(ssthresh, max(FlightSize, SMSS) + SMSS).
    pub(crate) fn on_full_ack(&mut self, flight: u64) {
        self.cwnd = self.ssthresh.min(flight.max(self.mss) + self.mss);
    }

    /// Retransmission timeout: RFC 5681 §3.1 eq. 4 and the loss window of
    /// one segment. On a repeated timeout of the same data ssthresh is kept
    /// (RFC 5681 §3.1, "not halved again").
    pub(crate) fn on_timeout(&mut self, flight: u64, first: bool) {
        if first {
            self.ssthresh = (flight / 2).max(2 * self.mss);
        }
        self.cwnd = self.mss;
        self.abc_acc = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slow_start_then_avoidance_with_ack_counting() {
        let mut c = NewRenoCc::new(1000, 2, Some(4000), Growth::AckCounting);
        c.on_ack(1000);
        c.on_ack(1000);
        assert_eq!(c.cwnd, 4000);
        c.on_ack(1000);
        assert_eq!(c.cwnd, 4250);
    }

    #[test]
    fn byte_counting_caps_per_ack_growth() {
        let mut c = NewRenoCc::new(1000, 2, None, Growth::ByteCounting);
        c.on_ack(5000);
        assert_eq!(c.cwnd, 4000);
        let mut c = NewRenoCc::new(1000, 4, Some(4000), Growth::ByteCounting);
        c.on_ack(3000);
        assert_eq!(c.cwnd, 4000);
        c.on_ack(1000);
        assert_eq!(c.cwnd, 5000);
    }

    #[test]
    fn recovery_halves_inflates_and_deflates() {
        let mut c = NewRenoCc::new(1000, 10, None, Growth::AckCounting);
        c.on_enter_recovery(10_000);
        assert_eq!((c.ssthresh, c.cwnd), (5000, 8000));
        c.on_dupack_in_recovery();
        assert_eq!(c.cwnd, 9000);
        c.on_partial_ack(3000);
        assert_eq!(c.cwnd, 7000);
        c.on_full_ack(2000);
        assert_eq!(c.cwnd, 3000);
        c.on_timeout(8000, true);
        assert_eq!((c.ssthresh, c.cwnd), (4000, 1000));
        c.on_timeout(1000, false);
        assert_eq!(c.ssthresh, 4000);
    }
}
