//! The TCP throughput equation of TFRC (RFC 5348 §3.1) and its inverse,
//! the loss event rate that yields a given rate (RFC 5348 §6.3.1).
//!
//! Both work in `f64`: bytes, seconds and bytes per second. Their inputs
//! come from the controller's state, so both are total: no input, however
//! odd (zero, negative, NaN, infinite), makes them panic, and the results
//! are never NaN.

/// `b` of RFC 5348 §3.1: packets acknowledged by one TCP acknowledgement.
/// The RFC recommends 1 (no delayed acknowledgements in the model).
const B: f64 = 1.0;

/// `t_RTO = 4 R`, the simplification RFC 5348 §3.1 recommends.
const RTO_PER_RTT: f64 = 4.0;

/// The smallest loss event rate the inverse searches down to: one loss
/// event in 10^12 packets (the rate is then far above any link's).
const MIN_P: f64 = 1e-12;

/// The TCP-friendly rate in bytes per second for packet size `s` (bytes),
/// round-trip time `r` (seconds) and loss event rate `p`
/// (RFC 5348 §3.1, with b = 1 and t_RTO = 4R):
///
/// ```text
///                                 s
/// X = -------------------------------------------------------------
///     R*sqrt(2*b*p/3) + t_RTO * (3*sqrt(3*b*p/8)) * p * (1 + 32*p^2)
/// ```
///
/// `p` is clamped to (0, 1]; with `p <= 0` (no loss), a non-positive or
/// non-finite `r`, the rate is unbounded and `f64::INFINITY` is returned;
/// with `s <= 0` or NaN, zero. Callers clamp the result.
///
/// ```
/// use cm_core::controller::tfrc::equation::throughput;
/// // s = 1460 B, R = 100 ms, p = 1%: about 164 kB/s (1.31 Mbit/s).
/// let x = throughput(1460.0, 0.1, 0.01);
/// assert!((x - 164_005.06).abs() < 0.01);
/// ```
pub fn throughput(s: f64, r: f64, p: f64) -> f64 {
    if s.is_nan() || s <= 0.0 {
        return 0.0;
    }
    if p.is_nan() || p <= 0.0 || r.is_nan() || r <= 0.0 || r == f64::INFINITY {
        return f64::INFINITY;
    }
    let p = p.min(1.0);
    let t_rto = RTO_PER_RTT * r;
    let denom = r * (2.0 * B * p / 3.0).sqrt()
        + t_rto * (3.0 * (3.0 * B * p / 8.0).sqrt()) * p * (1.0 + 32.0 * p * p);
    if denom.is_nan() || denom <= 0.0 {
        return f64::INFINITY;
    }
    s / denom
}

/// The loss event rate `p` at which [`throughput`] gives `x` bytes per
/// second for packet size `s` and round-trip time `r`: the inverse RFC
/// 5348 §6.3.1 uses to seed the loss history after the first loss event
/// (the synthetic first interval is `1 / p` for the rate X_recv).
///
/// The equation decreases strictly in `p`, so a bisection (in `log p`,
/// over `[1e-12, 1]`) finds it. A rate at or below the equation's value at
/// `p = 1` gives 1; a rate at or above its value at `p = 1e-12` (or an
/// infinite or NaN rate) gives `1e-12`. The result is always in
/// `[1e-12, 1]`.
pub fn loss_rate_for(x: f64, s: f64, r: f64) -> f64 {
    if x.is_nan() || x == f64::INFINITY {
        return MIN_P;
    }
    if throughput(s, r, 1.0) >= x {
        return 1.0;
    }
    if throughput(s, r, MIN_P) <= x {
        return MIN_P;
    }
    // Invariant: throughput(lo) > x > throughput(hi).
    let (mut lo, mut hi) = (MIN_P.ln(), 0.0_f64);
    for _ in 0..100 {
        let mid = 0.5 * (lo + hi);
        if throughput(s, r, mid.exp()) > x {
            lo = mid;
        } else {
            hi = mid;
        }
        if hi - lo < 1e-12 {
            break;
        }
    }
    (0.5 * (lo + hi)).exp().clamp(MIN_P, 1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_rfc5348_section_3_1_by_hand() {
        // RFC 5348 §3.1 with s = 1460 B, R = 0.1 s, p = 0.01, b = 1,
        // t_RTO = 4R = 0.4 s, term by term:
        let (s, r, p) = (1460.0_f64, 0.1_f64, 0.01_f64);
        let first = r * (2.0 * p / 3.0).sqrt(); // 0.1 * 0.081650 = 0.0081650
        let second = 0.4 * (3.0 * (3.0 * p / 8.0).sqrt()) * p * (1.0 + 32.0 * p * p);
        // 0.4 * (3 * 0.0612372) * 0.01 * 1.0032 = 0.00073720
        assert!((first - 0.008_165).abs() < 1e-6);
        assert!((second - 0.000_737_20).abs() < 1e-8);
        let by_hand = s / (first + second);
        assert!((throughput(s, r, p) - by_hand).abs() < 1e-6);
        // The known value: 164,005 B/s, about 1.31 Mbit/s, 11.2 packets per RTT.
        assert!((throughput(s, r, p) - 164_005.062).abs() < 1e-3);
        // At p = 1: s / (R * (sqrt(2/3) + 4 * 3 * sqrt(3/8) * 33)).
        assert!((throughput(s, r, 1.0) - 60.004_279).abs() < 1e-5);
    }

    #[test]
    fn scales_with_packet_size_and_inverse_rtt() {
        let x = throughput(1460.0, 0.1, 0.01);
        assert!((throughput(180.0, 0.1, 0.01) - x * 180.0 / 1460.0).abs() < 1e-6);
        assert!((throughput(1460.0, 0.2, 0.01) - x / 2.0).abs() < 1e-6);
        assert!(throughput(1460.0, 0.1, 0.02) < x, "decreasing in p");
    }

    #[test]
    fn odd_inputs_never_give_nan() {
        for s in [0.0, -1.0, f64::NAN, 1.0, f64::INFINITY] {
            for r in [0.0, -1.0, f64::NAN, 1e-9, 0.1, f64::INFINITY] {
                for p in [0.0, -1.0, f64::NAN, 1e-15, 0.5, 1.0, 7.0, f64::INFINITY] {
                    let x = throughput(s, r, p);
                    assert!(!x.is_nan(), "s={s} r={r} p={p}");
                    assert!(x >= 0.0);
                    let q = loss_rate_for(s, 1460.0, r);
                    assert!((MIN_P..=1.0).contains(&q), "x={s} r={r}: {q}");
                }
            }
        }
    }

    #[test]
    fn inverse_round_trips() {
        for p in [1e-6, 1e-4, 0.01, 0.05, 0.3, 0.9] {
            let x = throughput(1460.0, 0.05, p);
            let q = loss_rate_for(x, 1460.0, 0.05);
            assert!((q - p).abs() / p < 1e-6, "p={p} q={q}");
        }
        assert_eq!(loss_rate_for(1.0, 1460.0, 0.1), 1.0);
        assert_eq!(loss_rate_for(f64::INFINITY, 1460.0, 0.1), MIN_P);
    }
}
