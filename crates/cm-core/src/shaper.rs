//! The rate shaper: grants are released at about window / srtt so a
//! macroflow does not burst its window into the bottleneck queue
//! (sigcomm1999 §4.1, "a window-based scheme that modulates transmissions
//! using a rate-based traffic shaper to reduce bursts").
//!
//! A token bucket that may go into debt: a grant is allowed whenever the
//! bucket is not in debt, and its bytes are then taken, so grants of any size
//! work and the long-run rate is exact. Tokens are kept in byte-microseconds
//! so no fraction of a byte is ever lost to rounding.
//!
//! A pacing slack coalesces wake-ups: the macroflow's timer is armed for
//! the time the bucket is out of debt (the next grant's due time), and once
//! awake, every grant due within the slack goes too, so the bucket may be
//! in debt by up to rate × slack. The debt is repaid before the next
//! wake-up, so the long-run rate does not change; the timer fires about
//! once per `1 + rate × slack / MTU` grants instead of once per grant.
//! Linux paces the same way: fq releases packets due within its
//! `timer_slack` (10 µs) of now, and TCP's earliest departure times
//! (`tcp_pacing`, EDT) let a packet go that is due before the next timer.

use crate::time::{Duration, Instant};
use crate::units::{Bytes, Rate};

const US_PER_SEC: i128 = 1_000_000;

/// A token-bucket pacer for one macroflow.
#[derive(Clone, Debug)]
pub struct Shaper {
    /// Tokens in byte-microseconds (bytes * 1e6); negative is debt.
    tokens: i128,
    last: Instant,
    burst_time: Duration,
    /// Grants due within this of now are released now.
    slack: Duration,
    /// The debt allowed at the rate of the last refill: rate × slack, in
    /// byte-microseconds.
    lead: i128,
}

impl Shaper {
    /// A shaper whose bucket holds `max(2 MTU, rate * burst_time)`, with
    /// no pacing slack.
    pub fn new(now: Instant, burst_time: Duration) -> Self {
        Shaper {
            tokens: 0,
            last: now,
            burst_time,
            slack: Duration::ZERO,
            lead: 0,
        }
    }

    /// The same shaper releasing grants due within `slack` of now together
    /// (see the module documentation).
    pub fn with_slack(mut self, slack: Duration) -> Self {
        self.slack = slack;
        self
    }

    fn depth(&self, rate: Rate, mtu: Bytes) -> i128 {
        let burst = rate.bytes_in(self.burst_time).max(Bytes(2 * mtu.0));
        i128::from(burst.0) * US_PER_SEC
    }

    /// Accrue tokens at `rate` since the last call. `None` means unpaced
    /// (no RTT estimate yet): the bucket fills up.
    pub fn refill(&mut self, now: Instant, rate: Option<Rate>, mtu: Bytes) {
        let elapsed = now.saturating_since(self.last).as_micros();
        self.last = self.last.max(now);
        let Some(rate) = rate else {
            self.tokens = self.tokens.max(0).max(self.depth(Rate::ZERO, mtu));
            self.lead = 0;
            return;
        };
        let depth = self.depth(rate, mtu);
        let add = i128::from(rate.bytes_per_sec()) * i128::from(elapsed);
        self.tokens = self.tokens.saturating_add(add).min(depth);
        self.lead = i128::from(rate.bytes_per_sec()) * i128::from(self.slack.as_micros());
    }

    /// Whether a grant may be released now: the bucket is not in debt, or
    /// its debt is repaid within the slack (call [`Shaper::refill`] first).
    pub fn allows(&self) -> bool {
        self.tokens >= -self.lead
    }

    /// Take `bytes` for a grant (may leave the bucket in debt).
    pub fn consume(&mut self, bytes: Bytes) {
        self.tokens = self.tokens.saturating_sub(i128::from(bytes.0) * US_PER_SEC);
    }

    /// Return `bytes` of an unused grant.
    pub fn refund(&mut self, bytes: Bytes, rate: Option<Rate>, mtu: Bytes) {
        let depth = self.depth(rate.unwrap_or(Rate::ZERO), mtu);
        self.tokens = (self.tokens + i128::from(bytes.0) * US_PER_SEC).min(depth);
    }

    /// When the bucket is out of debt at `rate`: the next grant's due time,
    /// the wake-up at which it and those due within the slack after it are
    /// released. `None` if it never will be (rate zero) and `Some(now)` if
    /// it already is.
    pub fn next_release(&self, now: Instant, rate: Option<Rate>) -> Option<Instant> {
        if self.tokens >= 0 {
            return Some(now);
        }
        let Some(rate) = rate else { return Some(now) };
        let r = i128::from(rate.bytes_per_sec());
        if r == 0 {
            return None;
        }
        let debt = -self.tokens;
        // In 64 bits when the debt fits (see `to_bytes`).
        let us = match (u64::try_from(debt), u64::try_from(r)) {
            (Ok(d), Ok(r)) => d.div_ceil(r),
            _ => u64::try_from((debt + r - 1) / r).unwrap_or(u64::MAX),
        };
        Some(self.last.saturating_add(Duration::from_micros(us)))
    }

    /// Bytes of credit currently in the bucket (negative: debt).
    pub fn credit(&self) -> i64 {
        to_bytes(self.tokens)
    }

    /// Bytes that may be released now: the credit plus what accrues within
    /// the slack at the rate of the last refill (negative: none).
    pub fn releasable(&self) -> i64 {
        to_bytes(self.tokens.saturating_add(self.lead))
    }
}

/// Whole bytes of a token count (rounded toward zero), saturating. A
/// count that fits in 64 bits, as every one does below 9 TB of credit, is
/// divided in 64 bits: a 128-bit division is a library call, and this runs
/// per grant (`cargo bench -p cm-daemon --bench calls`).
fn to_bytes(tokens: i128) -> i64 {
    match i64::try_from(tokens) {
        Ok(t) => t / 1_000_000,
        Err(_) => i64::try_from(tokens / US_PER_SEC).unwrap_or(if tokens < 0 {
            i64::MIN
        } else {
            i64::MAX
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MTU: Bytes = Bytes(1000);

    #[test]
    fn token_counts_become_bytes_as_in_128_bits_on_both_paths() {
        let slow = |t: i128| {
            i64::try_from(t / US_PER_SEC).unwrap_or(if t < 0 { i64::MIN } else { i64::MAX })
        };
        for t in [
            0,
            1,
            -1,
            999_999,
            -999_999,
            1_000_000,
            -1_000_001,
            i128::from(i64::MAX),
            i128::from(i64::MIN),
            i128::from(i64::MAX) + 1,
            i128::from(i64::MIN) - 1,
            i128::MAX,
            i128::MIN,
        ] {
            assert_eq!(to_bytes(t), slow(t), "{t}");
        }
    }

    #[test]
    fn the_release_time_rounds_up_on_both_paths() {
        let mut s = Shaper::new(Instant::ZERO, Duration::ZERO);
        s.consume(Bytes(1));
        // 1 byte of debt at 3 B/s: 333,333.3 µs, rounded up.
        let r = Some(Rate::from_bytes_per_sec(3));
        assert_eq!(
            s.next_release(Instant::ZERO, r),
            Some(Instant::ZERO + Duration::from_micros(333_334))
        );
        // A debt beyond 64 bits takes the 128-bit path.
        s.tokens = -(i128::from(u64::MAX) * 4);
        let r = Some(Rate::from_bytes_per_sec(u64::MAX));
        assert_eq!(
            s.next_release(Instant::ZERO, r),
            Some(Instant::ZERO + Duration::from_micros(4))
        );
    }

    #[test]
    fn paces_at_the_given_rate_after_a_small_burst() {
        // 100 kB/s = one 1000-byte grant per 10 ms.
        let rate = Some(Rate::from_bytes_per_sec(100_000));
        let mut s = Shaper::new(Instant::ZERO, Duration::from_millis(1));
        let mut now = Instant::from_micros(1_000_000);
        let mut grants = Vec::new();
        while now < Instant::from_micros(2_000_000) {
            s.refill(now, rate, MTU);
            if s.allows() {
                s.consume(MTU);
                grants.push(now);
            } else {
                now = s
                    .next_release(now, rate)
                    .unwrap()
                    .max(now + Duration::from_micros(1));
                continue;
            }
        }
        // burst of 2 MTU (bucket) plus 1 s at 100 grants/s
        assert!(
            (100..=103).contains(&grants.len()),
            "{} grants",
            grants.len()
        );
        let gaps: Vec<u64> = grants
            .windows(2)
            .skip(3)
            .map(|w| (w[1] - w[0]).as_micros())
            .collect();
        assert!(
            gaps.iter().all(|&g| g == 10_000),
            "steady gaps of 10ms: {gaps:?}"
        );
    }

    #[test]
    fn slack_releases_what_is_due_within_it_in_one_wake_up() {
        // 100 kB/s, one 1000-byte grant due per 10 ms; a 25 ms slack lets
        // the two grants due after the first go with it (2500 B of lead).
        let rate = Some(Rate::from_bytes_per_sec(100_000));
        let mut s = Shaper::new(Instant::ZERO, Duration::from_millis(1))
            .with_slack(Duration::from_millis(25));
        let mut now = Instant::from_micros(1_000_000);
        s.refill(now, rate, MTU);
        // Spend the bucket the idle second filled.
        while s.credit() > 0 {
            s.consume(MTU);
        }
        let mut wakeups = Vec::new();
        while now < Instant::from_micros(2_000_000) {
            now = s.next_release(now, rate).unwrap();
            s.refill(now, rate, MTU);
            let mut n = 0;
            while s.allows() {
                s.consume(MTU);
                n += 1;
            }
            wakeups.push((now, n));
        }
        assert!(
            wakeups.iter().skip(1).all(|&(_, n)| n == 3),
            "three grants per wake-up: {wakeups:?}"
        );
        let gaps: Vec<u64> = wakeups
            .windows(2)
            .skip(1)
            .map(|w| (w[1].0 - w[0].0).as_micros())
            .collect();
        assert!(
            gaps.iter().all(|&g| g == 30_000),
            "wake-ups 30 ms apart: {gaps:?}"
        );
        // The debt never exceeds the lead plus one grant.
        assert!(s.credit() >= -3_500, "debt {}", s.credit());
        assert_eq!(s.releasable(), s.credit() + 2_500);
    }

    #[test]
    fn zero_slack_is_the_plain_bucket() {
        let rate = Some(Rate::from_bytes_per_sec(100_000));
        let mut s = Shaper::new(Instant::ZERO, Duration::from_millis(1)).with_slack(Duration::ZERO);
        s.refill(Instant::ZERO, rate, MTU);
        s.consume(Bytes(1));
        assert!(!s.allows(), "one byte of debt waits");
        assert_eq!(s.releasable(), s.credit());
        assert_eq!(
            s.next_release(Instant::ZERO, rate),
            Some(Instant::from_micros(10))
        );
    }

    #[test]
    fn unpaced_without_rate_estimate() {
        let mut s = Shaper::new(Instant::ZERO, Duration::from_millis(1));
        s.refill(Instant::ZERO, None, MTU);
        assert!(s.allows());
        s.consume(MTU);
        s.consume(MTU);
        s.consume(MTU);
        assert_eq!(s.next_release(Instant::ZERO, None), Some(Instant::ZERO));
    }

    #[test]
    fn zero_rate_never_releases() {
        let mut s = Shaper::new(Instant::ZERO, Duration::from_millis(1));
        s.consume(MTU);
        assert_eq!(s.next_release(Instant::ZERO, Some(Rate::ZERO)), None);
    }

    #[test]
    fn refund_returns_unused_grant() {
        let rate = Some(Rate::from_bytes_per_sec(1000));
        let mut s = Shaper::new(Instant::ZERO, Duration::from_millis(1));
        s.consume(MTU);
        assert!(!s.allows());
        s.refund(MTU, rate, MTU);
        assert!(s.allows());
    }
}
