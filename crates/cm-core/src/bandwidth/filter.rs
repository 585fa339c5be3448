//! The capacity estimate a macroflow runs on: a robust summary of the
//! packet-bunch samples all its flows report (iscc §VI-B).
//!
//! # Why the densest cluster, not the median
//!
//! Packet bunches err in two directions (iscc refs. \[4\], \[16\]):
//! - *Cross traffic* queued between a bunch's packets at the bottleneck
//!   stretches its dispersion: low samples, at `C·b/(b+x)` for `x` bytes
//!   interleaved into `b`. On a shared bottleneck this is the common case,
//!   and it grows with the number of flows (iscc §VI-B: with 32 flows on
//!   one T1, only 95.5% of the samples fell within 7% of the peak).
//! - *Compression*: a bunch that queues behind other traffic after the
//!   bottleneck leaves that queue at the later link's faster rate, so its
//!   dispersion shrinks: high samples.
//!
//! Both biases depend on the other traffic and scatter over a wide range,
//! while undisturbed bunches all measure the same `C` and pile up in one
//! narrow peak (iscc §VI-B, Figure 5: 99.5% of two flows' samples within
//! 1,500–1,520 kb/s). The peak, the mode of the sample distribution, stays
//! at `C` even when most samples are biased, as long as no biased value
//! repeats more often than `C` does. A median holds only while fewer than
//! half the samples are biased *in the same direction*; once interleaving
//! hits most bunches (many flows, small per-flow rates) it slides down into
//! the cross-traffic tail. The mode is the choice.
//!
//! The mode is taken without fixed bin edges (which split a peak that
//! straddles one): over the last `window` samples, sorted, the densest
//! stretch `[v, v·(1 + width)]` is the one holding the most samples, and
//! the estimate is the median of that stretch. Ties go to the stretch that
//! holds the current estimate, so flows keep agreeing (iscc §V-C asks for
//! consistency over accuracy), then to the higher rate. With no two samples
//! within `width` of each other there is no peak yet, and the median of the
//! window stands in.

use std::collections::VecDeque;

use crate::error::ConfigError;
use crate::units::{Rate, mul_div};

/// Parameters of a [`CapacityFilter`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CapacityFilterConfig {
    /// How many of the latest samples are kept (1..=4096); older ones are
    /// forgotten, so the estimate follows a changed path.
    pub window: usize,
    /// Samples needed before an estimate is reported (1..=`window`).
    pub min_samples: usize,
    /// The width of the mode's stretch, relative, in parts per million
    /// (1..=1,000,000; 10,000 is 1%).
    pub width_ppm: u32,
}

impl Default for CapacityFilterConfig {
    fn default() -> Self {
        CapacityFilterConfig {
            window: 32,
            min_samples: 3,
            width_ppm: 10_000,
        }
    }
}

/// The most samples a filter keeps: bounds the per-sample work (a sort of
/// the window).
const MAX_WINDOW: usize = 4096;

impl CapacityFilterConfig {
    /// Reject parameters the filter cannot run.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let bad = |m: &str| Err(ConfigError(m.to_string()));
        if !(1..=MAX_WINDOW).contains(&self.window) {
            return bad("capacity filter window must be in 1..=4096");
        }
        if !(1..=self.window).contains(&self.min_samples) {
            return bad("capacity filter min_samples must be in 1..=window");
        }
        if !(1..=1_000_000).contains(&self.width_ppm) {
            return bad("capacity filter width_ppm must be in 1..=1000000");
        }
        Ok(())
    }
}

/// A sliding-window mode filter over bottleneck-rate samples.
#[derive(Clone, Debug)]
pub struct CapacityFilter {
    cfg: CapacityFilterConfig,
    /// The latest samples in bytes/s, oldest first; never zero.
    samples: VecDeque<u64>,
    /// Reused for sorting.
    sorted: Vec<u64>,
    estimate: Option<Rate>,
}

impl Default for CapacityFilter {
    fn default() -> Self {
        Self::with_valid(CapacityFilterConfig::default())
    }
}

impl CapacityFilter {
    /// A filter with no samples.
    pub fn new(cfg: CapacityFilterConfig) -> Result<Self, ConfigError> {
        cfg.validate()?;
        Ok(Self::with_valid(cfg))
    }

    fn with_valid(cfg: CapacityFilterConfig) -> Self {
        CapacityFilter {
            samples: VecDeque::with_capacity(cfg.window),
            sorted: Vec::with_capacity(cfg.window),
            cfg,
            estimate: None,
        }
    }

    /// Its parameters.
    pub fn config(&self) -> &CapacityFilterConfig {
        &self.cfg
    }

    /// The current estimate; `None` before `min_samples` samples.
    pub fn estimate(&self) -> Option<Rate> {
        self.estimate
    }

    /// Samples held (at most `window`).
    pub fn len(&self) -> usize {
        self.samples.len()
    }

    /// Whether no sample is held.
    pub fn is_empty(&self) -> bool {
        self.samples.is_empty()
    }

    /// Forget every sample and the estimate (e.g. after a route change).
    pub fn clear(&mut self) {
        self.samples.clear();
        self.estimate = None;
    }

    /// Take one sample; returns the estimate after it. A zero sample
    /// carries no information and is ignored.
    pub fn push(&mut self, sample: Rate) -> Option<Rate> {
        if sample == Rate::ZERO {
            return self.estimate;
        }
        if self.samples.len() == self.cfg.window {
            self.samples.pop_front();
        }
        self.samples.push_back(sample.bytes_per_sec());
        if self.samples.len() >= self.cfg.min_samples {
            self.estimate = self.mode().map(Rate::from_bytes_per_sec);
        }
        self.estimate
    }

    /// The median of the densest stretch of the window (see the module doc).
    fn mode(&mut self) -> Option<u64> {
        self.sorted.clear();
        self.sorted.extend(self.samples.iter().copied());
        self.sorted.sort_unstable();
        let v = &self.sorted;
        let current = self.estimate.map(Rate::bytes_per_sec);
        let holds = |lo: usize, hi: usize| current.is_some_and(|c| v[lo] <= c && c <= v[hi]);
        // (count, holds the current estimate, start, end); for ties on
        // count and holding, the later start is the higher rate.
        let mut best: Option<(usize, bool, usize, usize)> = None;
        let mut hi = 0;
        for lo in 0..v.len() {
            let top = v[lo].saturating_add(mul_div(
                v[lo],
                u64::from(self.cfg.width_ppm),
                1_000_000,
                false,
            ));
            hi = hi.max(lo);
            while hi + 1 < v.len() && v[hi + 1] <= top {
                hi += 1;
            }
            let cand = (hi - lo + 1, holds(lo, hi), lo, hi);
            if best.is_none_or(|b| (cand.0, cand.1) >= (b.0, b.1)) {
                best = Some(cand);
            }
        }
        let (count, _, lo, hi) = best?;
        if count < 2 {
            return median(v);
        }
        median(&v[lo..=hi])
    }
}

/// The median of sorted values (the mean of the middle two for an even
/// count); `None` when empty.
fn median(v: &[u64]) -> Option<u64> {
    let n = v.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(v[n / 2]),
        _ => {
            let (a, b) = (v[n / 2 - 1], v[n / 2]);
            Some(a + (b - a) / 2)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(b: u64) -> Rate {
        Rate::from_bytes_per_sec(b)
    }

    #[test]
    fn config_is_validated() {
        assert!(CapacityFilterConfig::default().validate().is_ok());
        for cfg in [
            CapacityFilterConfig {
                window: 0,
                ..Default::default()
            },
            CapacityFilterConfig {
                window: MAX_WINDOW + 1,
                ..Default::default()
            },
            CapacityFilterConfig {
                min_samples: 0,
                ..Default::default()
            },
            CapacityFilterConfig {
                min_samples: 33,
                ..Default::default()
            },
            CapacityFilterConfig {
                width_ppm: 0,
                ..Default::default()
            },
            CapacityFilterConfig {
                width_ppm: 1_000_001,
                ..Default::default()
            },
        ] {
            assert!(CapacityFilter::new(cfg).is_err());
        }
    }

    #[test]
    fn reports_only_after_min_samples_and_ignores_zero() {
        let mut f = CapacityFilter::default();
        assert_eq!(f.push(r(1000)), None);
        assert_eq!(f.push(Rate::ZERO), None);
        assert_eq!(f.push(r(1000)), None);
        assert_eq!(f.len(), 2);
        assert_eq!(f.push(r(1000)), Some(r(1000)));
        f.clear();
        assert!(f.is_empty());
        assert_eq!(f.estimate(), None);
    }

    #[test]
    fn no_peak_falls_back_to_the_median() {
        let mut f = CapacityFilter::default();
        f.push(r(1000));
        f.push(r(3000));
        assert_eq!(f.push(r(2000)), Some(r(2000)));
    }

    #[test]
    fn the_peak_wins_over_a_biased_majority() {
        // 12 samples near C; 18 scattered low (cross traffic) and 2 high
        // (compression). The median of all 32 lies in the low tail.
        let mut f = CapacityFilter::default();
        let c = 1_000_000;
        let mut all = Vec::new();
        for i in 0..20u64 {
            let bad = if i % 10 == 9 {
                c + 50_000 * (i + 1)
            } else {
                c / 2 + 20_000 * i
            };
            all.push(bad);
            f.push(r(bad));
            if i % 5 != 1 && i % 5 != 3 {
                all.push(c + 100 * i);
                f.push(r(c + 100 * i));
            }
        }
        assert_eq!(f.len(), 32);
        all.sort_unstable();
        assert!(median(&all).unwrap() < c * 9 / 10);
        let e = f.estimate().unwrap().bytes_per_sec();
        assert!(e.abs_diff(c) <= c / 100, "estimate {e}");
    }

    #[test]
    fn a_tie_keeps_the_current_estimate() {
        let mut f = CapacityFilter::default();
        for _ in 0..3 {
            f.push(r(2000));
        }
        for _ in 0..3 {
            f.push(r(1000));
        }
        // Three at 1000, three at 2000: the current one (2000) stays.
        assert_eq!(f.estimate(), Some(r(2000)));
        // One more at 1000 breaks the tie.
        assert_eq!(f.push(r(1000)), Some(r(1000)));
    }

    #[test]
    fn the_window_forgets_old_samples() {
        let mut f = CapacityFilter::new(CapacityFilterConfig {
            window: 4,
            min_samples: 1,
            width_ppm: 10_000,
        })
        .unwrap();
        assert_eq!(f.push(r(500)), Some(r(500)));
        for _ in 0..4 {
            f.push(r(800));
        }
        assert_eq!(f.estimate(), Some(r(800)));
        assert_eq!(f.len(), 4);
    }

    #[test]
    fn extreme_samples_do_not_overflow() {
        let mut f = CapacityFilter::default();
        for s in [u64::MAX, u64::MAX - 1, 1, u64::MAX] {
            f.push(r(s));
        }
        assert!(f.estimate().unwrap().bytes_per_sec() >= u64::MAX - 1);
    }
}
