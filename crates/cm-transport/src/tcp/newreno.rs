//! NewReno's congestion window (RFC 5681 §3, RFC 6582 §3.2, RFC 3465).

use super::config::{Growth, RtoInRecovery, SsthreshRule, TcpConfig};

/// What the sender knows of its flight when it detects a loss.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LossState {
    /// FlightSize: SND.NXT - SND.UNA (RFC 5681 §2).
    pub flight: u64,
    /// The pipe (see [`SsthreshRule::Pipe`]).
    pub pipe: u64,
}

/// cwnd and ssthresh of one connection in NewReno mode.
#[derive(Clone, Copy, Debug)]
pub(crate) struct NewRenoCc {
    pub cwnd: u64,
    pub ssthresh: u64,
    mss: u64,
    growth: Growth,
    rule: SsthreshRule,
    /// The ssthresh of a timeout inside recovery.
    rto_in_recovery: RtoInRecovery,
    /// RFC 3465 §2.1 bytes_acked in congestion avoidance.
    abc_acc: u64,
}

impl NewRenoCc {
    pub(crate) fn new(
        mss: u64,
        initial_window: u64,
        ssthresh: Option<u64>,
        growth: Growth,
        rule: SsthreshRule,
    ) -> Self {
        NewRenoCc {
            cwnd: initial_window * mss,
            ssthresh: ssthresh.unwrap_or(u64::MAX / 4),
            mss,
            growth,
            rule,
            rto_in_recovery: RtoInRecovery::Keep,
            abc_acc: 0,
        }
    }

    /// The window a sender with `cfg` starts from, with `cfg`'s rules.
    pub(crate) fn from_config(cfg: &TcpConfig) -> Self {
        NewRenoCc {
            rto_in_recovery: cfg.rto_in_recovery,
            ..Self::new(
                u64::from(cfg.mss),
                u64::from(cfg.initial_window),
                cfg.initial_ssthresh,
                cfg.growth,
                cfg.ssthresh_rule,
            )
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

    /// Half of what the rule measures, at least 2 SMSS (RFC 5681 §3.1
    /// eq. (4) with FlightSize, or the pipe, or cwnd).
    fn reduced(&self, at: LossState) -> u64 {
        let base = match self.rule {
            SsthreshRule::FlightSize => at.flight,
            SsthreshRule::Pipe => at.pipe,
            SsthreshRule::Cwnd => self.cwnd,
        };
        (base / 2).max(2 * self.mss)
    }

    /// Third duplicate ACK: RFC 6582 §3.2 step 2 / RFC 5681 §3.2 steps 2-3
    /// (ssthresh per the [`SsthreshRule`]).
    pub(crate) fn on_enter_recovery(&mut self, at: LossState) {
        self.ssthresh = self.reduced(at);
        self.cwnd = self.ssthresh + 3 * self.mss;
        self.abc_acc = 0;
    }

    /// Entering SACK loss recovery: RFC 6675 §5 step (4.2),
    /// ssthresh = cwnd = FlightSize / 2 (with RFC 5681 eq. 4's floor of
    /// 2 SMSS; or half the pipe or cwnd per the [`SsthreshRule`]). cwnd then
    /// stays put for the whole recovery; what may be sent is cwnd - pipe
    /// (step C).
    pub(crate) fn on_enter_sack_recovery(&mut self, at: LossState) {
        self.ssthresh = self.reduced(at);
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

    /// Retransmission timeout: RFC 5681 §3.1 eq. (4) (per the
    /// [`SsthreshRule`]) and the loss window of one segment. On a repeated
    /// timeout of the same data ssthresh is kept (RFC 5681 §3.1, "held
    /// constant").
    ///
    /// `in_recovery`: the timeout comes during a loss recovery (fast or
    /// after an earlier timeout) whose reduction already answered this
    /// congestion episode. ssthresh is then never raised: FlightSize still
    /// counts the SACKed bytes that have left the network, and half of it
    /// can exceed the ssthresh set when the recovery began. Linux keeps the
    /// recovery's ssthresh (`tcp_enter_loss` recomputes it only in Open or
    /// Disorder, or once `high_seq` is acknowledged); this takes the smaller
    /// of the two.
    pub(crate) fn on_timeout(&mut self, at: LossState, first: bool, in_recovery: bool) {
        if first {
            let s = self.reduced(at);
            self.ssthresh = match (in_recovery, self.rto_in_recovery) {
                (false, _) => s,
                (true, RtoInRecovery::Keep) => self.ssthresh.min(s),
                (true, RtoInRecovery::Halve) => (self.ssthresh / 2).max(2 * self.mss),
            };
        }
        self.cwnd = self.mss;
        self.abc_acc = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FS: SsthreshRule = SsthreshRule::FlightSize;

    fn at(flight: u64, pipe: u64) -> LossState {
        LossState { flight, pipe }
    }

    #[test]
    fn slow_start_then_avoidance_with_ack_counting() {
        let mut c = NewRenoCc::new(1000, 2, Some(4000), Growth::AckCounting, FS);
        c.on_ack(1000);
        c.on_ack(1000);
        assert_eq!(c.cwnd, 4000);
        c.on_ack(1000);
        assert_eq!(c.cwnd, 4250);
    }

    #[test]
    fn byte_counting_caps_per_ack_growth() {
        let mut c = NewRenoCc::new(1000, 2, None, Growth::ByteCounting, FS);
        c.on_ack(5000);
        assert_eq!(c.cwnd, 4000);
        let mut c = NewRenoCc::new(1000, 4, Some(4000), Growth::ByteCounting, FS);
        c.on_ack(3000);
        assert_eq!(c.cwnd, 4000);
        c.on_ack(1000);
        assert_eq!(c.cwnd, 5000);
    }

    #[test]
    fn recovery_halves_inflates_and_deflates() {
        let mut c = NewRenoCc::new(1000, 10, None, Growth::AckCounting, FS);
        c.on_enter_recovery(at(10_000, 6000));
        assert_eq!((c.ssthresh, c.cwnd), (5000, 8000));
        c.on_dupack_in_recovery();
        assert_eq!(c.cwnd, 9000);
        c.on_partial_ack(3000);
        assert_eq!(c.cwnd, 7000);
        c.on_full_ack(2000);
        assert_eq!(c.cwnd, 3000);
        c.on_timeout(at(8000, 0), true, false);
        assert_eq!((c.ssthresh, c.cwnd), (4000, 1000));
        c.on_timeout(at(1000, 0), false, false);
        assert_eq!(c.ssthresh, 4000);
    }

    #[test]
    fn each_rule_halves_its_own_measure() {
        for (rule, want) in [
            (SsthreshRule::FlightSize, 6000),
            (SsthreshRule::Pipe, 4000),
            (SsthreshRule::Cwnd, 10_000),
        ] {
            let mut c = NewRenoCc::new(1000, 20, None, Growth::AckCounting, rule);
            c.on_enter_sack_recovery(at(12_000, 8000));
            assert_eq!((c.ssthresh, c.cwnd), (want, want), "{rule}");
        }
        let mut c = NewRenoCc::new(1000, 20, None, Growth::AckCounting, SsthreshRule::Pipe);
        c.on_enter_recovery(at(12_000, 1000));
        assert_eq!(c.ssthresh, 2000, "floor of 2 SMSS");
    }

    #[test]
    fn a_timeout_inside_recovery_never_raises_ssthresh() {
        let mut c = NewRenoCc::new(1000, 10, None, Growth::AckCounting, FS);
        c.on_enter_sack_recovery(at(10_000, 6000));
        assert_eq!(c.ssthresh, 5000);
        // FlightSize has grown (SACKed data above the holes): half of it
        // would raise ssthresh.
        c.on_timeout(at(16_000, 3000), true, true);
        assert_eq!((c.ssthresh, c.cwnd), (5000, 1000));
        c.on_timeout(at(6000, 3000), true, true);
        assert_eq!(c.ssthresh, 3000);
    }
}
