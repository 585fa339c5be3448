//! Per-flow statistics keyed by [`FlowTag`](crate::FlowTag).

use std::collections::BTreeMap;

use cm_core::{Duration, Instant, Rate};

use crate::packet::LinkId;

/// Counters of one flow (all packets carrying one [`FlowTag`](crate::FlowTag)).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FlowStats {
    /// Packets handed to the engine by the sender.
    pub sent_packets: u64,
    /// Bytes handed to the engine by the sender.
    pub sent_bytes: u64,
    /// Packets delivered to the destination host (duplicate copies included).
    pub delivered_packets: u64,
    /// Bytes delivered to the destination host.
    pub delivered_bytes: u64,
    /// Packets dropped at a full queue.
    pub dropped_overflow: u64,
    /// Packets lost at random on a link.
    pub dropped_random: u64,
    /// Copies made by duplicating links (each copy is one more packet in
    /// the network, so once it is idle `sent_packets + duplicated ==
    /// delivered_packets + dropped()`).
    pub duplicated: u64,
    /// Drops per link (overflow + random).
    pub dropped_at: BTreeMap<LinkId, u64>,
    /// Sum of one-way delays (`deliver - sent_at`) of delivered packets, µs.
    pub delay_sum_us: u128,
    /// First send time.
    pub first_sent: Option<Instant>,
    /// Last delivery time.
    pub last_delivered: Option<Instant>,
}

impl FlowStats {
    /// Total packets dropped anywhere.
    pub fn dropped(&self) -> u64 {
        self.dropped_overflow + self.dropped_random
    }

    /// Dropped / sent packets, the loss rate of sigcomm1999 Fig 6.
    pub fn loss_rate(&self) -> f64 {
        if self.sent_packets == 0 {
            0.0
        } else {
            self.dropped() as f64 / self.sent_packets as f64
        }
    }

    /// Delivered bytes per `interval` (goodput at the network level).
    pub fn goodput(&self, interval: Duration) -> Option<Rate> {
        Rate::per(cm_core::Bytes(self.delivered_bytes), interval)
    }

    /// Mean one-way delay of delivered packets.
    pub fn mean_delay(&self) -> Option<Duration> {
        let n = u128::from(self.delivered_packets);
        (n > 0).then(|| {
            Duration::from_micros(u64::try_from(self.delay_sum_us / n).unwrap_or(u64::MAX))
        })
    }
}
