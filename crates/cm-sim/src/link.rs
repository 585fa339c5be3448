//! Unidirectional links: configuration, DropTail queue state and statistics.
//!
//! A link serializes one packet at a time at `bandwidth_bps`
//! (`wire_len * 8 / bandwidth`, rounded up to whole microseconds), then the
//! packet propagates for `delay`. Waiting packets sit in a DropTail FIFO whose
//! limit counts only packets *waiting*, not the one being serialized (as in
//! ns-2's DropTail). Random loss is applied on departure: a lost packet still
//! occupies the link for its serialization time and is counted as sent, then
//! vanishes instead of propagating (a corrupted frame).
//! Reordering and duplication are drawn on departure too: see [`LinkConfig`].

use std::collections::VecDeque;

use cm_core::{Duration, Instant};

use crate::packet::{NodeId, Packet, Payload};

/// Limit of a link's DropTail queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QueueLimit {
    /// At most this many waiting packets.
    Packets(u32),
    /// At most this many waiting bytes.
    Bytes(u64),
    /// Never drop on overflow.
    Unlimited,
}

/// Parameters of one unidirectional link.
///
/// # Reordering and duplication
///
/// Like random loss, both are drawn when a packet has been serialized, for
/// packets that were not lost, in the manner of Linux netem's `reorder` and
/// `duplicate`: a per-packet Bernoulli choice from the simulation's seeded
/// RNG.
///
/// - **Reordering**: with probability `reorder` the departing packet is held
///   back: it propagates for `delay + reorder_delay` instead of `delay`, so
///   packets that depart within `reorder_delay` after it overtake it. Held
///   packets keep their order among themselves (the extra delay is
///   constant). Whether a held packet actually arrives out of order depends
///   on the traffic behind it: it is overtaken only if another packet leaves
///   the link less than `reorder_delay` later. (netem holds back the packets
///   it does *not* choose; here the chosen one gets the extra delay, so
///   `reorder` is the fraction of late packets.)
/// - **Duplication**: with probability `duplicate` the packet is delivered
///   twice: an identical copy (same packet id) follows the original on the
///   wire and arrives right after it, at the same time. The copy does not
///   occupy the link (it is made after serialization); a held packet's copy
///   is held with it. Downstream links treat the copy as any other packet.
///
/// The RNG is drawn only for a non-zero probability, in the order loss,
/// reorder, duplicate, so links without these features leave the random
/// stream, and every run that does not use them, exactly as before.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LinkConfig {
    /// Transmission rate in bits per second (must be non-zero).
    pub bandwidth_bps: u64,
    /// One-way propagation delay.
    pub delay: Duration,
    /// DropTail queue limit.
    pub queue: QueueLimit,
    /// Bernoulli loss probability per packet, applied on departure.
    pub loss: f64,
    /// Probability that a departing (not lost) packet is held back by
    /// [`reorder_delay`](Self::reorder_delay) so later packets overtake it
    /// (netem-like, but the chosen packet is the late one).
    pub reorder: f64,
    /// Extra propagation delay of a held-back packet, on top of `delay`.
    pub reorder_delay: Duration,
    /// Probability that a departing (not lost) packet is delivered twice,
    /// the copy right after the original.
    pub duplicate: f64,
}

impl LinkConfig {
    /// A loss-free link with the given rate, delay and queue.
    pub const fn new(bandwidth_bps: u64, delay: Duration, queue: QueueLimit) -> Self {
        LinkConfig {
            bandwidth_bps,
            delay,
            queue,
            loss: 0.0,
            reorder: 0.0,
            reorder_delay: Duration::ZERO,
            duplicate: 0.0,
        }
    }

    /// The same link with random loss probability `p`.
    pub const fn with_loss(mut self, p: f64) -> Self {
        self.loss = p;
        self
    }

    /// The same link holding back each departing packet with probability
    /// `p` for `extra_delay` beyond its propagation delay (reordering).
    pub const fn with_reorder(mut self, p: f64, extra_delay: Duration) -> Self {
        self.reorder = p;
        self.reorder_delay = extra_delay;
        self
    }

    /// The same link delivering each departing packet twice with
    /// probability `p` (duplication).
    pub const fn with_duplicate(mut self, p: f64) -> Self {
        self.duplicate = p;
        self
    }

    /// Serialization time of `bytes` on this link, rounded up to 1 µs.
    #[inline]
    pub fn serialization(&self, bytes: u32) -> Duration {
        let bits = u128::from(bytes) * 8 * 1_000_000;
        let us = bits.div_ceil(u128::from(self.bandwidth_bps.max(1)));
        Duration::from_micros(u64::try_from(us).unwrap_or(u64::MAX))
    }
}

/// Counters of one link.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LinkStats {
    /// Packets accepted into the link (queued or sent straight away).
    pub enqueued: u64,
    /// Packets whose serialization finished (including randomly lost ones).
    pub sent_packets: u64,
    /// Bytes whose serialization finished.
    pub sent_bytes: u64,
    /// Packets dropped because the queue was full.
    pub dropped_overflow: u64,
    /// Bytes dropped because the queue was full.
    pub dropped_overflow_bytes: u64,
    /// Packets lost at random on departure.
    pub dropped_random: u64,
    /// Packets held back by `reorder_delay` on departure (each is overtaken
    /// by any packet departing within `reorder_delay` after it).
    pub reordered: u64,
    /// Extra copies made on departure (duplication); each copy is one more
    /// packet put on the wire.
    pub duplicated: u64,
    /// Largest number of waiting packets seen.
    pub max_queue_packets: u64,
    /// Largest number of waiting bytes seen.
    pub max_queue_bytes: u64,
    /// Integral of waiting packets over time (packet·µs).
    pub queue_packet_us: u128,
    /// Integral of waiting bytes over time (byte·µs).
    pub queue_byte_us: u128,
    /// Time up to which the integrals are accumulated (from time zero).
    pub observed_until: Instant,
    /// Total microseconds of serialization, counted when each one starts
    /// (so mid-transmission it includes the remainder of the current packet).
    pub busy_us: u64,
}

impl LinkStats {
    /// Time-averaged number of waiting packets since time zero.
    pub fn mean_queue_packets(&self) -> f64 {
        match self.observed_until.as_micros() {
            0 => 0.0,
            t => self.queue_packet_us as f64 / t as f64,
        }
    }

    /// Time-averaged number of waiting bytes since time zero.
    pub fn mean_queue_bytes(&self) -> f64 {
        match self.observed_until.as_micros() {
            0 => 0.0,
            t => self.queue_byte_us as f64 / t as f64,
        }
    }

    /// Fraction of time spent serializing, since time zero.
    pub fn utilization(&self) -> f64 {
        match self.observed_until.as_micros() {
            0 => 0.0,
            t => self.busy_us as f64 / t as f64,
        }
    }
}

/// Runtime state of one link (engine-internal).
#[derive(Debug)]
pub(crate) struct LinkState<P> {
    pub(crate) from: NodeId,
    pub(crate) to: NodeId,
    pub(crate) cfg: LinkConfig,
    /// Waiting packets (DropTail FIFO).
    pub(crate) queue: VecDeque<Packet<P>>,
    pub(crate) queue_bytes: u64,
    /// The packet being serialized.
    pub(crate) tx: Option<Packet<P>>,
    /// Packets propagating; they arrive in FIFO order because serialization
    /// is sequential and the delay is constant.
    pub(crate) wire: VecDeque<Packet<P>>,
    /// Held-back packets propagating for `delay + reorder_delay`; FIFO for
    /// the same reason as `wire`.
    pub(crate) held: VecDeque<Packet<P>>,
    pub(crate) stats: LinkStats,
}

impl<P: Payload> LinkState<P> {
    pub(crate) fn new(from: NodeId, to: NodeId, cfg: LinkConfig) -> Self {
        LinkState {
            from,
            to,
            cfg,
            queue: VecDeque::new(),
            queue_bytes: 0,
            tx: None,
            wire: VecDeque::new(),
            held: VecDeque::new(),
            stats: LinkStats::default(),
        }
    }

    /// Accumulates the queue-length integrals up to `now`; call before any
    /// change of the queue.
    #[inline]
    pub(crate) fn account(&mut self, now: Instant) {
        let dt = now.saturating_since(self.stats.observed_until).as_micros();
        if dt > 0 {
            let dt = u128::from(dt);
            self.stats.queue_packet_us += self.queue.len() as u128 * dt;
            self.stats.queue_byte_us += u128::from(self.queue_bytes) * dt;
            self.stats.observed_until = now;
        }
    }

    /// Whether a packet of `len` bytes fits in the waiting queue.
    #[inline]
    pub(crate) fn fits(&self, len: u32) -> bool {
        match self.cfg.queue {
            QueueLimit::Packets(n) => self.queue.len() < n as usize,
            QueueLimit::Bytes(b) => self.queue_bytes + u64::from(len) <= b,
            QueueLimit::Unlimited => true,
        }
    }

    /// Appends to the waiting queue (caller checked `fits` and `account`).
    #[inline]
    pub(crate) fn push(&mut self, pkt: Packet<P>) {
        self.queue_bytes += u64::from(pkt.wire_len());
        self.queue.push_back(pkt);
        let s = &mut self.stats;
        s.max_queue_packets = s.max_queue_packets.max(self.queue.len() as u64);
        s.max_queue_bytes = s.max_queue_bytes.max(self.queue_bytes);
    }

    /// Removes the head of the waiting queue (caller called `account`).
    #[inline]
    pub(crate) fn pop(&mut self) -> Option<Packet<P>> {
        let p = self.queue.pop_front()?;
        self.queue_bytes -= u64::from(p.wire_len());
        Some(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serialization_rounds_up_to_whole_microseconds() {
        let l = LinkConfig::new(1_000_000, Duration::ZERO, QueueLimit::Unlimited);
        assert_eq!(l.serialization(1000), Duration::from_micros(8000));
        let l = LinkConfig::new(300_000, Duration::ZERO, QueueLimit::Unlimited);
        // 8000 bits / 300 kbit/s = 26666.67 µs
        assert_eq!(l.serialization(1000), Duration::from_micros(26667));
    }
}
