//! A set of merged sequence-number ranges `[start, end)`: the receiver's
//! out-of-order buffer and the SACK sender's scoreboard are both one.

use std::collections::BTreeMap;

/// Disjoint, non-adjacent ranges, keyed by start, with their total length.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct RangeSet {
    ranges: BTreeMap<u64, u64>,
    bytes: u64,
}

impl RangeSet {
    /// Add `[start, end)`, merging with every overlapping or adjacent range
    /// (an empty range is kept as a marker, e.g. an out-of-order FIN).
    /// Returns the bytes newly covered.
    pub(crate) fn insert(&mut self, mut start: u64, mut end: u64) -> u64 {
        let before = self.bytes;
        let overlapping: Vec<(u64, u64)> = self
            .ranges
            .range(..=end)
            .filter(|&(_, &e)| e >= start)
            .map(|(&s, &e)| (s, e))
            .collect();
        for (s, e) in overlapping {
            self.ranges.remove(&s);
            self.bytes -= e - s;
            start = start.min(s);
            end = end.max(e);
        }
        self.ranges.insert(start, end);
        self.bytes += end - start;
        self.bytes - before
    }

    /// Remove the lowest range if it starts at or below `at`; its end.
    pub(crate) fn pop_reaching(&mut self, at: u64) -> Option<u64> {
        let (&s, &e) = self.ranges.iter().next()?;
        if s > at {
            return None;
        }
        self.ranges.remove(&s);
        self.bytes -= e - s;
        Some(e)
    }

    /// Forget everything below `at`, trimming a range that straddles it.
    pub(crate) fn trim_below(&mut self, at: u64) {
        while let Some(e) = self.pop_reaching(at) {
            if e > at {
                self.ranges.insert(at, e);
                self.bytes += e - at;
                break;
            }
        }
    }

    /// The range holding `seq`, if any.
    pub(crate) fn containing(&self, seq: u64) -> Option<(u64, u64)> {
        self.ranges
            .range(..=seq)
            .next_back()
            .filter(|&(_, &e)| e > seq)
            .map(|(&s, &e)| (s, e))
    }

    /// Total length of the ranges.
    pub(crate) fn bytes(&self) -> u64 {
        self.bytes
    }

    /// One past the highest range, if any.
    pub(crate) fn high(&self) -> Option<u64> {
        self.ranges.iter().next_back().map(|(_, &e)| e)
    }

    /// Whether there are no ranges (not even empty markers).
    pub(crate) fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// The ranges, ascending.
    pub(crate) fn iter(&self) -> impl DoubleEndedIterator<Item = (u64, u64)> + '_ {
        self.ranges.iter().map(|(&s, &e)| (s, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_merges_overlapping_and_adjacent() {
        let mut r = RangeSet::default();
        assert_eq!(r.insert(10, 20), 10);
        assert_eq!(r.insert(30, 40), 10);
        assert_eq!(r.insert(20, 30), 10, "adjacent on both sides");
        assert_eq!(r.iter().collect::<Vec<_>>(), vec![(10, 40)]);
        assert_eq!(r.insert(15, 35), 0);
        assert_eq!(r.bytes(), 30);
        assert_eq!(r.containing(39), Some((10, 40)));
        assert_eq!(r.containing(40), None);
    }

    #[test]
    fn pop_and_trim() {
        let mut r = RangeSet::default();
        r.insert(10, 20);
        r.insert(30, 40);
        r.trim_below(15);
        assert_eq!(r.iter().collect::<Vec<_>>(), vec![(15, 20), (30, 40)]);
        assert_eq!(r.pop_reaching(14), None);
        assert_eq!(r.pop_reaching(15), Some(20));
        assert_eq!(r.bytes(), 10);
        r.insert(50, 50);
        assert_eq!(r.high(), Some(50), "an empty marker counts");
        r.trim_below(60);
        assert!(r.is_empty() && r.bytes() == 0);
    }
}
