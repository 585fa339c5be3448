//! How many loss samples the self-test needs, and how sure a loss estimate is.

/// z for a two-sided 99.9 % confidence interval.
pub(super) const Z999: f64 = 3.2905;

/// Wilson score interval for `k` successes in `n` trials at normal quantile `z`.
pub fn wilson_interval(k: u64, n: u64, z: f64) -> (f64, f64) {
    if n == 0 {
        return (0.0, 1.0);
    }
    let (n, p) = (n as f64, k as f64 / n as f64);
    let z2 = z * z;
    let denom = 1.0 + z2 / n;
    let center = (p + z2 / (2.0 * n)) / denom;
    let half = z / denom * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt();
    let lo = if k == 0 {
        0.0
    } else {
        (center - half).max(0.0)
    };
    (lo, (center + half).min(1.0))
}

/// Samples needed for the 99.9 % interval's half-width to be `tol × p`.
pub fn loss_samples_needed(p: f64, tol: f64) -> f64 {
    Z999 * Z999 * (1.0 - p) / (p * tol * tol)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wilson() {
        let (lo, hi) = wilson_interval(1000, 100_000, Z999);
        assert!(lo < 0.01 && hi > 0.01 && hi - lo < 0.0022, "{lo} {hi}");
        assert_eq!(wilson_interval(0, 0, Z999), (0.0, 1.0));
        let (lo, _) = wilson_interval(0, 1000, Z999);
        assert_eq!(lo, 0.0);
    }

    #[test]
    fn sample_size() {
        // p = 1 %, 5 %: ~429k samples for a 99.9 % half-width of 5 % of p.
        let n = loss_samples_needed(0.01, 0.05);
        assert!((428_000.0..430_000.0).contains(&n), "{n}");
    }
}
