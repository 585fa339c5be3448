//! The user-space bottleneck of `cm demo --loopback`: serialisation at a
//! fixed rate behind a DropTail queue of bounded bytes, then a fixed
//! one-way delay, in front of each receiver. Time is passed in
//! (microseconds), so the same logic is testable without a clock.

use std::collections::VecDeque;

/// An emulated bottleneck link and the packets travelling on it.
#[derive(Debug)]
pub struct Bottleneck<T> {
    rate_bytes_per_sec: u64,
    queue_bytes: u64,
    delay_us: u64,
    /// When the last accepted packet finishes serialisation.
    busy_until_us: u64,
    in_transit: VecDeque<(u64, T)>,
    pub dropped: u64,
}

impl<T> Bottleneck<T> {
    /// A link of `rate` bytes/s, a queue of `queue_bytes`, `delay_us` one way.
    pub fn new(rate_bytes_per_sec: u64, queue_bytes: u64, delay_us: u64) -> Self {
        Bottleneck {
            rate_bytes_per_sec: rate_bytes_per_sec.max(1),
            queue_bytes,
            delay_us,
            busy_until_us: 0,
            in_transit: VecDeque::new(),
            dropped: 0,
        }
    }

    /// Offer a packet of `len` bytes at `now_us`; `false` if the queue is full.
    pub fn offer(&mut self, now_us: u64, len: u64, item: T) -> bool {
        let start = self.busy_until_us.max(now_us);
        // Bytes still waiting to be serialised ahead of this packet.
        let backlog = (start - now_us) * self.rate_bytes_per_sec / 1_000_000;
        if backlog + len > self.queue_bytes.max(len) {
            self.dropped += 1;
            return false;
        }
        let tx_us = (len * 1_000_000).div_ceil(self.rate_bytes_per_sec);
        self.busy_until_us = start + tx_us;
        self.in_transit
            .push_back((self.busy_until_us + self.delay_us, item));
        true
    }

    /// When the next packet arrives at the far end.
    pub fn next_arrival(&self) -> Option<u64> {
        self.in_transit.front().map(|&(t, _)| t)
    }

    /// The next packet that has arrived by `now_us`.
    pub fn poll_arrival(&mut self, now_us: u64) -> Option<T> {
        if self.next_arrival()? <= now_us {
            return self.in_transit.pop_front().map(|(_, x)| x);
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serialises_delays_and_drops_the_excess() {
        // 1000 B/s, 2000 B queue, 50 ms delay.
        let mut l = Bottleneck::new(1000, 2000, 50_000);
        assert!(l.offer(0, 1000, 'a'));
        assert!(l.offer(0, 1000, 'b'));
        assert!(
            !l.offer(0, 1000, 'c'),
            "2000 B queued: the third is dropped"
        );
        assert_eq!(l.dropped, 1);
        assert_eq!(l.next_arrival(), Some(1_050_000));
        assert_eq!(l.poll_arrival(1_049_999), None);
        assert_eq!(l.poll_arrival(1_050_000), Some('a'));
        assert_eq!(l.next_arrival(), Some(2_050_000));
    }
}
