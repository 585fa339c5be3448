//! The small sender queue of a congestion-forcing proxy: a bound of MAXQ
//! packets and what happens to a packet that finds it full
//! (transport-selection-middleware §4.3.1: the "VoIP proxy" is a TFRC
//! agent whose `maxqueue_` holds the application's packets until the
//! congestion controller lets them go; the paper settles on MAXQ = 1 for
//! delay-critical traffic).
//!
//! An unresponsive application (a CBR voice source, `iperf3 -u`) offers
//! packets faster than the path allows. Blocking it would change its
//! timing, so the queue drops: either the oldest waiting packet
//! ([`Overflow::DropHead`], the default: what is sent next is the
//! freshest, the right thing for interactive media, cm-implementation-linux
//! §3.6's vat) or the arriving one ([`Overflow::DropTail`], a FIFO).
//! [`Overflow::Block`] refuses instead, for senders that can wait.

use std::collections::VecDeque;
use std::fmt;
use std::str::FromStr;

use cm_core::{Duration, Instant};

/// The MAXQ the paper settles on (§4.3.1, Fig 6).
pub const DEFAULT_MAXQ: usize = 1;

/// What a full queue does with one more packet.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Overflow {
    /// Drop the oldest waiting packet and queue the new one.
    #[default]
    DropHead,
    /// Drop the arriving packet.
    DropTail,
    /// Refuse the arriving packet; the caller keeps it (back-pressure).
    Block,
}

impl Overflow {
    /// The name [`FromStr`] takes: `head`, `tail` or `block`.
    pub fn name(self) -> &'static str {
        match self {
            Overflow::DropHead => "head",
            Overflow::DropTail => "tail",
            Overflow::Block => "block",
        }
    }
}

impl fmt::Display for Overflow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An unknown [`Overflow`] name.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown drop policy {0:?}: use head (drop-from-head), tail (drop-tail) or block")]
pub struct UnknownOverflow(pub String);

impl FromStr for Overflow {
    type Err = UnknownOverflow;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "head" | "drop-head" | "drop-from-head" => Ok(Overflow::DropHead),
            "tail" | "drop-tail" | "fifo" => Ok(Overflow::DropTail),
            "block" => Ok(Overflow::Block),
            _ => Err(UnknownOverflow(s.to_owned())),
        }
    }
}

/// What [`MaxQueue::push`] did.
#[derive(Debug, PartialEq, Eq)]
pub enum Admit<T> {
    /// Queued; nothing dropped.
    Queued,
    /// Queued, and the oldest packet was dropped to make room (returned).
    DroppedOldest(T),
    /// Not queued: dropped (drop-tail), returned.
    DroppedNew(T),
    /// Not queued: refused ([`Overflow::Block`]), returned to the caller.
    Refused(T),
}

/// Counters of a [`MaxQueue`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueueStats {
    /// Packets offered by the application.
    pub offered: u64,
    /// Packets taken out to be sent.
    pub sent: u64,
    /// Packets dropped at the queue (either end).
    pub dropped: u64,
    /// Packets refused ([`Overflow::Block`]).
    pub refused: u64,
    /// Sum of the sent packets' waits in the queue, µs.
    pub wait_us: u64,
    /// Longest wait, µs.
    pub max_wait_us: u64,
}

impl QueueStats {
    /// Mean wait of a sent packet in the queue.
    pub fn mean_wait(&self) -> Option<Duration> {
        (self.sent > 0).then(|| Duration::from_micros(self.wait_us / self.sent))
    }
}

/// A queue of at most `limit` packets with an [`Overflow`] policy.
#[derive(Clone, Debug)]
pub struct MaxQueue<T> {
    items: VecDeque<(T, Instant)>,
    limit: usize,
    policy: Overflow,
    stats: QueueStats,
}

impl<T> MaxQueue<T> {
    /// An empty queue of at most `limit` packets (at least 1).
    pub fn new(limit: usize, policy: Overflow) -> Self {
        MaxQueue {
            items: VecDeque::with_capacity(limit.clamp(1, 1024)),
            limit: limit.max(1),
            policy,
            stats: QueueStats::default(),
        }
    }

    /// Offer one packet at `now`.
    pub fn push(&mut self, now: Instant, item: T) -> Admit<T> {
        self.stats.offered += 1;
        if self.items.len() < self.limit {
            self.items.push_back((item, now));
            return Admit::Queued;
        }
        match self.policy {
            Overflow::DropHead => {
                self.stats.dropped += 1;
                let old = self.items.pop_front().map(|(t, _)| t);
                self.items.push_back((item, now));
                match old {
                    Some(old) => Admit::DroppedOldest(old),
                    None => Admit::Queued, // limit >= 1: the queue was full, not empty
                }
            }
            Overflow::DropTail => {
                self.stats.dropped += 1;
                Admit::DroppedNew(item)
            }
            Overflow::Block => {
                self.stats.refused += 1;
                Admit::Refused(item)
            }
        }
    }

    /// Take the oldest packet to send it at `now`, with its wait.
    pub fn pop(&mut self, now: Instant) -> Option<(T, Duration)> {
        let (item, at) = self.items.pop_front()?;
        let wait = now.saturating_since(at);
        self.stats.sent += 1;
        self.stats.wait_us += wait.as_micros();
        self.stats.max_wait_us = self.stats.max_wait_us.max(wait.as_micros());
        Some((item, wait))
    }

    /// The oldest packet, the one [`MaxQueue::pop`] takes next.
    pub fn front(&self) -> Option<&T> {
        self.items.front().map(|(item, _)| item)
    }

    /// Packets waiting.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// No packet waiting.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// The bound.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// The policy.
    pub fn policy(&self) -> Overflow {
        self.policy
    }

    /// The counters.
    pub fn stats(&self) -> QueueStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn t(ms: u64) -> Instant {
        Instant::from_micros(ms * 1000)
    }

    #[test]
    fn drop_head_keeps_the_freshest_and_counts() {
        let mut q = MaxQueue::new(2, Overflow::DropHead);
        assert_eq!(q.push(t(0), 1), Admit::Queued);
        assert_eq!(q.push(t(1), 2), Admit::Queued);
        assert_eq!(q.push(t(2), 3), Admit::DroppedOldest(1));
        assert_eq!(q.pop(t(5)), Some((2, Duration::from_micros(4000))));
        assert_eq!(q.pop(t(5)).map(|x| x.0), Some(3));
        assert_eq!(q.pop(t(5)), None);
        let s = q.stats();
        assert_eq!((s.offered, s.sent, s.dropped), (3, 2, 1));
        assert_eq!(s.mean_wait(), Some(Duration::from_micros(3500)));
        assert_eq!(s.max_wait_us, 4000);
    }

    #[test]
    fn drop_tail_and_block_return_the_new_packet() {
        let mut q = MaxQueue::new(1, Overflow::DropTail);
        q.push(t(0), 'a');
        assert_eq!(q.push(t(0), 'b'), Admit::DroppedNew('b'));
        assert_eq!(q.pop(t(0)).map(|x| x.0), Some('a'));
        let mut q = MaxQueue::new(0, Overflow::Block);
        assert_eq!(q.limit(), 1);
        q.push(t(0), 'a');
        assert_eq!(q.push(t(0), 'b'), Admit::Refused('b'));
        assert_eq!(q.stats().refused, 1);
        assert_eq!(q.stats().dropped, 0);
    }

    #[test]
    fn policy_names_round_trip_and_bad_names_say_what_works() {
        for p in [Overflow::DropHead, Overflow::DropTail, Overflow::Block] {
            assert_eq!(p.name().parse::<Overflow>().unwrap(), p);
        }
        let e = "sideways".parse::<Overflow>().unwrap_err().to_string();
        assert!(e.contains("head") && e.contains("tail"), "{e}");
    }
}
