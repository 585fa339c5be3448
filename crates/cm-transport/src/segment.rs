//! The TCP segment: header fields the state machines use, payload length only.

use crate::wire::{DecodeError, Reader, VERSION, zeros};

/// Bytes of IPv4 + TCP header counted on the wire for every segment.
pub const TCP_IP_HEADER: u32 = 40;

/// Bytes of the fixed encoded header (version, flags, ports, seq, ack, wnd,
/// len, ts_val, ts_ecr). A segment without SACK blocks encodes to exactly
/// this plus its payload; one with `n` blocks adds
/// [`TcpSegment::sack_option_len`] = 1 + 16 n bytes (at most
/// [`TCP_SACK_OPTION_MAX`]).
///
/// MSS and SACK: in this crate only the receiver sends SACK blocks, and it
/// sends no data, so blocks only ever ride on pure ACKs (`len == 0`) and a
/// data segment is never longer than `TCP_ENCODED_HEADER + mss`. An MSS
/// derived as `packet size - TCP_ENCODED_HEADER` (cm-ttcp's `TCPCM_MSS`)
/// therefore stays valid with SACK on. A transport that both sends data and
/// SACKs would have to subtract [`TcpSegment::sack_option_len`] from the
/// payload of a segment that carries blocks (as real TCP does with options,
/// RFC 2018 §3).
pub const TCP_ENCODED_HEADER: usize = 1 + 1 + 2 + 2 + 8 + 8 + 4 + 4 + 8 + 8;

/// Most SACK blocks in one segment. RFC 2018 §3: with the timestamp option
/// (which every segment here carries) at most 3 blocks fit in TCP's
/// 40 bytes of option space.
pub const MAX_SACK_BLOCKS: usize = 3;

/// Encoded bytes of one SACK block (two 64-bit sequence numbers).
pub const TCP_SACK_BLOCK_BYTES: usize = 16;

/// Largest encoded SACK option: a count byte and [`MAX_SACK_BLOCKS`] blocks.
pub const TCP_SACK_OPTION_MAX: usize = 1 + MAX_SACK_BLOCKS * TCP_SACK_BLOCK_BYTES;

/// Wire-format bit in the flags byte: SACK blocks follow the fixed header.
/// Not a [`Flags`] value: it is set exactly when [`TcpSegment::sack`] is
/// non-empty, which keeps the encoding canonical.
const WIRE_SACK_BLOCKS: u8 = 0x40;

/// TCP control flags (a bit set).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Flags(u8);

impl Flags {
    /// No flags.
    pub const NONE: Flags = Flags(0);
    /// Synchronise sequence numbers (connection open).
    pub const SYN: Flags = Flags(0x01);
    /// The acknowledgment field is valid.
    pub const ACK: Flags = Flags(0x02);
    /// No more data from the sender.
    pub const FIN: Flags = Flags(0x04);
    /// SACK permitted (RFC 2018 §2): on a SYN, the sender asks for SACK; on
    /// the SYN-ACK, the receiver agrees. Meaningless on other segments.
    pub const SACK_OK: Flags = Flags(0x08);
    const ALL: u8 = 0x0f;

    /// Whether every flag in `other` is set.
    pub const fn contains(self, other: Flags) -> bool {
        self.0 & other.0 == other.0
    }

    /// The union of two flag sets.
    pub const fn union(self, other: Flags) -> Flags {
        Flags(self.0 | other.0)
    }

    /// The raw bits.
    pub const fn bits(self) -> u8 {
        self.0
    }

    /// Flags from raw bits, `None` if an undefined bit is set.
    pub const fn from_bits(bits: u8) -> Option<Flags> {
        if bits & !Self::ALL == 0 {
            Some(Flags(bits))
        } else {
            None
        }
    }
}

impl core::ops::BitOr for Flags {
    type Output = Flags;
    fn bitor(self, rhs: Flags) -> Flags {
        self.union(rhs)
    }
}

/// Up to [`MAX_SACK_BLOCKS`] SACK blocks (RFC 2018 §3), in the order the
/// receiver lists them (most recently changed first, RFC 2018 §4). Each block
/// is `[start, end)` with `start < end`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct SackBlocks {
    n: u8,
    // Unused entries stay (0, 0), so derived equality is equality of the
    // listed blocks.
    blocks: [(u64, u64); MAX_SACK_BLOCKS],
}

impl SackBlocks {
    /// No blocks.
    pub const NONE: SackBlocks = SackBlocks {
        n: 0,
        blocks: [(0, 0); MAX_SACK_BLOCKS],
    };

    /// Blocks from a list; `None` if there are more than
    /// [`MAX_SACK_BLOCKS`] or one is empty (`start >= end`).
    pub fn from_blocks(list: &[(u64, u64)]) -> Option<SackBlocks> {
        let mut b = SackBlocks::NONE;
        for &(s, e) in list {
            if !b.push(s, e) {
                return None;
            }
        }
        Some(b)
    }

    /// Append a block; false (and unchanged) if full or empty.
    pub fn push(&mut self, start: u64, end: u64) -> bool {
        let i = usize::from(self.n);
        if i >= MAX_SACK_BLOCKS || start >= end {
            return false;
        }
        self.blocks[i] = (start, end);
        self.n += 1;
        true
    }

    /// The blocks, in order.
    pub fn as_slice(&self) -> &[(u64, u64)] {
        &self.blocks[..usize::from(self.n)]
    }

    /// Number of blocks.
    pub fn len(&self) -> usize {
        usize::from(self.n)
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }
}

/// One TCP segment. Sequence numbers are 64-bit byte offsets (no wraparound);
/// timestamps are RFC 7323-style microsecond values.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct TcpSegment {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Sequence number of the first byte (or of the SYN/FIN).
    pub seq: u64,
    /// Cumulative acknowledgment: next byte expected (valid with `ACK`).
    pub ack: u64,
    /// Control flags.
    pub flags: Flags,
    /// Advertised receive window, bytes.
    pub wnd: u32,
    /// Payload bytes (content is not carried).
    pub len: u32,
    /// Sender's timestamp, µs (RFC 7323 TSval).
    pub ts_val: u64,
    /// Echoed timestamp, µs (RFC 7323 TSecr); 0 means none.
    pub ts_ecr: u64,
    /// SACK blocks (RFC 2018), empty unless SACK was negotiated.
    pub sack: SackBlocks,
}

impl TcpSegment {
    /// Bytes on the wire: payload plus 40 bytes of IP and TCP header, plus
    /// the TCP SACK option if blocks are present (RFC 2018 §3: 2 + 8 n
    /// bytes, padded to a multiple of 4 as real stacks do with NOPs).
    pub fn wire_len(&self) -> u32 {
        let opt = if self.sack.is_empty() {
            0
        } else {
            (2 + 8 * self.sack.len() as u32).next_multiple_of(4)
        };
        self.len.saturating_add(TCP_IP_HEADER + opt)
    }

    /// Extra encoded bytes of the SACK blocks (0 without blocks).
    pub fn sack_option_len(&self) -> usize {
        if self.sack.is_empty() {
            0
        } else {
            1 + self.sack.len() * TCP_SACK_BLOCK_BYTES
        }
    }

    /// Length of [`TcpSegment::encode`]'s output.
    pub fn encoded_len(&self) -> usize {
        TCP_ENCODED_HEADER + self.sack_option_len() + self.len as usize
    }

    /// Sequence space the segment occupies (payload, plus one each for SYN/FIN).
    pub fn seq_len(&self) -> u64 {
        u64::from(self.len)
            + u64::from(self.flags.contains(Flags::SYN))
            + u64::from(self.flags.contains(Flags::FIN))
    }

    /// Append the encoding: fixed header, then the SACK blocks if any (a
    /// count byte, then start and end of each block), then `len` zero bytes.
    pub fn encode(&self, buf: &mut Vec<u8>) {
        buf.push(VERSION);
        let sack_bit = if self.sack.is_empty() {
            0
        } else {
            WIRE_SACK_BLOCKS
        };
        buf.push(self.flags.bits() | sack_bit);
        buf.extend_from_slice(&self.src_port.to_be_bytes());
        buf.extend_from_slice(&self.dst_port.to_be_bytes());
        buf.extend_from_slice(&self.seq.to_be_bytes());
        buf.extend_from_slice(&self.ack.to_be_bytes());
        buf.extend_from_slice(&self.wnd.to_be_bytes());
        buf.extend_from_slice(&self.len.to_be_bytes());
        buf.extend_from_slice(&self.ts_val.to_be_bytes());
        buf.extend_from_slice(&self.ts_ecr.to_be_bytes());
        if !self.sack.is_empty() {
            buf.push(self.sack.n);
            for &(s, e) in self.sack.as_slice() {
                buf.extend_from_slice(&s.to_be_bytes());
                buf.extend_from_slice(&e.to_be_bytes());
            }
        }
        zeros(buf, self.len);
    }

    /// Decode one segment occupying all of `buf`.
    pub fn decode(buf: &[u8]) -> Result<TcpSegment, DecodeError> {
        let mut r = Reader::new(buf);
        r.version()?;
        let wire_bits = r.u8()?;
        let bits = wire_bits & !WIRE_SACK_BLOCKS;
        let flags = Flags::from_bits(bits).ok_or(DecodeError::BadFlags(wire_bits))?;
        let mut seg = TcpSegment {
            flags,
            src_port: r.u16()?,
            dst_port: r.u16()?,
            seq: r.u64()?,
            ack: r.u64()?,
            wnd: r.u32()?,
            len: r.u32()?,
            ts_val: r.u64()?,
            ts_ecr: r.u64()?,
            sack: SackBlocks::NONE,
        };
        if wire_bits & WIRE_SACK_BLOCKS != 0 {
            // Canonical: the bit is set only with 1..=MAX_SACK_BLOCKS
            // non-empty blocks.
            let n = r.u8()?;
            if n == 0 || usize::from(n) > MAX_SACK_BLOCKS {
                return Err(DecodeError::BadSack);
            }
            for _ in 0..n {
                let (s, e) = (r.u64()?, r.u64()?);
                if !seg.sack.push(s, e) {
                    return Err(DecodeError::BadSack);
                }
            }
        }
        r.payload(seg.len)?;
        Ok(seg)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn any_sack() -> impl Strategy<Value = SackBlocks> {
        proptest::collection::vec((any::<u64>(), 1u64..100_000), 0..=MAX_SACK_BLOCKS).prop_map(
            |v| {
                let blocks: Vec<(u64, u64)> = v
                    .into_iter()
                    .map(|(s, l)| (s.min(u64::MAX - l), s.min(u64::MAX - l) + l))
                    .collect();
                SackBlocks::from_blocks(&blocks).unwrap_or_default()
            },
        )
    }

    fn any_segment() -> impl Strategy<Value = TcpSegment> {
        (
            (any::<u16>(), any::<u16>(), any::<u64>(), any::<u64>()),
            (
                0u8..16,
                any::<u32>(),
                0u32..3000,
                any::<u64>(),
                any::<u64>(),
            ),
            any_sack(),
        )
            .prop_map(
                |((src_port, dst_port, seq, ack), (f, wnd, len, ts_val, ts_ecr), sack)| {
                    TcpSegment {
                        src_port,
                        dst_port,
                        seq,
                        ack,
                        flags: Flags::from_bits(f).unwrap_or_default(),
                        wnd,
                        len,
                        ts_val,
                        ts_ecr,
                        sack,
                    }
                },
            )
    }

    proptest! {
        #[test]
        fn round_trips(seg in any_segment()) {
            let mut buf = Vec::new();
            seg.encode(&mut buf);
            prop_assert_eq!(buf.len(), seg.encoded_len());
            prop_assert_eq!(
                buf.len(),
                TCP_ENCODED_HEADER + seg.sack_option_len() + seg.len as usize
            );
            prop_assert!(seg.sack_option_len() <= TCP_SACK_OPTION_MAX);
            prop_assert_eq!(TcpSegment::decode(&buf), Ok(seg));
        }

        #[test]
        fn decoding_random_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = TcpSegment::decode(&bytes);
        }

        /// Random bytes behind a valid header with the SACK bit set: the
        /// block parser must never panic, and whatever decodes re-encodes
        /// to the same bytes (the encoding is canonical).
        #[test]
        fn decoding_random_sack_options_never_panics_and_is_canonical(
            seg in any_segment(),
            tail in proptest::collection::vec(any::<u8>(), 0..120),
        ) {
            let mut buf = Vec::new();
            TcpSegment { len: 0, sack: SackBlocks::NONE, ..seg }.encode(&mut buf);
            buf[1] |= WIRE_SACK_BLOCKS;
            buf.extend_from_slice(&tail);
            if let Ok(d) = TcpSegment::decode(&buf) {
                let mut again = Vec::new();
                d.encode(&mut again);
                prop_assert_eq!(again, buf);
            }
        }

        /// Changing any header or SACK byte of a valid encoding never panics
        /// the decoder, and what still decodes re-encodes identically.
        /// (Payload bytes are stand-ins and are not checked.)
        #[test]
        fn decoding_mutated_segments_never_panics(seg in any_segment(), at in any::<usize>(), v in any::<u8>()) {
            let mut buf = Vec::new();
            seg.encode(&mut buf);
            let i = at % (buf.len() - seg.len as usize);
            buf[i] = v;
            if let Ok(d) = TcpSegment::decode(&buf) {
                let mut again = Vec::new();
                d.encode(&mut again);
                prop_assert_eq!(again, buf);
            }
        }

        #[test]
        fn truncation_is_an_error(seg in any_segment(), cut in 1usize..60) {
            let mut buf = Vec::new();
            seg.encode(&mut buf);
            let keep = buf.len().saturating_sub(cut);
            prop_assert!(TcpSegment::decode(&buf[..keep]).is_err());
        }
    }

    #[test]
    fn rejects_bad_version_flags_and_trailing_bytes() {
        let mut buf = Vec::new();
        TcpSegment::default().encode(&mut buf);
        let mut v = buf.clone();
        v[0] = 9;
        assert_eq!(TcpSegment::decode(&v), Err(DecodeError::BadVersion(9)));
        let mut f = buf.clone();
        f[1] = 0x80;
        assert_eq!(TcpSegment::decode(&f), Err(DecodeError::BadFlags(0x80)));
        buf.push(0);
        assert!(matches!(
            TcpSegment::decode(&buf),
            Err(DecodeError::LengthMismatch { .. })
        ));
    }

    #[test]
    fn sack_blocks_encoding_rules() {
        assert!(SackBlocks::from_blocks(&[(5, 5)]).is_none(), "empty block");
        assert!(SackBlocks::from_blocks(&[(1, 2); 4]).is_none(), "too many");
        let sack = SackBlocks::from_blocks(&[(3001, 4461), (1, 1461)]).unwrap();
        let seg = TcpSegment {
            ack: 1,
            flags: Flags::ACK,
            sack,
            ..Default::default()
        };
        let mut buf = Vec::new();
        seg.encode(&mut buf);
        assert_eq!(buf.len(), TCP_ENCODED_HEADER + 1 + 2 * 16);
        assert_eq!(
            TcpSegment::decode(&buf).unwrap().sack.as_slice(),
            sack.as_slice()
        );
        // A SACK-less segment encodes exactly as before SACK existed.
        let mut plain = Vec::new();
        TcpSegment {
            sack: SackBlocks::NONE,
            ..seg
        }
        .encode(&mut plain);
        assert_eq!(plain.len(), TCP_ENCODED_HEADER);
        assert_eq!(plain[1], Flags::ACK.bits());
        // Count 0, count 4 and an empty block are rejected, not panics.
        for (i, v) in [(TCP_ENCODED_HEADER, 0u8), (TCP_ENCODED_HEADER, 4)] {
            let mut b = buf.clone();
            b[i] = v;
            assert!(TcpSegment::decode(&b).is_err());
        }
        let mut b = buf.clone();
        b[TCP_ENCODED_HEADER + 9..TCP_ENCODED_HEADER + 17].copy_from_slice(&3001u64.to_be_bytes());
        assert_eq!(TcpSegment::decode(&b), Err(DecodeError::BadSack));
        // The SACK-permitted flag round-trips.
        let syn = TcpSegment {
            flags: Flags::SYN | Flags::SACK_OK,
            ..Default::default()
        };
        let mut b = Vec::new();
        syn.encode(&mut b);
        assert_eq!(TcpSegment::decode(&b), Ok(syn));
        // On the simulated wire the option costs 2 + 8 n bytes, padded to 4.
        assert_eq!(seg.wire_len(), 40 + 20);
    }

    #[test]
    fn wire_len_adds_ip_and_tcp_headers() {
        let s = TcpSegment {
            len: 1460,
            ..Default::default()
        };
        assert_eq!(s.wire_len(), 1500);
    }
}
