//! Loss events and the loss interval history, kept at the sender
//! (RFC 5348 §5.2–§5.4, §6.3.1).
//!
//! RFC 5348 §5 describes the receiver's computation from sequence numbers.
//! The Congestion Manager sees feedback only as reports of bytes received
//! and bytes lost, so this is the sender-side equivalent (RFC 5348 §3.2.1
//! lets the sender compute the loss event rate): intervals are counted in
//! packets of the macroflow's MTU (bytes resolved by feedback, received or
//! lost, divided by the MTU), and a loss belongs to the current loss event
//! when it is *reported* within one RTT of the report that started the
//! event (§5.2 compares the lost packets' send times, which the CM does not
//! see; report times are the same times shifted by about one RTT).

use std::collections::VecDeque;

use crate::time::{Duration, Instant};
use crate::units::Bytes;

/// The longest history kept, whatever the configuration asks: bounds the
/// memory and the cost of one average.
pub(crate) const MAX_HISTORY: usize = 1024;

/// The loss history: closed intervals and the open one.
#[derive(Clone, Debug)]
pub(crate) struct LossHistory {
    /// `n`, the closed intervals averaged (RFC 5348 §5.4: n = 8).
    n: usize,
    /// Closed loss intervals I_1..I_k in packets, most recent first.
    closed: VecDeque<f64>,
    /// When the current loss event started (its first loss was reported);
    /// `None` before the first loss.
    event_start: Option<Instant>,
    /// I_0, the open interval, in bytes: everything resolved (received or
    /// lost) since the current loss event started, its losses included.
    open: u64,
}

impl LossHistory {
    /// An empty history averaging `n` intervals (at least 1, at most
    /// [`MAX_HISTORY`]).
    pub(crate) fn new(n: usize) -> Self {
        let n = n.clamp(1, MAX_HISTORY);
        LossHistory {
            n,
            closed: VecDeque::with_capacity(n),
            event_start: None,
            open: 0,
        }
    }

    /// Whether a loss event has been seen (the history is initialised).
    pub(crate) fn has_loss(&self) -> bool {
        self.event_start.is_some()
    }

    /// Bytes reported received: they extend the open interval.
    pub(crate) fn on_received(&mut self, bytes: Bytes) {
        if self.has_loss() {
            self.open = self.open.saturating_add(bytes.0);
        }
    }

    /// Bytes reported lost at `now` (`lost` may be zero, for an ECN mark).
    /// RFC 5348 §5.2: a loss within one `rtt` of the start of the current
    /// loss event belongs to it; a later one starts a new event, which
    /// closes the open interval. The first loss event seeds the history
    /// with `synthetic` packets, the interval RFC 5348 §6.3.1 derives from
    /// the receive rate (see [`equation::loss_rate_for`]). Returns whether
    /// a new loss event started.
    ///
    /// [`equation::loss_rate_for`]: super::equation::loss_rate_for
    pub(crate) fn on_loss(
        &mut self,
        now: Instant,
        lost: Bytes,
        rtt: Duration,
        mtu: Bytes,
        synthetic: impl FnOnce() -> f64,
    ) -> bool {
        match self.event_start {
            Some(start) if now < start.saturating_add(rtt) => {
                self.open = self.open.saturating_add(lost.0);
                return false;
            }
            Some(_) => {
                let closed = packets(self.open, mtu);
                self.push(closed);
            }
            None => {
                let seed = synthetic();
                self.push(if seed.is_finite() { seed.max(1.0) } else { 1.0 });
            }
        }
        self.event_start = Some(now);
        self.open = lost.0;
        true
    }

    fn push(&mut self, interval: f64) {
        self.closed.push_front(interval);
        self.closed.truncate(self.n);
    }

    /// The average loss interval in packets (RFC 5348 §5.4), `None` before
    /// the first loss event. With fewer than `n` closed intervals, the
    /// average runs over the `k` there are, with the weights w_1..w_k.
    pub(crate) fn mean_interval(&self, mtu: Bytes) -> Option<f64> {
        if !self.has_loss() || self.closed.is_empty() {
            return None;
        }
        let open = packets(self.open, mtu);
        Some(weighted_mean(open, self.closed.iter().copied(), self.n))
    }

    /// The loss event rate p = 1 / mean interval (RFC 5348 §5.4), in (0, 1].
    pub(crate) fn loss_event_rate(&self, mtu: Bytes) -> Option<f64> {
        let mean = self.mean_interval(mtu)?;
        Some((1.0 / mean.max(1.0)).clamp(f64::MIN_POSITIVE, 1.0))
    }
}

/// `bytes` as packets of `mtu` bytes, at least one (an interval holds at
/// least the loss that starts it).
fn packets(bytes: u64, mtu: Bytes) -> f64 {
    (bytes as f64 / mtu.0.max(1) as f64).max(1.0)
}

/// Weight `w_i` (1-based `i`) of the average over `n` intervals,
/// RFC 5348 §5.4: 1 for `i <= n/2`, then `1 - (i - n/2) / (n/2 + 1)`;
/// for n = 8: 1, 1, 1, 1, 0.8, 0.6, 0.4, 0.2.
pub(crate) fn weight(i: usize, n: usize) -> f64 {
    let half = n as f64 / 2.0;
    let i = i as f64;
    if i <= half {
        1.0
    } else {
        1.0 - (i - half) / (half + 1.0)
    }
}

/// RFC 5348 §5.4's average of the open interval `open` (I_0) and the
/// closed intervals `closed` (I_1, I_2, ..., most recent first), over the
/// `k = min(len, n)` most recent closed ones:
///
/// ```text
/// I_tot0 = sum_{i=0}^{k-1} I_i * w_{i+1}     (with the open interval)
/// I_tot1 = sum_{i=1}^{k}   I_i * w_i         (without it)
/// I_mean = max(I_tot0, I_tot1) / sum_{i=1}^{k} w_i
/// ```
///
/// so the open interval counts only when it raises the average.
pub(crate) fn weighted_mean(open: f64, closed: impl Iterator<Item = f64>, n: usize) -> f64 {
    let (mut tot0, mut tot1, mut w_tot) = (0.0, 0.0, 0.0);
    let mut prev = open;
    for (idx, interval) in closed.take(n).enumerate() {
        let w = weight(idx + 1, n);
        tot0 += prev * w;
        tot1 += interval * w;
        w_tot += w;
        prev = interval;
    }
    if w_tot.is_nan() || w_tot <= 0.0 {
        return open.max(1.0);
    }
    let mean = f64::max(tot0, tot1) / w_tot;
    if mean.is_nan() {
        1.0
    } else {
        mean.clamp(1.0, f64::MAX)
    }
}
