//! The loss detector as first written, over sets of single numbers: the
//! reference the range-based detector is checked against (one entry per
//! missing number made a hostile datagram that jumps 4096 numbers ahead
//! cost thousands of map operations). Its `bound` also trims the declared
//! numbers, as the real detector does.

use std::collections::BTreeSet;

use super::{MAX_TRACKED, REORDER_THRESHOLD};

/// Per-flow loss detection state.
#[derive(Clone, Debug, Default)]
pub struct LossDetector {
    /// Highest sequence number received plus one (flows number their
    /// packets from 0, so 0 before the first).
    next: u64,
    /// Missing numbers below `next` not yet candidates or declared.
    missing: BTreeSet<u64>,
    /// Candidates (≥ threshold later packets arrived), not yet settled.
    candidates: BTreeSet<u64>,
    /// Declared lost (cumulative).
    lost: u64,
    /// Candidates that arrived before they settled (reordering absorbed).
    pub reordered: u64,
    /// Packets that arrived after being declared lost (reordering beyond
    /// the settling delay, or a late duplicate).
    pub late: u64,
    /// Duplicate arrivals ignored.
    pub duplicates: u64,
    /// Numbers declared lost, kept to recognise a late arrival (bounded).
    declared: BTreeSet<u64>,
}

impl LossDetector {
    /// A detector that has seen nothing.
    #[allow(dead_code)]
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
            if gap as usize > MAX_TRACKED {
                // A jump: the numbers in between cannot all be tracked;
                // declare all but the last MAX_TRACKED lost at once.
                self.lost += gap - MAX_TRACKED as u64;
                for s in (seq - MAX_TRACKED as u64)..seq {
                    self.missing.insert(s);
                }
            } else {
                for s in next..seq {
                    self.missing.insert(s);
                }
            }
            self.next = seq.saturating_add(1);
            // Missing numbers at least THRESHOLD below seq become candidates.
            let cut = seq.saturating_sub(REORDER_THRESHOLD - 1);
            let newly: Vec<u64> = self.missing.range(..cut).copied().collect();
            for s in newly {
                self.missing.remove(&s);
                self.candidates.insert(s);
            }
            self.bound();
            return true;
        }
        if self.missing.remove(&seq) {
            return true;
        }
        if self.candidates.remove(&seq) {
            self.reordered += 1;
            return true;
        }
        if self.declared.remove(&seq) {
            self.late += 1;
            return false;
        }
        self.duplicates += 1;
        false
    }

    /// A probe arrived: candidates from before the previous probe that are
    /// still missing are declared lost. Returns the cumulative count.
    pub fn settle(&mut self, previous: &mut BTreeSet<u64>) -> u64 {
        let due: Vec<u64> = previous
            .iter()
            .copied()
            .filter(|s| self.candidates.contains(s))
            .collect();
        for s in due {
            self.candidates.remove(&s);
            self.lost += 1;
            self.declared.insert(s);
        }
        while self.declared.len() > MAX_TRACKED {
            self.declared.pop_first();
        }
        previous.clone_from(&self.candidates);
        self.lost
    }

    /// Keeps the sets bounded: the oldest beyond [`MAX_TRACKED`] are lost.
    fn bound(&mut self) {
        while self.missing.len() + self.candidates.len() > MAX_TRACKED {
            let oldest = match (self.missing.first(), self.candidates.first()) {
                (Some(&m), Some(&c)) => m.min(c),
                (Some(&m), None) => m,
                (None, Some(&c)) => c,
                (None, None) => break,
            };
            self.missing.remove(&oldest);
            self.candidates.remove(&oldest);
            self.lost += 1;
            self.declared.insert(oldest);
        }
        while self.declared.len() > MAX_TRACKED {
            self.declared.pop_first();
        }
    }
}

/// A detector together with the candidate set seen at the previous probe.
#[derive(Clone, Debug, Default)]
pub struct SettlingDetector {
    /// The detector.
    pub detector: LossDetector,
    at_last_probe: BTreeSet<u64>,
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
