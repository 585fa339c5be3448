//! Loss inference without a CM header (sigcomm1999 §4.2.2): comparing the
//! packets sent and received between probes, with the paper's undo of
//! window reductions that reordering caused.
//!
//! A report with fewer packets received than sent looks like a loss, but
//! reordering across a probe moves packets into the next interval, which
//! then shows *more* received than sent. The paper's rule:
//!
//! - after a report with `nsent != nrecd`, store cumulative sent and
//!   received counts from then on;
//! - on each later report, if the cumulative counts differ (fewer
//!   received) and no decrease happened for a round trip, decrease;
//! - after two successive reports with `nsent == nrecd`, clear the store;
//!   if the cumulative counts then match, every decrease made during the
//!   stored period was false: undo them.
//!
//! Duplication breaks it (a duplicate can stand in for a lost packet and
//! reverse a correct reduction, as §4.2.2 says); the CM header's sequence
//! numbers ([`crate::loss`]) are the fix. [`NaiveCount`] is the baseline
//! that calls every shortfall a loss.

use cm_core::{Duration, Instant};

/// What the sender should do with a report.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Nothing.
    Nothing,
    /// Perform a multiplicative decrease (congestion).
    Decrease,
    /// The last `n` decreases were false: reverse them.
    Undo(u32),
}

/// The §4.2.2 detector with undo.
#[derive(Clone, Debug, Default)]
pub struct ReorderUndo {
    storing: bool,
    cum_sent: u64,
    cum_recd: u64,
    clean: u32,
    decreases: u32,
    last_decrease: Option<Instant>,
    /// Decreases made (cumulative).
    pub total_decreases: u64,
    /// Decreases undone (cumulative).
    pub total_undone: u64,
}

impl ReorderUndo {
    /// A detector with nothing stored.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether a stored period is open: a decrease made now may still be
    /// undone. When it closes without an [`Verdict::Undo`], the decreases
    /// made in it were real (the caller may forget its checkpoint).
    pub fn storing(&self) -> bool {
        self.storing
    }

    fn may_decrease(&self, now: Instant, rtt: Duration) -> bool {
        self.last_decrease
            .is_none_or(|t| now.saturating_since(t) >= rtt)
    }

    fn decrease(&mut self, now: Instant) -> Verdict {
        self.last_decrease = Some(now);
        self.decreases += 1;
        self.total_decreases += 1;
        Verdict::Decrease
    }

    /// One probe report: packets sent in the interval and received.
    pub fn on_report(&mut self, now: Instant, nsent: u64, nrecd: u64, rtt: Duration) -> Verdict {
        if !self.storing {
            if nsent == nrecd {
                return Verdict::Nothing;
            }
            self.storing = true;
            self.cum_sent = nsent;
            self.cum_recd = nrecd;
            self.clean = 0;
            self.decreases = 0;
            if nrecd < nsent && self.may_decrease(now, rtt) {
                return self.decrease(now);
            }
            return Verdict::Nothing;
        }
        self.cum_sent += nsent;
        self.cum_recd += nrecd;
        if nsent == nrecd {
            self.clean += 1;
            if self.clean >= 2 {
                self.storing = false;
                if self.cum_sent == self.cum_recd && self.decreases > 0 {
                    let n = self.decreases;
                    self.decreases = 0;
                    self.total_undone += u64::from(n);
                    return Verdict::Undo(n);
                }
                self.decreases = 0;
            }
            return Verdict::Nothing;
        }
        self.clean = 0;
        if nrecd < nsent && self.cum_recd < self.cum_sent && self.may_decrease(now, rtt) {
            return self.decrease(now);
        }
        Verdict::Nothing
    }
}

/// The baseline: every report with fewer received than sent is a loss
/// (at most one decrease per round trip).
#[derive(Clone, Debug, Default)]
pub struct NaiveCount {
    last_decrease: Option<Instant>,
    /// Decreases made.
    pub total_decreases: u64,
}

impl NaiveCount {
    /// One probe report.
    pub fn on_report(&mut self, now: Instant, nsent: u64, nrecd: u64, rtt: Duration) -> Verdict {
        if nrecd < nsent
            && self
                .last_decrease
                .is_none_or(|t| now.saturating_since(t) >= rtt)
        {
            self.last_decrease = Some(now);
            self.total_decreases += 1;
            return Verdict::Decrease;
        }
        Verdict::Nothing
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const RTT: Duration = Duration::from_millis(100);

    fn at(ms: u64) -> Instant {
        Instant::from_micros(ms * 1000)
    }

    /// sigcomm1999 Fig 9: 4 sent 3 received (decrease), then an extra
    /// packet (cumulative match), then 3 of 5 a round trip later (decrease
    /// again), then clean reports: neither decrease is undone.
    #[test]
    fn figure_9() {
        let mut u = ReorderUndo::new();
        assert_eq!(u.on_report(at(0), 4, 3, RTT), Verdict::Decrease);
        assert_eq!(u.on_report(at(50), 4, 5, RTT), Verdict::Nothing);
        assert_eq!(u.on_report(at(150), 5, 3, RTT), Verdict::Decrease);
        assert_eq!(u.on_report(at(200), 4, 4, RTT), Verdict::Nothing);
        assert_eq!(u.on_report(at(250), 4, 4, RTT), Verdict::Nothing);
        assert_eq!(u.total_undone, 0);
    }

    /// One packet moved across a probe: a false decrease, undone.
    #[test]
    fn reordering_alone_is_undone() {
        let mut u = ReorderUndo::new();
        assert_eq!(u.on_report(at(0), 4, 3, RTT), Verdict::Decrease);
        assert_eq!(u.on_report(at(50), 4, 5, RTT), Verdict::Nothing);
        assert_eq!(u.on_report(at(100), 4, 4, RTT), Verdict::Nothing);
        assert_eq!(u.on_report(at(150), 4, 4, RTT), Verdict::Undo(1));
    }

    proptest! {
        /// With no reordering (nothing received late), undo never
        /// reverses a decrease: a real loss keeps the cumulative counts
        /// apart for good.
        #[test]
        fn never_undoes_a_real_loss_without_reordering(
            reports in proptest::collection::vec((0u64..20, 0u64..4, 0u64..200), 1..300)
        ) {
            let mut u = ReorderUndo::new();
            let mut t = 0;
            for (sent, lost, dt) in reports {
                t += dt;
                let recd = sent.saturating_sub(lost);
                let v = u.on_report(at(t), sent, recd, RTT);
                prop_assert!(!matches!(v, Verdict::Undo(_)), "undid a real loss");
            }
        }
    }
}
