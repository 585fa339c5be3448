//! Sets of sequence numbers kept as disjoint half-open ranges, so that a
//! gap of thousands of numbers (a burst of loss, or a hostile datagram that
//! jumps ahead) costs one entry and one map operation, not thousands: the
//! loss detector's sets are ranges of consecutive numbers almost always.

use std::collections::BTreeMap;

/// A set of `u64` as disjoint, non-adjacent ranges `start..end`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Ranges {
    /// start → end (exclusive); no two touch or overlap.
    map: BTreeMap<u64, u64>,
    /// Numbers in the set.
    count: u64,
}

impl Ranges {
    /// An empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Numbers in the set.
    pub fn len(&self) -> u64 {
        self.count
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The smallest number.
    pub fn first(&self) -> Option<u64> {
        self.map.first_key_value().map(|(&s, _)| s)
    }

    /// Whether `x` is in the set.
    pub fn contains(&self, x: u64) -> bool {
        self.map
            .range(..=x)
            .next_back()
            .is_some_and(|(_, &e)| x < e)
    }

    /// The ranges, in order.
    pub fn iter(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.map.iter().map(|(&s, &e)| (s, e))
    }

    /// Add `lo..hi`.
    pub fn insert_range(&mut self, lo: u64, hi: u64) {
        if lo >= hi {
            return;
        }
        let (mut lo, mut hi) = (lo, hi);
        // Absorb every range that overlaps or touches lo..hi.
        let first = self
            .map
            .range(..=lo)
            .next_back()
            .filter(|&(_, &e)| e >= lo)
            .map(|(&s, _)| s)
            .unwrap_or(lo);
        let touching: Vec<(u64, u64)> = self.map.range(first..=hi).map(|(&s, &e)| (s, e)).collect();
        for (s, e) in touching {
            self.map.remove(&s);
            self.count -= e - s;
            lo = lo.min(s);
            hi = hi.max(e);
        }
        self.map.insert(lo, hi);
        self.count += hi - lo;
    }

    /// Add every number of `other`.
    pub fn extend(&mut self, other: &Ranges) {
        for (s, e) in other.iter() {
            self.insert_range(s, e);
        }
    }

    /// Remove `x`; whether it was there.
    pub fn remove(&mut self, x: u64) -> bool {
        if !self.contains(x) {
            return false;
        }
        self.remove_range(x, x + 1);
        true
    }

    /// Remove every number in `lo..hi`.
    pub fn remove_range(&mut self, lo: u64, hi: u64) {
        if lo >= hi {
            return;
        }
        let first = self
            .map
            .range(..=lo)
            .next_back()
            .filter(|&(_, &e)| e > lo)
            .map(|(&s, _)| s)
            .unwrap_or(lo);
        let hit: Vec<(u64, u64)> = self.map.range(first..hi).map(|(&s, &e)| (s, e)).collect();
        for (s, e) in hit {
            self.map.remove(&s);
            self.count -= e - s;
            if s < lo {
                self.map.insert(s, lo);
                self.count += lo - s;
            }
            if e > hi {
                self.map.insert(hi, e);
                self.count += e - hi;
            }
        }
    }

    /// Remove every number of `other`.
    pub fn subtract(&mut self, other: &Ranges) {
        for (s, e) in other.iter() {
            self.remove_range(s, e);
        }
    }

    /// The numbers in both sets.
    pub fn intersection(&self, other: &Ranges) -> Ranges {
        let mut out = Ranges::new();
        let (mut a, mut b) = (self.iter().peekable(), other.iter().peekable());
        while let (Some(&(s1, e1)), Some(&(s2, e2))) = (a.peek(), b.peek()) {
            let (lo, hi) = (s1.max(s2), e1.min(e2));
            if lo < hi {
                out.insert_range(lo, hi);
            }
            if e1 <= e2 {
                a.next();
            } else {
                b.next();
            }
        }
        out
    }

    /// Take out up to `n` of the smallest numbers below `bound`.
    pub fn take_below(&mut self, bound: u64, n: u64) -> Ranges {
        let mut out = Ranges::new();
        let mut left = n;
        while left > 0 {
            let Some((&s, &e)) = self.map.first_key_value() else {
                break;
            };
            if s >= bound {
                break;
            }
            let end = e.min(bound).min(s.saturating_add(left));
            self.remove_range(s, end);
            out.insert_range(s, end);
            left -= end - s;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    #[derive(Clone, Debug)]
    enum Op {
        Insert(u64, u64),
        Remove(u64),
        RemoveRange(u64, u64),
        TakeBelow(u64, u64),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (0u64..200, 0u64..20).prop_map(|(a, l)| Op::Insert(a, a + l)),
            (0u64..220).prop_map(Op::Remove),
            (0u64..200, 0u64..30).prop_map(|(a, l)| Op::RemoveRange(a, a + l)),
            (0u64..220, 0u64..40).prop_map(|(b, n)| Op::TakeBelow(b, n)),
        ]
    }

    fn numbers(r: &Ranges) -> BTreeSet<u64> {
        r.iter().flat_map(|(s, e)| s..e).collect()
    }

    proptest! {
        /// Every operation does what it does on a set of numbers, and the
        /// ranges stay disjoint and non-adjacent with a true count.
        #[test]
        fn ranges_behave_as_a_set_of_numbers(
            ops in proptest::collection::vec(op(), 0..80),
            other in proptest::collection::vec((0u64..200, 0u64..20), 0..10),
        ) {
            let mut r = Ranges::new();
            let mut m: BTreeSet<u64> = BTreeSet::new();
            for o in ops {
                match o {
                    Op::Insert(lo, hi) => { r.insert_range(lo, hi); m.extend(lo..hi); }
                    Op::Remove(x) => prop_assert_eq!(r.remove(x), m.remove(&x)),
                    Op::RemoveRange(lo, hi) => {
                        r.remove_range(lo, hi);
                        for x in lo..hi { m.remove(&x); }
                    }
                    Op::TakeBelow(b, n) => {
                        let got = numbers(&r.take_below(b, n));
                        let want: BTreeSet<u64> =
                            m.iter().copied().filter(|&x| x < b).take(n as usize).collect();
                        for x in &want { m.remove(x); }
                        prop_assert_eq!(got, want);
                    }
                }
                prop_assert_eq!(numbers(&r), m.clone());
                prop_assert_eq!(r.len(), m.len() as u64);
                prop_assert_eq!(r.first(), m.first().copied());
                let v: Vec<(u64, u64)> = r.iter().collect();
                prop_assert!(v.windows(2).all(|w| w[0].1 < w[1].0), "{:?}", v);
            }
            let mut o = Ranges::new();
            for (lo, l) in other { o.insert_range(lo, lo + l); }
            let both: BTreeSet<u64> = numbers(&o).intersection(&m).copied().collect();
            prop_assert_eq!(numbers(&r.intersection(&o)), both);
            let mut sub = r.clone();
            sub.subtract(&o);
            let diff: BTreeSet<u64> = m.difference(&numbers(&o)).copied().collect();
            prop_assert_eq!(numbers(&sub), diff);
            for x in 0..230 { prop_assert_eq!(r.contains(x), m.contains(&x)); }
        }
    }
}
