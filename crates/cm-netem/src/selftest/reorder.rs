//! The self-test's reordering and duplication phase: datagrams carrying sequence
//! numbers, sent below the rate with the loss filter off, and the fractions of them
//! that arrive after a higher sequence number (reordered) or a second time
//! (duplicated), each judged like the loss phase (Wilson interval, `confidence`).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::{NetemError, Result};

use super::confidence::{Z999, loss_samples_needed, wilson_interval};
use super::measure::{LOSS_MAX_PPS, connect_pair};
use super::traffic::{bind_in, paced_send, rcvbuf_errors, receive_seqs};
use super::{LossRule, SelfTestOptions, UDP_IP_OVERHEAD};
use crate::path::{Node, Path};

/// Payload of a datagram of this phase: its sequence number (big-endian `u64`).
const SEQ_PAYLOAD: usize = 8;

/// One measured fraction of the phase against its expectation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FractionCheck {
    /// Configured probability.
    pub configured: f64,
    /// Expected fraction at the phase's packet spacing (see [`ReorderCheck`]).
    pub expected: f64,
    /// Arrivals counted (late arrivals, or extra copies).
    pub count: u64,
    /// `count` / distinct datagrams received.
    pub measured: f64,
    /// Lower end of the 99.9 % (Wilson) confidence interval.
    pub ci_low: f64,
    /// Upper end of the 99.9 % confidence interval.
    pub ci_high: f64,
    /// (measured − expected) / expected (0 when expected is 0).
    pub rel_error: f64,
    /// Which rule applied (as for the loss check: `Zero` means nothing may be counted).
    pub rule: LossRule,
    /// Whether the rule held.
    pub pass: bool,
}

/// Reordering and duplication phase.
///
/// A datagram is *reordered* when it arrives after one with a higher sequence number,
/// *duplicated* when its sequence number arrived before. The delay box holds a packet
/// back with probability `p`; it arrives late if one of the `m` datagrams sent within
/// the reorder delay after it was not held back, so the expected reordered fraction at
/// send spacing `s` is `p (1 − p^m)` with `m = ⌈reorder_delay / s⌉ − 1` (`p` itself
/// once a few datagrams fit in the reorder delay). The expected duplicated fraction is
/// the configured probability.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReorderCheck {
    /// Configured extra delay of a held-back packet, ms.
    pub reorder_delay_ms: f64,
    /// Datagrams sent.
    pub sent: u64,
    /// Distinct datagrams received (the denominator of both fractions).
    pub received: u64,
    /// Datagrams the receiver's socket buffer dropped (not in `received`).
    pub rcvbuf_errors: u64,
    /// Drops at the bottleneck queue during the phase (should be 0).
    pub bottleneck_drops: u64,
    /// Packets the delay box held back during the phase.
    pub held_back: u64,
    /// Extra copies the delay box wrote during the phase.
    pub copies_written: u64,
    /// Send rate, datagrams/s.
    pub pps: f64,
    /// Arrivals after a higher sequence number.
    pub reordered: FractionCheck,
    /// Arrivals of a sequence number seen before.
    pub duplicated: FractionCheck,
    /// Both checks held.
    pub pass: bool,
}

/// Counts of a sequence of arrivals of datagrams numbered `0..n`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct SeqCounts {
    /// Distinct numbers received.
    pub(super) distinct: u64,
    /// First arrivals of a number below the highest seen before.
    pub(super) late: u64,
    /// Arrivals of a number seen before.
    pub(super) copies: u64,
    /// Numbers outside `0..n` (not from this phase).
    pub(super) stray: u64,
}

/// Classifies `arrivals` (sequence numbers in arrival order) of datagrams `0..n`.
pub(super) fn classify(arrivals: &[u64], n: u64) -> SeqCounts {
    let mut seen = vec![false; usize::try_from(n).unwrap_or(0)];
    let mut c = SeqCounts::default();
    let mut max: Option<u64> = None;
    for &seq in arrivals {
        let Some(slot) = usize::try_from(seq).ok().and_then(|i| seen.get_mut(i)) else {
            c.stray += 1;
            continue;
        };
        if *slot {
            c.copies += 1;
            continue;
        }
        *slot = true;
        c.distinct += 1;
        if max.is_some_and(|m| seq < m) {
            c.late += 1;
        }
        max = max.max(Some(seq));
    }
    c
}

/// Expected reordered fraction for hold probability `p`, extra delay `extra` and
/// send spacing `spacing` (see [`ReorderCheck`]).
pub(super) fn expected_reordered(p: f64, extra: Duration, spacing: Duration) -> f64 {
    if p <= 0.0 || spacing.is_zero() {
        return p.max(0.0);
    }
    let m = (extra.as_secs_f64() / spacing.as_secs_f64()).ceil() - 1.0;
    if m < 1.0 { 0.0 } else { p * (1.0 - p.powf(m)) }
}

/// The rule for expected fraction `p` with a sample of `n`, as in the loss phase.
fn rule_for(p: f64, n: u64, tolerance: f64) -> LossRule {
    if p <= 0.0 {
        LossRule::Zero
    } else if loss_samples_needed(p, tolerance) <= n as f64 {
        LossRule::WithinTolerance
    } else {
        LossRule::ConfidenceInterval
    }
}

fn judge(configured: f64, expected: f64, count: u64, n: u64, tolerance: f64) -> FractionCheck {
    let rule = rule_for(expected, n, tolerance);
    let measured = if n > 0 { count as f64 / n as f64 } else { 0.0 };
    let (ci_low, ci_high) = wilson_interval(count, n, Z999);
    let pass = n > 0
        && match rule {
            LossRule::Zero => count == 0,
            LossRule::WithinTolerance => (measured - expected).abs() <= tolerance * expected,
            LossRule::ConfidenceInterval => ci_low <= expected && expected <= ci_high,
        };
    FractionCheck {
        configured,
        expected,
        count,
        measured,
        ci_low,
        ci_high,
        rel_error: if expected > 0.0 {
            (measured - expected) / expected
        } else {
            0.0
        },
        rule,
        pass,
    }
}

impl Path {
    /// Run the phase with the reordering and duplication now in force (the caller
    /// turns the loss filter off).
    pub(super) fn measure_reorder(&self, opts: &SelfTestOptions) -> Result<ReorderCheck> {
        let c = self.config().clone();
        let ((p_r, extra), p_d) = (self.reorder(), self.duplicate());
        let rcv = bind_in(self, Node::Receiver)?;
        let snd = bind_in(self, Node::Sender)?;
        connect_pair(&snd, &rcv)?;
        let pkt_bits = ((SEQ_PAYLOAD as u64 + UDP_IP_OVERHEAD) * 8) as f64;
        let pps = (0.8 * c.rate_bps as f64 / pkt_bits).min(LOSS_MAX_PPS);
        let spacing = Duration::from_secs_f64(1.0 / pps);
        let expected_r = expected_reordered(p_r, extra, spacing);
        let budget_n = (pps * opts.reorder_budget.as_secs_f64()) as u64;
        // 1.5× the sample that resolves the tolerance at 99.9 % for the rarer of the
        // two, within budget; at least 10,000 (or 1 s) to show a zero is a zero.
        let needed = [expected_r, p_d]
            .into_iter()
            .filter(|&p| p > 0.0)
            .map(|p| 1.5 * loss_samples_needed(p, opts.tolerance))
            .fold(0.0, f64::max);
        let n = (needed.min(budget_n as f64) as u64).max((pps as u64).max(10_000));
        let before = self.stats()?;
        let buf_before = rcvbuf_errors(self)?;
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = Arc::clone(&stop);
        let receiver = std::thread::spawn(move || receive_seqs(rcv, stop2));
        let mut payload = [0u8; SEQ_PAYLOAD];
        let sent = paced_send(&snd, &mut payload, pps, Some(n), None);
        std::thread::sleep(self.drain_time() + extra);
        stop.store(true, Ordering::Relaxed);
        let arrivals = receiver
            .join()
            .map_err(|_| NetemError::Thread("receiver".into()))?;
        let after = self.stats()?;
        let rcvbuf = rcvbuf_errors(self)?.saturating_sub(buf_before);
        let counts = classify(&arrivals, n);
        let tol = opts.tolerance;
        let reordered = judge(p_r, expected_r, counts.late, counts.distinct, tol);
        let duplicated = judge(p_d, p_d, counts.copies, counts.distinct, tol);
        let (fb, fa) = (&before.delay_box.forward, &after.delay_box.forward);
        Ok(ReorderCheck {
            reorder_delay_ms: extra.as_secs_f64() * 1e3,
            sent,
            received: counts.distinct,
            rcvbuf_errors: rcvbuf,
            bottleneck_drops: after
                .bottleneck
                .dropped
                .saturating_sub(before.bottleneck.dropped),
            held_back: fa.reordered.saturating_sub(fb.reordered),
            copies_written: fa.duplicated.saturating_sub(fb.duplicated),
            pps,
            pass: reordered.pass && duplicated.pass,
            reordered,
            duplicated,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classification() {
        // 0 1 3 2 2 4 1 9: 2 arrives after 3 (late), its copy and 1's copy are copies.
        let c = classify(&[0, 1, 3, 2, 2, 4, 1, 9], 5);
        assert_eq!(
            c,
            SeqCounts {
                distinct: 5,
                late: 1,
                copies: 2,
                stray: 1
            }
        );
        // Two held packets in a row are both late.
        assert_eq!(classify(&[0, 3, 4, 1, 2], 5).late, 2);
        assert_eq!(classify(&[], 0), SeqCounts::default());
    }

    #[test]
    fn expected_reordered_fraction() {
        let ms = Duration::from_millis;
        assert_eq!(
            expected_reordered(0.05, ms(5), Duration::from_micros(36)),
            0.05
        );
        // Spacing longer than the extra delay: nothing can overtake.
        assert_eq!(expected_reordered(0.05, ms(1), ms(2)), 0.0);
        // One datagram fits: late unless it is held back too.
        let e = expected_reordered(0.5, ms(2), Duration::from_micros(1500));
        assert!((e - 0.25).abs() < 1e-12, "{e}");
        assert_eq!(expected_reordered(0.0, ms(5), ms(1)), 0.0);
    }

    #[test]
    fn judging() {
        let ok = judge(0.05, 0.05, 5_100, 100_000, 0.05);
        assert_eq!(ok.rule, LossRule::WithinTolerance);
        assert!(ok.pass);
        assert!(!judge(0.05, 0.05, 6_000, 100_000, 0.05).pass);
        let small = judge(0.02, 0.02, 25, 1_000, 0.05);
        assert_eq!(small.rule, LossRule::ConfidenceInterval);
        assert!(small.pass);
        let zero = judge(0.0, 0.0, 1, 1_000, 0.05);
        assert_eq!(zero.rule, LossRule::Zero);
        assert!(!zero.pass);
        assert!(!judge(0.0, 0.0, 0, 0, 0.05).pass);
    }
}
