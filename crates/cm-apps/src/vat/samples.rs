//! Delay samples in bounded memory: every sample up to [`CAP`], then a
//! uniform sample of them all (Vitter's Algorithm R), so that a receiver
//! or sender that runs for days does not grow without bound. The mean and
//! the maximum are exact at any length; the 95th percentile is exact up to
//! [`CAP`] samples (87 minutes of 20 ms frames) and an estimate from a
//! uniform sample of that size after.

use super::DelayStats;

/// Samples kept; past this, each new one replaces a random kept one with
/// probability `CAP / seen`.
pub const CAP: usize = 1 << 18;

/// Delay samples, ms.
#[derive(Clone, Debug, Default)]
pub struct Samples {
    kept: Vec<f64>,
    seen: u64,
    sum: f64,
    max: Option<f64>,
    /// xorshift64 state for the replacement draws (fixed seed: runs
    /// repeat exactly).
    rng: u64,
}

impl Samples {
    /// No samples yet.
    pub fn new() -> Samples {
        Samples::default()
    }

    /// Add one.
    pub fn push(&mut self, ms: f64) {
        self.seen += 1;
        self.sum += ms;
        self.max = Some(self.max.map_or(ms, |m| m.max(ms)));
        if self.kept.len() < CAP {
            self.kept.push(ms);
            return;
        }
        let j = self.next() % self.seen;
        if let Some(slot) = usize::try_from(j).ok().and_then(|j| self.kept.get_mut(j)) {
            *slot = ms;
        }
    }

    /// Mean, 95th percentile and maximum (all zero when empty).
    pub fn stats(&self) -> DelayStats {
        let Some(max) = self.max else {
            return DelayStats::default();
        };
        DelayStats {
            mean_ms: self.sum / self.seen as f64,
            p95_ms: DelayStats::of(&self.kept).p95_ms,
            max_ms: max,
        }
    }

    fn next(&mut self) -> u64 {
        if self.rng == 0 {
            self.rng = 0x9E37_79B9_7F4A_7C15;
        }
        let mut x = self.rng;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.rng = x;
        x
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_below_the_cap() {
        let mut s = Samples::new();
        assert_eq!(s.stats(), DelayStats::default());
        for x in 1..=100 {
            s.push(f64::from(x));
        }
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(s.stats(), DelayStats::of(&v));
        assert_eq!(s.seen, 100);
    }

    /// Four times the cap of a known distribution: memory stays at the
    /// cap, mean and maximum stay exact, and the 95th percentile of the
    /// kept sample is within 1% of the whole's.
    #[test]
    fn bounded_past_the_cap_with_a_close_percentile() {
        let mut s = Samples::new();
        let n = 4 * CAP as u64;
        // A sawtooth 0..1000 ms over and over: p95 about 950.
        let mut all = Vec::new();
        for i in 0..n {
            s.push((i % 1000) as f64);
            all.push((i % 1000) as f64);
        }
        assert_eq!(s.kept.len(), CAP);
        assert_eq!(s.seen, n);
        let d = s.stats();
        let exact = DelayStats::of(&all);
        assert_eq!(d.max_ms, exact.max_ms);
        assert!((d.mean_ms - exact.mean_ms).abs() < 1e-6, "{d:?} {exact:?}");
        assert!(
            (d.p95_ms - exact.p95_ms).abs() < 0.01 * exact.p95_ms,
            "{d:?} {exact:?}"
        );
    }

    /// A late change in the distribution reaches the kept sample: the
    /// replacement is uniform over everything seen, not over the start.
    #[test]
    fn the_kept_sample_follows_the_whole_run() {
        let mut s = Samples::new();
        for _ in 0..CAP {
            s.push(10.0);
        }
        for _ in 0..CAP {
            s.push(1000.0);
        }
        // Half the run at 1000 ms: its 95th percentile is 1000.
        assert_eq!(s.stats().p95_ms, 1000.0);
        let high = s.kept.iter().filter(|x| **x > 500.0).count() as f64;
        let frac = high / CAP as f64;
        assert!((frac - 0.5).abs() < 0.02, "{frac}");
    }
}
