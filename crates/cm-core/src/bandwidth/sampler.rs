//! Receiver side of packet-bunch estimation: one bottleneck-rate sample
//! per burst (iscc §VI-B, after its refs. \[4\] and \[16\]).
//!
//! Packets a sender emits back to back leave the bottleneck link spaced by
//! their transmission time at its rate `C`. For a bunch of `n` packets that
//! arrive in order, the sample is the bytes of packets 2..n over the time
//! from the first packet's arrival to the last's (the bunch's dispersion):
//! the first packet's bytes are not counted, since its transmission ended
//! before the first arrival that starts the clock.
//!
//! Rules, so that every sample is a dispersion the bottleneck made:
//! - At least [`MIN_BUNCH`] packets of the same burst, in order (iscc §VI-B:
//!   "each burst that contained at least three packets").
//! - A lost packet ends the bunch: only the contiguous run from the first
//!   received packet counts (the gap's own spacing is unknown).
//! - A reordered or duplicated packet discards the whole burst: its
//!   packets did not cross the path as one bunch.
//! - A dispersion of zero (or a clock running backwards) gives no sample.
//!
//! The bytes are the IP-level wire lengths the caller passes (IP header
//! included, link-layer framing not), so the estimate is of the IP-level
//! rate of the bottleneck (iscc §VI-B: 1,510 kb/s of IP on a 1,544 kb/s T1).
//!
//! When a burst ends: as soon as all its packets arrived in order; else
//! when a packet of a later burst arrives, or at [`BunchSampler::flush`],
//! since until then a "lost" packet may still turn up reordered. A
//! duplicate arriving after an in-order burst was sampled cannot retract
//! the sample; the bunch it measured did arrive intact.

use crate::bandwidth::schedule::MIN_BUNCH;
use crate::time::Instant;
use crate::units::{Bytes, Rate};

/// The largest wire length accepted for one packet: the IPv4 total-length
/// limit (IPv6 jumbograms do not cross the links this estimates). With at
/// most 255 packets per burst and a dispersion of at least 1 µs, a sample
/// stays far below `u64::MAX` bytes/s.
pub const MAX_WIRE_LEN: Bytes = Bytes(65_535);

/// What a [`BunchSampler`] did with the bursts it saw.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BunchStats {
    /// Samples produced.
    pub samples: u64,
    /// Bursts ended with a run of fewer than [`MIN_BUNCH`] packets or a zero
    /// dispersion.
    pub short: u64,
    /// Bursts discarded for reordering, duplication or an inconsistent
    /// burst length.
    pub discarded: u64,
    /// Packets of an earlier burst arriving after a later one started.
    pub stale: u64,
    /// Packets with an index outside their burst, a burst length of zero,
    /// or a wire length of zero or above [`MAX_WIRE_LEN`].
    pub invalid: u64,
}

/// Where the burst being received stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Every packet so far arrived in order: the run is still growing.
    Run,
    /// A packet is missing: the run is over, later packets are tracked only
    /// to detect reordering.
    Gap,
    /// Sampled or discarded: its remaining packets are ignored.
    Closed,
}

/// The burst being received.
#[derive(Clone, Copy, Debug)]
struct Bunch {
    burst: u32,
    len: u8,
    first: Instant,
    /// Arrival of the run's last packet.
    last: Instant,
    /// Packets in the contiguous run from the first received one.
    run: u8,
    /// Wire bytes of the run's packets after the first.
    bytes: Bytes,
    /// The index expected next.
    next: u16,
    state: State,
}

/// Turns arriving burst-tagged packets into bottleneck-rate samples.
#[derive(Clone, Debug, Default)]
pub struct BunchSampler {
    cur: Option<Bunch>,
    stats: BunchStats,
}

impl BunchSampler {
    /// A sampler that has seen nothing.
    pub fn new() -> Self {
        Self::default()
    }

    /// What the sampler has done so far.
    pub fn stats(&self) -> BunchStats {
        self.stats
    }

    /// A packet of burst `burst` arrived at `now`, at position `index` of
    /// a burst of `len` packets, with `wire_len` IP-level bytes. Returns a
    /// sample when this arrival ends a burst that yields one (the packet's
    /// own burst, or the one it supersedes); never zero.
    pub fn on_packet(
        &mut self,
        now: Instant,
        burst: u32,
        index: u8,
        len: u8,
        wire_len: Bytes,
    ) -> Option<Rate> {
        if len == 0 || index >= len || wire_len == Bytes::ZERO || wire_len > MAX_WIRE_LEN {
            self.stats.invalid += 1;
            // A malformed packet carrying the current burst's id spoils it.
            if let Some(b) = self.cur.as_mut().filter(|b| b.burst == burst) {
                if b.state != State::Closed {
                    b.state = State::Closed;
                    self.stats.discarded += 1;
                }
            }
            return None;
        }
        let fresh = Bunch {
            burst,
            len,
            first: now,
            last: now,
            run: 1,
            bytes: Bytes::ZERO,
            next: u16::from(index) + 1,
            state: State::Run,
        };
        let Some(b) = self.cur.as_mut() else {
            self.cur = Some(fresh);
            return None;
        };
        if b.burst != burst {
            // Burst ids wrap: within half the id space ahead is "later".
            if burst.wrapping_sub(b.burst) >= 1 << 31 {
                self.stats.stale += 1;
                return None;
            }
            let sample = self.close();
            self.cur = Some(fresh);
            return sample;
        }
        if b.state == State::Closed {
            return None;
        }
        let index = u16::from(index);
        if len != b.len || index < b.next {
            // An inconsistent length, a duplicate, or a packet overtaken.
            b.state = State::Closed;
            self.stats.discarded += 1;
            return None;
        }
        if index > b.next {
            b.state = State::Gap;
        } else if b.state == State::Run {
            b.run = b.run.saturating_add(1);
            b.bytes += wire_len;
            b.last = now;
        }
        b.next = index + 1;
        if b.state == State::Run && b.next == u16::from(b.len) {
            // Complete and in order: nothing later can change it.
            return self.close();
        }
        None
    }

    /// End the current burst now (the stream stopped, or a receive timeout
    /// fired): its sample, if it yields one.
    pub fn flush(&mut self) -> Option<Rate> {
        self.close()
    }

    /// Close the current burst and take its sample, if any.
    fn close(&mut self) -> Option<Rate> {
        let b = self.cur.as_mut()?;
        if b.state == State::Closed {
            return None;
        }
        b.state = State::Closed;
        let sample = if b.run >= MIN_BUNCH {
            Rate::per(b.bytes, b.last - b.first).filter(|r| *r > Rate::ZERO)
        } else {
            None
        };
        if sample.is_some() {
            self.stats.samples += 1;
        } else {
            self.stats.short += 1;
        }
        sample
    }
}
