//! Constant-bit-rate UDP traffic: a source on its own clock and a counting sink.
//!
//! The source is the classic open-loop cross traffic of the experiments
//! (sigcomm1999 §5.2 "constant bit rate cross traffic"): it ignores
//! congestion entirely.

use cm_core::{Duration, Instant};
use thiserror::Error;

use crate::wire::{DecodeError, Reader, VERSION, zeros};

/// Bytes of IPv4 + UDP header counted on the wire for every datagram.
pub const UDP_IP_HEADER: u32 = 28;

/// Bytes of the encoded CBR header (version, seq, len, sent_at).
pub const CBR_ENCODED_HEADER: usize = 1 + 8 + 4 + 8;

/// One CBR datagram.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct CbrPacket {
    /// Sequence number, from 0.
    pub seq: u64,
    /// Payload bytes.
    pub len: u32,
    /// When the source sent it (µs since the driver's epoch).
    pub sent_at: Instant,
}

impl CbrPacket {
    /// Bytes on the wire: payload plus 28 bytes of IP and UDP header.
    pub fn wire_len(&self) -> u32 {
        self.len.saturating_add(UDP_IP_HEADER)
    }

    /// Append the encoding: fixed header, then `len` zero bytes.
    pub fn encode(&self, buf: &mut Vec<u8>) {
        buf.push(VERSION);
        buf.extend_from_slice(&self.seq.to_be_bytes());
        buf.extend_from_slice(&self.len.to_be_bytes());
        buf.extend_from_slice(&self.sent_at.as_micros().to_be_bytes());
        zeros(buf, self.len);
    }

    /// Decode one packet occupying all of `buf`.
    pub fn decode(buf: &[u8]) -> Result<CbrPacket, DecodeError> {
        let mut r = Reader::new(buf);
        r.version()?;
        let p = CbrPacket {
            seq: r.u64()?,
            len: r.u32()?,
            sent_at: Instant::from_micros(r.u64()?),
        };
        r.payload(p.len)?;
        Ok(p)
    }
}

/// Why a CBR configuration is unusable.
#[derive(Clone, Copy, Debug, Error, PartialEq, Eq)]
pub enum CbrError {
    /// The rate is zero.
    #[error("CBR rate must be > 0 bit/s")]
    ZeroRate,
    /// The packet size is zero.
    #[error("CBR packet size must be > 0 bytes")]
    ZeroSize,
}

/// A constant-bit-rate source: packet `k` leaves at exactly
/// `start + k * len * 8 / rate` (computed from `k`, so rounding never drifts).
/// The rate counts payload bytes (`len`); use `len = size - 28` to target a
/// wire rate.
#[derive(Clone, Debug)]
pub struct CbrSource {
    rate_bps: u64,
    len: u32,
    start: Instant,
    stop: Option<Instant>,
    next_seq: u64,
}

impl CbrSource {
    /// A source of `rate_bps` bits/s in packets of `len` payload bytes,
    /// sending its first packet at `start` and none at or after `stop`.
    pub fn new(
        rate_bps: u64,
        len: u32,
        start: Instant,
        stop: Option<Instant>,
    ) -> Result<Self, CbrError> {
        if rate_bps == 0 {
            return Err(CbrError::ZeroRate);
        }
        if len == 0 {
            return Err(CbrError::ZeroSize);
        }
        Ok(CbrSource {
            rate_bps,
            len,
            start,
            stop,
            next_seq: 0,
        })
    }

    /// When packet `k` is due.
    fn due(&self, k: u64) -> Instant {
        let us = u128::from(k) * u128::from(self.len) * 8 * 1_000_000 / u128::from(self.rate_bps);
        self.start + Duration::from_micros(u64::try_from(us).unwrap_or(u64::MAX))
    }

    /// The next packet if it is due at `now`.
    pub fn poll_transmit(&mut self, now: Instant) -> Option<CbrPacket> {
        let due = self.poll_timeout()?;
        if due > now {
            return None;
        }
        let p = CbrPacket {
            seq: self.next_seq,
            len: self.len,
            sent_at: now,
        };
        self.next_seq += 1;
        Some(p)
    }

    /// When the next packet is due (`None` once stopped).
    pub fn poll_timeout(&self) -> Option<Instant> {
        let due = self.due(self.next_seq);
        match self.stop {
            Some(stop) if due >= stop => None,
            _ => Some(due),
        }
    }

    /// Packets sent so far.
    pub fn packets_sent(&self) -> u64 {
        self.next_seq
    }

    /// Payload bytes sent so far.
    pub fn bytes_sent(&self) -> u64 {
        self.next_seq * u64::from(self.len)
    }
}

/// Counts CBR arrivals and infers losses from sequence gaps.
#[derive(Clone, Debug, Default)]
pub struct CbrSink {
    packets: u64,
    bytes: u64,
    duplicates: u64,
    reordered: u64,
    highest: Option<u64>,
    /// Sequence numbers below `highest` not yet seen (late arrivals fill them).
    missing: std::collections::BTreeSet<u64>,
}

impl CbrSink {
    /// An empty sink.
    pub fn new() -> Self {
        Self::default()
    }

    /// Account for one arriving packet.
    pub fn handle_packet(&mut self, _now: Instant, p: &CbrPacket) {
        match self.highest {
            Some(h) if p.seq <= h => {
                if !self.missing.remove(&p.seq) {
                    self.duplicates += 1;
                    return;
                }
                self.reordered += 1;
            }
            _ => {
                let from = self.highest.map_or(0, |h| h + 1);
                // Bound the remembered gap so a corrupt seq cannot exhaust memory.
                for s in from.max(p.seq.saturating_sub(1 << 16))..p.seq {
                    self.missing.insert(s);
                }
                self.highest = Some(p.seq);
            }
        }
        self.packets += 1;
        self.bytes += u64::from(p.len);
    }

    /// Distinct packets received.
    pub fn packets(&self) -> u64 {
        self.packets
    }

    /// Payload bytes received (distinct packets).
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Packets below the highest sequence number seen that never arrived.
    pub fn lost(&self) -> u64 {
        self.missing.len() as u64
    }

    /// Duplicate arrivals (ignored in the counts).
    pub fn duplicates(&self) -> u64 {
        self.duplicates
    }

    /// Arrivals that filled an earlier gap.
    pub fn reordered(&self) -> u64 {
        self.reordered
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn sends_exactly_rate_times_time() {
        // 80 kbit/s of 1000-byte packets: one every 100 ms; in 10 s, 100
        // packets = 10_000 bytes/s * 10 s.
        let stop = Instant::from_micros(10_000_000);
        let mut s = CbrSource::new(80_000, 1000, Instant::ZERO, Some(stop)).unwrap();
        let mut sent = Vec::new();
        while let Some(t) = s.poll_timeout() {
            while let Some(p) = s.poll_transmit(t) {
                sent.push(p);
            }
        }
        assert_eq!(sent.len(), 100);
        assert_eq!(s.bytes_sent(), 80_000 / 8 * 10);
        assert_eq!(sent[1].sent_at, Instant::from_micros(100_000));
        assert_eq!(sent[99].sent_at, Instant::from_micros(9_900_000));
    }

    #[test]
    fn odd_rates_do_not_drift() {
        // 1000 B at 3 kbit/s = 2.666.. s per packet; 300 packets take 800 s.
        let mut s = CbrSource::new(3_000, 1000, Instant::ZERO, None).unwrap();
        let end = Instant::from_micros(800_000_000);
        let mut n = 0;
        while s.poll_timeout().is_some_and(|t| t < end) {
            let t = s.poll_timeout().unwrap();
            n += u64::from(s.poll_transmit(t).is_some());
        }
        assert_eq!(n, 300);
    }

    #[test]
    fn sink_counts_gaps_reordering_and_duplicates() {
        let mut k = CbrSink::new();
        let p = |seq| CbrPacket {
            seq,
            len: 100,
            sent_at: Instant::ZERO,
        };
        for s in [0, 1, 3, 5, 2, 5] {
            k.handle_packet(Instant::ZERO, &p(s));
        }
        assert_eq!(k.packets(), 5);
        assert_eq!(k.bytes(), 500);
        assert_eq!(k.lost(), 1); // 4
        assert_eq!(k.reordered(), 1); // 2
        assert_eq!(k.duplicates(), 1); // second 5
    }

    #[test]
    fn rejects_zero_rate_and_size() {
        assert_eq!(
            CbrSource::new(0, 1, Instant::ZERO, None).err(),
            Some(CbrError::ZeroRate)
        );
        assert_eq!(
            CbrSource::new(1, 0, Instant::ZERO, None).err(),
            Some(CbrError::ZeroSize)
        );
    }

    proptest! {
        #[test]
        fn packet_round_trips(seq in any::<u64>(), len in 0u32..2000, t in any::<u64>()) {
            let p = CbrPacket { seq, len, sent_at: Instant::from_micros(t) };
            let mut buf = Vec::new();
            p.encode(&mut buf);
            prop_assert_eq!(CbrPacket::decode(&buf), Ok(p));
        }

        #[test]
        fn decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..100)) {
            let _ = CbrPacket::decode(&bytes);
        }
    }
}
