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
    /// When the earliest transmission this ACK covers (fully or in part)
    /// was sent; `None` if it covers none, i.e. only bytes sent before the
    /// last timeout and not since.
    pub eldest: Option<Instant>,
}

/// Transmissions since the last timeout, oldest first.
///
/// Original transmissions are appended in sequence order, so while no
/// retransmission is held the deque is sorted by `start` and an ACK only
/// touches its front: O(segments acknowledged), not O(flight). With a
/// retransmission held (loss recovery; rare and short) an ACK scans all.
#[derive(Clone, Debug, Default)]
pub(crate) struct Ledger {
    sent: VecDeque<Transmission>,
    /// Retransmissions in `sent`.
    rexmits: usize,
}

impl Ledger {
    /// Record a transmission.
    pub(crate) fn on_send(&mut self, start: u64, end: u64, now: Instant, rexmit: bool) {
        if end > start {
            self.rexmits += usize::from(rexmit);
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
        if self.rexmits == 0 {
            self.on_ack_in_order(now, ack)
        } else {
            self.on_ack_scan(now, ack)
        }
    }

    /// [`Ledger::on_ack`] by a scan of every held transmission.
    fn on_ack_scan(&mut self, now: Instant, ack: u64) -> Resolved {
        let mut covered = 0;
        let mut ambiguous = false;
        let mut newest: Option<Instant> = None;
        let mut eldest: Option<Instant> = None;
        let mut rexmits = 0;
        self.sent.retain_mut(|t| {
            if t.start >= ack {
                rexmits += usize::from(t.rexmit);
                return true;
            }
            let upto = t.end.min(ack);
            covered += upto - t.start;
            eldest = Some(eldest.map_or(t.sent_at, |e| e.min(t.sent_at)));
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
                rexmits += usize::from(t.rexmit);
                true
            }
        });
        self.rexmits = rexmits;
        let sample = newest
            .filter(|_| !ambiguous)
            .map(|t| now - t)
            .filter(|d| !d.is_zero());
        Resolved {
            covered,
            sample,
            eldest,
        }
    }

    /// [`Ledger::on_ack`] when every held transmission is an original, so
    /// the deque is sorted by sequence number and send time: the fully
    /// acknowledged ones are at the front, the newest of them last.
    fn on_ack_in_order(&mut self, now: Instant, ack: u64) -> Resolved {
        let mut covered = 0;
        let mut newest = None;
        let mut eldest = None;
        while let Some(t) = self.sent.front_mut() {
            if t.start >= ack {
                break;
            }
            covered += t.end.min(ack) - t.start;
            eldest = eldest.or(Some(t.sent_at));
            if t.end > ack {
                t.start = ack;
                break;
            }
            newest = Some(t.sent_at);
            self.sent.pop_front();
        }
        let sample = newest.map(|t| now - t).filter(|d| !d.is_zero());
        Resolved {
            covered,
            sample,
            eldest,
        }
    }

    /// Forget everything (after a timeout every earlier transmission is
    /// resolved as lost, and acknowledgments of it are ambiguous).
    pub(crate) fn clear(&mut self) {
        self.sent.clear();
        self.rexmits = 0;
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

    proptest::proptest! {
        /// The in-order fast path resolves every ACK exactly as a scan of
        /// all held transmissions does.
        #[test]
        fn fast_path_matches_the_scan(ops in proptest::collection::vec((0u8..10, 1u64..4000, 0u64..100), 1..300)) {
            let (mut fast, mut scan) = (Ledger::default(), Ledger::default());
            let (mut una, mut max, mut now) = (1u64, 1u64, 0u64);
            for (kind, n, dt) in ops {
                now += dt;
                match kind {
                    // New data.
                    0..=4 => {
                        fast.on_send(max, max + n, t(now), false);
                        scan.on_send(max, max + n, t(now), false);
                        max += n;
                    }
                    // A retransmission somewhere in flight.
                    5 => {
                        if max > una {
                            let s = una + n % (max - una);
                            let e = (s + 1 + n).min(max);
                            fast.on_send(s, e, t(now), true);
                            scan.on_send(s, e, t(now), true);
                        }
                    }
                    // A timeout.
                    6 => {
                        fast.clear();
                        scan.clear();
                    }
                    // A cumulative ACK.
                    _ => {
                        una = (una + n).min(max);
                        proptest::prop_assert_eq!(fast.on_ack(t(now), una), scan.on_ack_scan(t(now), una));
                    }
                }
            }
        }
    }
}
