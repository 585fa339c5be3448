//! Sender side of packet-bunch estimation: packets go out in numbered
//! bursts of a configured length (iscc §VI-B: "the server sent its packets
//! in bursts of a pre-defined length").
//!
//! # Sending bursts through the CM
//!
//! At the start of a burst ([`BurstSchedule::starts_burst`]) the sender
//! asks for the whole burst at once,
//! [`request_mtus(now, flow, remaining)`](crate::CongestionManager::request_mtus)
//! with [`BurstSchedule::remaining`], and collects the grants until they
//! cover the burst (the shaper may release them in pieces; a grant stays
//! valid for `max(srtt, grant_timeout)`). It then sends the burst's packets
//! back to back, tagging each with [`BurstSchedule::next_packet`] and
//! notifying each send as usual. The shaper's long-run rate is unchanged:
//! a burst of `n` packets is followed by the time the shaper takes to grant
//! the next `n`, which for a sender pacing itself is
//! [`BurstSchedule::burst_interval`].
//!
//! When the burst cannot go out back to back (a grant expired, or the
//! application ran out of data mid-burst), the sender sends what it has and
//! calls [`BurstSchedule::cut`]: the next packet starts a new burst, so a
//! pause never sits inside a burst's dispersion (it would make a low
//! sample).

use crate::error::ConfigError;
use crate::time::Duration;
use crate::units::{Bytes, Rate};

/// The default burst length in packets: one more than the minimum bunch,
/// so a burst that loses one packet at an end still yields a sample.
pub const DEFAULT_BURST_LEN: u8 = 4;

/// The fewest packets a bunch needs to yield a sample (iscc §VI-B: "each
/// burst that contained at least three packets").
pub const MIN_BUNCH: u8 = 3;

/// The numbering a packet carries so the receiver can group its burst.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BurstTag {
    /// The burst's number (wrapping).
    pub burst: u32,
    /// The packet's position in its burst, from 0.
    pub index: u8,
    /// The burst's length in packets.
    pub len: u8,
}

/// Numbers outgoing packets into bursts of a fixed length.
#[derive(Clone, Debug)]
pub struct BurstSchedule {
    len: u8,
    burst: u32,
    /// The next packet's index in the current burst.
    index: u8,
}

impl Default for BurstSchedule {
    fn default() -> Self {
        BurstSchedule {
            len: DEFAULT_BURST_LEN,
            burst: 0,
            index: 0,
        }
    }
}

impl BurstSchedule {
    /// Bursts of `burst_len` packets; at least [`MIN_BUNCH`], or no burst
    /// could ever yield a sample.
    pub fn new(burst_len: u8) -> Result<Self, ConfigError> {
        if burst_len < MIN_BUNCH {
            return Err(ConfigError(format!(
                "burst_len must be >= {MIN_BUNCH} (got {burst_len})"
            )));
        }
        Ok(BurstSchedule {
            len: burst_len,
            ..Default::default()
        })
    }

    /// The configured burst length in packets.
    pub fn burst_len(&self) -> u8 {
        self.len
    }

    /// Whether the next packet starts a new burst: a paced sender waits
    /// here, then requests and sends the whole burst back to back.
    pub fn starts_burst(&self) -> bool {
        self.index == 0
    }

    /// Packets left in the current burst, the next one included.
    pub fn remaining(&self) -> u8 {
        self.len - self.index
    }

    /// The tag of the packet about to be sent; advances the schedule.
    pub fn next_packet(&mut self) -> BurstTag {
        let tag = BurstTag {
            burst: self.burst,
            index: self.index,
            len: self.len,
        };
        self.index += 1;
        if self.index == self.len {
            self.start_next();
        }
        tag
    }

    /// End the current burst early: the next packet starts a new one. Does
    /// nothing at a burst boundary.
    pub fn cut(&mut self) {
        if self.index != 0 {
            self.start_next();
        }
    }

    fn start_next(&mut self) {
        self.burst = self.burst.wrapping_add(1);
        self.index = 0;
    }

    /// How long one burst of `packet`-sized packets takes at the pacing
    /// `rate`: a paced sender sends a burst back to back, then waits this
    /// long from the burst's start before the next one, so its average
    /// rate stays `rate`. `None` at rate zero.
    pub fn burst_interval(&self, rate: Rate, packet: Bytes) -> Option<Duration> {
        rate.time_to_send(packet.saturating_mul(u64::from(self.len)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_packets_in_bursts_and_validates_length() {
        assert!(BurstSchedule::new(2).is_err());
        assert!(BurstSchedule::new(0).is_err());
        let mut s = BurstSchedule::new(3).unwrap();
        let tags: Vec<(u32, u8, u8)> = (0..7)
            .map(|_| {
                let t = s.next_packet();
                (t.burst, t.index, t.len)
            })
            .collect();
        assert_eq!(
            tags,
            [
                (0, 0, 3),
                (0, 1, 3),
                (0, 2, 3),
                (1, 0, 3),
                (1, 1, 3),
                (1, 2, 3),
                (2, 0, 3)
            ]
        );
        assert!(!s.starts_burst());
        assert_eq!(s.remaining(), 2);
    }

    #[test]
    fn default_is_four_and_cut_starts_a_new_burst() {
        let mut s = BurstSchedule::default();
        assert_eq!(s.burst_len(), DEFAULT_BURST_LEN);
        assert!(s.starts_burst());
        s.cut(); // at a boundary: nothing to cut
        assert_eq!(s.next_packet().burst, 0);
        s.cut();
        assert!(s.starts_burst());
        assert_eq!(s.remaining(), 4);
        let t = s.next_packet();
        assert_eq!((t.burst, t.index), (1, 0));
    }

    #[test]
    fn burst_ids_wrap() {
        let mut s = BurstSchedule {
            len: 3,
            burst: u32::MAX,
            index: 2,
        };
        assert_eq!(s.next_packet().burst, u32::MAX);
        assert_eq!(s.next_packet().burst, 0);
    }

    #[test]
    fn burst_interval_keeps_the_pacing_rate() {
        let s = BurstSchedule::default();
        let rate = Rate::from_bytes_per_sec(1_000_000);
        assert_eq!(
            s.burst_interval(rate, Bytes(1000)),
            Some(Duration::from_millis(4))
        );
        assert_eq!(s.burst_interval(Rate::ZERO, Bytes(1000)), None);
    }
}
