//! Units as types: byte counts and rates.
//!
//! Byte counts and rates are distinct types, so a rate cannot be passed where
//! a count is expected. Internally rates are bytes per second; the
//! RFC 3124 `cmapp_update` rate is bits per second, see [`Rate::bits_per_sec`].

use core::fmt;
use core::ops::{Add, AddAssign, Sub};

use crate::time::Duration;

/// A number of bytes (a window, a grant, bytes in flight).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Bytes(pub u64);

impl Bytes {
    /// Zero bytes.
    pub const ZERO: Bytes = Bytes(0);

    /// The count as a `u64`.
    pub const fn get(self) -> u64 {
        self.0
    }

    /// `self + rhs`, or `None` on overflow.
    pub fn checked_add(self, rhs: Bytes) -> Option<Bytes> {
        self.0.checked_add(rhs.0).map(Bytes)
    }

    /// `self - rhs`, floored at zero.
    pub fn saturating_sub(self, rhs: Bytes) -> Bytes {
        Bytes(self.0.saturating_sub(rhs.0))
    }

    /// `self * n`, saturating.
    pub fn saturating_mul(self, n: u64) -> Bytes {
        Bytes(self.0.saturating_mul(n))
    }
}

impl Add for Bytes {
    type Output = Bytes;
    /// Saturating addition (windows are capped far below `u64::MAX`).
    fn add(self, rhs: Bytes) -> Bytes {
        Bytes(self.0.saturating_add(rhs.0))
    }
}

impl AddAssign for Bytes {
    fn add_assign(&mut self, rhs: Bytes) {
        *self = *self + rhs;
    }
}

impl Sub for Bytes {
    type Output = Bytes;
    /// Saturating subtraction.
    fn sub(self, rhs: Bytes) -> Bytes {
        self.saturating_sub(rhs)
    }
}

impl fmt::Display for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}B", self.0)
    }
}

/// A transmission rate in bytes per second.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Rate(u64);

impl Rate {
    /// Zero bytes per second.
    pub const ZERO: Rate = Rate(0);

    /// A rate of `b` bytes per second.
    pub const fn from_bytes_per_sec(b: u64) -> Rate {
        Rate(b)
    }

    /// A rate of `b` bits per second (rounded down to whole bytes).
    pub const fn from_bits_per_sec(b: u64) -> Rate {
        Rate(b / 8)
    }

    /// `bytes` per `interval`; `None` when the interval is zero.
    pub fn per(bytes: Bytes, interval: Duration) -> Option<Rate> {
        if interval.is_zero() {
            return None;
        }
        Some(Rate(mul_div(
            bytes.0,
            1_000_000,
            interval.as_micros(),
            false,
        )))
    }

    /// Bytes per second.
    pub const fn bytes_per_sec(self) -> u64 {
        self.0
    }

    /// Bits per second (the unit of RFC 3124's `cmapp_update`), saturating.
    pub const fn bits_per_sec(self) -> u64 {
        self.0.saturating_mul(8)
    }

    /// How long sending `bytes` takes at this rate; `None` at rate zero.
    pub fn time_to_send(self, bytes: Bytes) -> Option<Duration> {
        if self.0 == 0 {
            return None;
        }
        Some(Duration::from_micros(mul_div(
            bytes.0, 1_000_000, self.0, true,
        )))
    }

    /// Bytes sent in `d` at this rate, saturating.
    pub fn bytes_in(self, d: Duration) -> Bytes {
        Bytes(mul_div(self.0, d.as_micros(), 1_000_000, false))
    }

    /// The rate scaled by `num / den` (`den` zero yields zero).
    pub fn scale(self, num: u64, den: u64) -> Rate {
        if den == 0 {
            return Rate(0);
        }
        Rate(mul_div(self.0, num, den, false))
    }
}

/// `a * b / d`, rounded down (or up with `ceil`), saturating at
/// `u64::MAX`; `d` must not be zero. Exact: in 64 bits when the product
/// fits (a 128-bit division is a library call costing several times more,
/// and these run per grant and per acknowledgement), else in 128 bits; by
/// a divisor of 1 without dividing (AIMD's pacing gain in slow start is
/// 2/1, scaled per grant).
///
/// ```
/// use cm_core::units::mul_div;
/// assert_eq!(mul_div(1500, 1_000_000, 7, false), 214_285_714);
/// assert_eq!(mul_div(u64::MAX, 2, 1, false), u64::MAX);
/// ```
pub fn mul_div(a: u64, b: u64, d: u64, ceil: bool) -> u64 {
    if d == 1 {
        return a.saturating_mul(b);
    }
    match a.checked_mul(b) {
        Some(p) if ceil => p.div_ceil(d),
        Some(p) => p / d,
        None => {
            let p = u128::from(a) * u128::from(b);
            let q = if ceil {
                p.div_ceil(u128::from(d))
            } else {
                p / u128::from(d)
            };
            u64::try_from(q).unwrap_or(u64::MAX)
        }
    }
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let bps = self.bits_per_sec() as f64;
        if bps >= 1e9 {
            write!(f, "{:.2}Gbit/s", bps / 1e9)
        } else if bps >= 1e6 {
            write!(f, "{:.2}Mbit/s", bps / 1e6)
        } else {
            write!(f, "{:.1}kbit/s", bps / 1e3)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scaling_by_a_whole_number_is_the_saturated_product() {
        for r in [0, 1, 12_345, u64::MAX / 2, u64::MAX / 2 + 1, u64::MAX] {
            for n in [0, 1, 2, 7] {
                let exact = u128::from(r) * u128::from(n);
                let want = u64::try_from(exact).unwrap_or(u64::MAX);
                assert_eq!(Rate(r).scale(n, 1), Rate(want), "{r} x {n}");
                assert_eq!(mul_div(r, n, 1, true), want, "{r} x {n}, rounded up");
            }
        }
    }

    #[test]
    fn mul_div_matches_128_bit_arithmetic_on_both_paths() {
        let cases = [
            (0, 5, 7),
            (15_000, 1_000_000, 100_000),
            (7, 1_000_000, 3),
            (u64::MAX / 1_000_000 + 1, 1_000_000, 1_000_000), // 128-bit path
            (u64::MAX, u64::MAX, 1),                          // saturates
            (u64::MAX, 3, 2),
            (1 << 40, 1 << 30, 1 << 20),
        ];
        for (a, b, d) in cases {
            let p = u128::from(a) * u128::from(b);
            for ceil in [false, true] {
                let q = if ceil {
                    p.div_ceil(u128::from(d))
                } else {
                    p / u128::from(d)
                };
                let want = u64::try_from(q).unwrap_or(u64::MAX);
                assert_eq!(mul_div(a, b, d, ceil), want, "{a} * {b} / {d} ceil {ceil}");
            }
        }
    }

    #[test]
    fn rate_from_window_over_rtt() {
        // sigcomm1999 §4.1: shaping rate = window / srtt.
        let r = Rate::per(Bytes(15_000), Duration::from_millis(100)).unwrap();
        assert_eq!(r.bytes_per_sec(), 150_000);
        assert_eq!(r.bits_per_sec(), 1_200_000);
        assert_eq!(Rate::per(Bytes(1), Duration::ZERO), None);
    }

    #[test]
    fn time_to_send_rounds_up_and_never_divides_by_zero() {
        let r = Rate::from_bytes_per_sec(3);
        assert_eq!(
            r.time_to_send(Bytes(1)),
            Some(Duration::from_micros(333_334))
        );
        assert_eq!(Rate::ZERO.time_to_send(Bytes(1)), None);
        assert_eq!(r.bytes_in(Duration::from_secs(2)), Bytes(6));
    }

    #[test]
    fn extreme_values_saturate() {
        let r = Rate::per(Bytes(u64::MAX), Duration::from_micros(1)).unwrap();
        assert_eq!(r.bytes_per_sec(), u64::MAX);
        assert_eq!(r.bits_per_sec(), u64::MAX);
        assert_eq!(
            Rate::from_bytes_per_sec(u64::MAX).bytes_in(Duration::MAX),
            Bytes(u64::MAX)
        );
        assert_eq!(Rate::from_bytes_per_sec(10).scale(1, 0), Rate::ZERO);
    }
}
