//! Latency histograms: log-linear buckets (each power of two of
//! nanoseconds split into 32), so a percentile is exact to within 1/32 of
//! its power of two (about 3%) at any scale, in a fixed 8 KiB per
//! histogram whatever the number of samples.

use std::time::Duration;

/// Sub-buckets per power of two.
const SUB_BITS: u32 = 5;
const SUB: usize = 1 << SUB_BITS;
/// Powers of two covered (2^48 ns is over three days).
const EXPS: usize = 48;

/// A latency histogram.
#[derive(Clone)]
pub struct Hist {
    counts: Vec<u32>,
    n: u64,
    max_ns: u64,
}

impl Default for Hist {
    fn default() -> Self {
        Hist {
            counts: vec![0; EXPS * SUB],
            n: 0,
            max_ns: 0,
        }
    }
}

impl std::fmt::Debug for Hist {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hist").field("n", &self.n).finish()
    }
}

fn bucket(ns: u64) -> usize {
    if ns < SUB as u64 {
        return ns as usize;
    }
    let exp = 63 - ns.leading_zeros(); // >= SUB_BITS
    let sub = (ns >> (exp - SUB_BITS)) as usize & (SUB - 1);
    let i = (exp - SUB_BITS + 1) as usize * SUB + sub;
    i.min(EXPS * SUB - 1)
}

/// The middle of bucket `i`, in nanoseconds.
fn value(i: usize) -> f64 {
    if i < SUB {
        return i as f64;
    }
    let exp = (i / SUB) as u32 + SUB_BITS - 1;
    let sub = (i % SUB) as u64;
    let lo = (1u64 << exp) + (sub << (exp - SUB_BITS));
    lo as f64 + (1u64 << (exp - SUB_BITS)) as f64 / 2.0
}

impl Hist {
    /// Count one sample.
    pub fn record(&mut self, d: Duration) {
        let ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        let b = bucket(ns);
        self.counts[b] = self.counts[b].saturating_add(1);
        self.n += 1;
        self.max_ns = self.max_ns.max(ns);
    }

    /// Add another histogram's samples.
    pub fn merge(&mut self, o: &Hist) {
        for (a, b) in self.counts.iter_mut().zip(&o.counts) {
            *a = a.saturating_add(*b);
        }
        self.n += o.n;
        self.max_ns = self.max_ns.max(o.max_ns);
    }

    /// The `q`-quantile (0..=1) in microseconds; `None` without samples.
    pub fn quantile_us(&self, q: f64) -> Option<f64> {
        if self.n == 0 {
            return None;
        }
        let rank = ((q * self.n as f64).ceil() as u64).clamp(1, self.n);
        let mut seen = 0u64;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += u64::from(c);
            if seen >= rank {
                return Some(value(i).min(self.max_ns as f64) / 1000.0);
            }
        }
        Some(self.max_ns as f64 / 1000.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_are_within_the_bucket_width() {
        let mut h = Hist::default();
        for us in 1..=1000u64 {
            h.record(Duration::from_micros(us));
        }
        for (q, want) in [(0.5, 500.0), (0.99, 990.0), (0.999, 999.0)] {
            let got = h.quantile_us(q).unwrap_or(0.0);
            assert!((got - want).abs() / want < 0.035, "q{q}: {got} vs {want}");
        }
        assert_eq!(Hist::default().quantile_us(0.5), None);
    }

    #[test]
    fn buckets_are_monotonic_and_bounded() {
        let mut last = 0;
        for ns in (0..1_000_000u64).step_by(37).chain([u64::MAX]) {
            let b = bucket(ns);
            assert!(b >= last && b < EXPS * SUB);
            last = b;
        }
    }
}
