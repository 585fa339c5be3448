//! What the sender has transmitted and not yet seen acknowledged: the
//! basis of Karn's algorithm and of TCP/CM's byte accounting.

use std::collections::VecDeque;

use cm_core::{Duration, Instant};

/// One transmission of the byte range `[start, end)`.
#[derive(Clone, Copy, Debug)]
struct Transmission {
    start: u64,
    end: u64,
    sent_at: Instant,
    rexmit: bool,
}

/// What a cumulative ACK resolved.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Resolved {
    /// Transmitted bytes now acknowledged, counting each transmission of a
    /// byte (an original and its retransmission both count).
    pub covered: u64,
    /// RTT sample per Karn's algorithm: only if no retransmitted byte is
    /// acknowledged (the ACK is then unambiguous), timed from the newest
    /// fully acknowledged transmission.
    pub sample: Option<Duration>,
}

/// Transmissions since the last timeout, oldest first.
#[derive(Clone, Debug, Default)]
pub(crate) struct Ledger {
    sent: VecDeque<Transmission>,
}

impl Ledger {
    /// Record a transmission.
    pub(crate) fn on_send(&mut self, start: u64, end: u64, now: Instant, rexmit: bool) {
        if end > start {
            self.sent.push_back(Transmission {
                start,
                end,
                sent_at: now,
                rexmit,
            });
        }
    }

    /// Everything below `ack` is acknowledged.
    pub(crate) fn on_ack(&mut self, now: Instant, ack: u64) -> Resolved {
        let mut covered = 0;
        let mut ambiguous = false;
        let mut newest: Option<Instant> = None;
        self.sent.retain_mut(|t| {
            if t.start >= ack {
                return true;
            }
            let upto = t.end.min(ack);
            covered += upto - t.start;
            // Karn's algorithm (RFC 6298 §3): an ACK covering a
            // retransmitted byte gives no sample.
            ambiguous |= t.rexmit;
            if t.end <= ack {
                if !t.rexmit {
                    newest = Some(newest.map_or(t.sent_at, |n| n.max(t.sent_at)));
                }
                false
            } else {
                t.start = ack;
                true
            }
        });
        let sample = newest
            .filter(|_| !ambiguous)
            .map(|t| now - t)
            .filter(|d| !d.is_zero());
        Resolved { covered, sample }
    }

    /// Forget everything (after a timeout every earlier transmission is
    /// resolved as lost, and acknowledgments of it are ambiguous).
    pub(crate) fn clear(&mut self) {
        self.sent.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(us: u64) -> Instant {
        Instant::from_micros(us)
    }

    #[test]
    fn karn_no_sample_when_a_retransmission_is_acked() {
        let mut l = Ledger::default();
        l.on_send(1, 11, t(0), false);
        l.on_send(11, 21, t(5), false);
        l.on_send(1, 11, t(50), true);
        let r = l.on_ack(t(100), 21);
        assert_eq!(r.covered, 30);
        assert_eq!(r.sample, None);
    }

    #[test]
    fn sample_from_newest_fully_acked_original() {
        let mut l = Ledger::default();
        l.on_send(1, 11, t(0), false);
        l.on_send(11, 21, t(10), false);
        l.on_send(21, 31, t(20), false);
        let r = l.on_ack(t(100), 25);
        assert_eq!(r.covered, 24);
        assert_eq!(r.sample, Some(Duration::from_micros(90)));
        let r = l.on_ack(t(130), 31);
        assert_eq!(r.covered, 6);
        assert_eq!(r.sample, Some(Duration::from_micros(110)));
    }
}
