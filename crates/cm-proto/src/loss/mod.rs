//! The receiver's loss detector (sigcomm1999 §4.3): per-flow sequence
//! numbers, TCP's three-packet reordering threshold, and a settling delay
//! of one probe interval.
//!
//! A missing sequence number becomes a *candidate* when a packet at least
//! [`REORDER_THRESHOLD`] numbers above it arrives ("flagging a congestion
//! event to the sender only if a packet at least three packets greater than
//! a missing one arrives", §4.3; RFC 5681 §3.2). A candidate still missing
//! when the next probe arrives is declared lost and reported. The settling
//! delay is what the probe protocol allows for free: the sender hears of
//! losses only at responses anyway, and a packet displaced by more than
//! three positions but arriving before the probe (a path that reorders by
//! delay rather than by a few positions) is not a loss.
//!
//! Duplicates never hide a loss: a sequence number is counted once, and a
//! duplicate of a received packet cannot fill another one's gap.

#[cfg(test)]
mod model;
mod ranges;

pub use ranges::Ranges;

/// Packets above a missing one before it is a loss candidate (§4.3).
pub const REORDER_THRESHOLD: u64 = 3;
/// Missing sequence numbers tracked at most; beyond this gap (a burst of
/// thousands of lost packets, or a sender that jumped) the oldest are
/// declared lost at once.
pub const MAX_TRACKED: usize = 4096;

/// Per-flow loss detection state. Its sets hold ranges of consecutive
/// numbers ([`Ranges`]): a gap costs one entry however long it is.
#[derive(Clone, Debug, Default)]
pub struct LossDetector {
    /// Highest sequence number received plus one (flows number their
    /// packets from 0, so 0 before the first).
    next: u64,
    /// Missing numbers below `next` not yet candidates or declared.
    missing: Ranges,
    /// Candidates (≥ threshold later packets arrived), not yet settled.
    candidates: Ranges,
    /// Declared lost (cumulative).
    lost: u64,
    /// Candidates that arrived before they settled (reordering absorbed).
    pub reordered: u64,
    /// Packets that arrived after being declared lost (reordering beyond
    /// the settling delay, or a late duplicate).
    pub late: u64,
    /// Duplicate arrivals ignored.
    pub duplicates: u64,
    /// Numbers declared lost, kept to recognise a late arrival (the most
    /// recent [`MAX_TRACKED`]).
    declared: Ranges,
}

impl LossDetector {
    /// A detector that has seen nothing.
    pub fn new() -> Self {
        Self::default()
    }

    /// Packets declared lost so far.
    pub fn lost(&self) -> u64 {
        self.lost
    }

    /// A packet with sequence number `seq` arrived. Returns `false` for a
    /// duplicate (or a packet already declared lost), which the caller
    /// must not count as received bytes.
    pub fn on_packet(&mut self, seq: u64) -> bool {
        let next = self.next;
        if seq >= next {
            // Everything between next and seq is missing.
            let gap = seq - next;
            let tracked = MAX_TRACKED as u64;
            if gap > tracked {
                // A jump: the numbers in between cannot all be tracked;
                // declare all but the last MAX_TRACKED lost at once.
                self.lost += gap - tracked;
                self.missing.insert_range(seq - tracked, seq);
            } else {
                self.missing.insert_range(next, seq);
            }
            self.next = seq.saturating_add(1);
            // Missing numbers at least THRESHOLD below seq become candidates.
            let cut = seq.saturating_sub(REORDER_THRESHOLD - 1);
            let newly = self.missing.take_below(cut, u64::MAX);
            self.candidates.extend(&newly);
            self.bound();
            return true;
        }
        if self.missing.remove(seq) {
            return true;
        }
        if self.candidates.remove(seq) {
            self.reordered += 1;
            return true;
        }
        if self.declared.remove(seq) {
            self.late += 1;
            return false;
        }
        self.duplicates += 1;
        false
    }

    /// A probe arrived: candidates from before the previous probe that are
    /// still missing are declared lost. Returns the cumulative count.
    /// `previous` holds the candidates at the previous probe, and the
    /// current ones on return.
    pub fn settle(&mut self, previous: &mut Ranges) -> u64 {
        let due = previous.intersection(&self.candidates);
        self.candidates.subtract(&due);
        self.lost += due.len();
        self.declared.extend(&due);
        self.trim_declared();
        previous.clone_from(&self.candidates);
        self.lost
    }

    /// Keeps the sets bounded: the oldest beyond [`MAX_TRACKED`] are lost.
    fn bound(&mut self) {
        // Every candidate is below every missing number (candidates are
        // the missing numbers that fell below a cut), so the oldest are
        // the candidates, then the missing numbers.
        let mut excess =
            (self.missing.len() + self.candidates.len()).saturating_sub(MAX_TRACKED as u64);
        for set in [&mut self.candidates, &mut self.missing] {
            let gone = set.take_below(u64::MAX, excess);
            excess -= gone.len();
            self.lost += gone.len();
            self.declared.extend(&gone);
        }
        self.trim_declared();
    }

    fn trim_declared(&mut self) {
        let tracked = MAX_TRACKED as u64;
        if self.declared.len() > tracked {
            let over = self.declared.len() - tracked;
            self.declared.take_below(u64::MAX, over);
        }
    }
}

/// A detector together with the candidate set seen at the previous probe.
#[derive(Clone, Debug, Default)]
pub struct SettlingDetector {
    /// The detector.
    pub detector: LossDetector,
    at_last_probe: Ranges,
}

impl SettlingDetector {
    /// A packet arrived (see [`LossDetector::on_packet`]).
    pub fn on_packet(&mut self, seq: u64) -> bool {
        self.detector.on_packet(seq)
    }

    /// A probe arrived (see [`LossDetector::settle`]).
    pub fn on_probe(&mut self) -> u64 {
        self.detector.settle(&mut self.at_last_probe)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_gap_is_lost_only_after_three_later_packets_and_a_probe() {
        let mut d = SettlingDetector::default();
        for s in [0, 1, 3, 4] {
            assert!(d.on_packet(s));
        }
        // 2 is missing, two later packets: not yet a candidate.
        assert_eq!(d.on_probe(), 0);
        assert_eq!(d.on_probe(), 0);
        d.on_packet(5);
        // Now a candidate; declared at the second probe from here.
        assert_eq!(d.on_probe(), 0);
        assert_eq!(d.on_probe(), 1);
    }

    #[test]
    fn a_reordered_packet_before_the_probe_is_not_a_loss() {
        let mut d = SettlingDetector::default();
        for s in [0, 2, 3, 4, 5, 1] {
            d.on_packet(s);
        }
        assert_eq!(d.on_probe(), 0);
        assert_eq!(d.on_probe(), 0);
        assert_eq!(d.detector.reordered, 1);
    }

    /// Replays `trace` (sequence numbers in arrival order) with a probe
    /// after each packet in `probes_after`, then two settling probes.
    fn replay(trace: &[u64], probe_every: usize) -> LossDetector {
        let mut d = SettlingDetector::default();
        for (i, &s) in trace.iter().enumerate() {
            d.on_packet(s);
            if probe_every > 0 && i % probe_every == probe_every - 1 {
                d.on_probe();
            }
        }
        d.on_probe();
        d.on_probe();
        d.detector
    }

    #[derive(Clone, Debug)]
    enum Step {
        Packet(u64),
        Probe,
    }

    /// Arrivals near the front (in order, reordered, duplicated, late),
    /// jumps far ahead (up to three times what is tracked) and probes.
    fn steps() -> impl Strategy<Value = Vec<Step>> {
        proptest::collection::vec(
            prop_oneof![
                6 => (0u64..12).prop_map(Step::Packet),
                1 => (0u64..3 * MAX_TRACKED as u64).prop_map(|d| Step::Packet(d + 1000)),
                1 => (0u64..5000).prop_map(|back| Step::Packet(u64::MAX - back)),
                2 => Just(Step::Probe),
            ],
            0..300,
        )
    }

    proptest! {
        /// The range-based detector counts exactly as the one over single
        /// numbers (`model.rs`) on any arrivals: packets a few numbers
        /// around the front (`d` below as an offset from the highest seen
        /// minus 6), jumps far ahead, old numbers, and probes.
        #[test]
        fn ranges_count_as_single_numbers(steps in steps()) {
            let mut real = SettlingDetector::default();
            let mut reference = model::SettlingDetector::default();
            let mut front = 0u64;
            for s in steps {
                match s {
                    Step::Probe => prop_assert_eq!(real.on_probe(), reference.on_probe()),
                    Step::Packet(d) => {
                        // Small d: near the front; large d: a jump; near
                        // u64::MAX: that far below the front (old).
                        let seq = if d >= u64::MAX - 5000 {
                            front.saturating_sub(u64::MAX - d)
                        } else if d >= 1000 {
                            front + d - 1000
                        } else {
                            (front + d).saturating_sub(6)
                        };
                        front = front.max(seq);
                        prop_assert_eq!(real.on_packet(seq), reference.on_packet(seq));
                    }
                }
                let (a, b) = (&real.detector, &reference.detector);
                prop_assert_eq!(
                    (a.lost(), a.reordered, a.late, a.duplicates),
                    (b.lost(), b.reordered, b.late, b.duplicates)
                );
            }
        }

        /// Duplicating packets never hides a loss: the losses declared with
        /// duplicates are at least those declared without (a duplicate
        /// cannot stand in for a missing number).
        #[test]
        fn duplication_never_hides_a_loss(
            n in 10u64..400,
            drops in proptest::collection::btree_set(0u64..400, 0..40),
            dups in proptest::collection::vec((0usize..400, 1usize..5), 0..40),
            probe_every in 1usize..20,
        ) {
            // Drop anything but the last three, which a tail cannot reveal.
            let sent: Vec<u64> = (0..n).collect();
            let kept: Vec<u64> = sent.iter().copied()
                .filter(|s| !drops.contains(s) || *s + REORDER_THRESHOLD >= n).collect();
            let real_losses = n - kept.len() as u64;
            let mut with_dups = kept.clone();
            for &(at, later) in &dups {
                if at < kept.len() {
                    let pos = (at + later).min(with_dups.len());
                    with_dups.insert(pos, kept[at]);
                }
            }
            let plain = replay(&kept, probe_every);
            let duped = replay(&with_dups, probe_every);
            prop_assert_eq!(plain.lost(), real_losses);
            prop_assert!(duped.lost() >= real_losses,
                "{} losses declared with duplicates, {} real", duped.lost(), real_losses);
        }

        /// In order, with no loss, nothing is ever declared lost.
        #[test]
        fn in_order_delivery_declares_nothing(n in 1u64..2000, probe_every in 1usize..50) {
            let trace: Vec<u64> = (0..n).collect();
            prop_assert_eq!(replay(&trace, probe_every).lost(), 0);
        }

        /// Reordering by fewer than the threshold declares nothing.
        #[test]
        fn small_displacements_are_not_losses(
            n in 10u64..500,
            swaps in proptest::collection::vec(0usize..500, 0..50),
            probe_every in 1usize..20,
        ) {
            let mut trace: Vec<u64> = (0..n).collect();
            // Disjoint adjacent pairs: each packet moves by one place.
            for s in swaps {
                if s % 2 == 0 && s + 1 < trace.len() {
                    trace.swap(s, s + 1);
                }
            }
            prop_assert_eq!(replay(&trace, probe_every).lost(), 0);
        }
    }
}
