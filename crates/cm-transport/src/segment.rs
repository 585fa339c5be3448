//! The TCP segment: header fields the state machines use, payload length only.

use crate::wire::{DecodeError, Reader, VERSION, zeros};

/// Bytes of IPv4 + TCP header counted on the wire for every segment.
pub const TCP_IP_HEADER: u32 = 40;

/// Bytes of our fixed encoded header (version, flags, ports, seq, ack, wnd,
/// len, ts_val, ts_ecr).
pub const TCP_ENCODED_HEADER: usize = 1 + 1 + 2 + 2 + 8 + 8 + 4 + 4 + 8 + 8;

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
    const ALL: u8 = 0x07;

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
}

impl TcpSegment {
    /// Bytes on the wire: payload plus 40 bytes of IP and TCP header.
    pub fn wire_len(&self) -> u32 {
        self.len.saturating_add(TCP_IP_HEADER)
    }

    /// Sequence space the segment occupies (payload, plus one each for SYN/FIN).
    pub fn seq_len(&self) -> u64 {
        u64::from(self.len)
            + u64::from(self.flags.contains(Flags::SYN))
            + u64::from(self.flags.contains(Flags::FIN))
    }

    /// Append the encoding: fixed header, then `len` zero bytes.
    pub fn encode(&self, buf: &mut Vec<u8>) {
        buf.push(VERSION);
        buf.push(self.flags.bits());
        buf.extend_from_slice(&self.src_port.to_be_bytes());
        buf.extend_from_slice(&self.dst_port.to_be_bytes());
        buf.extend_from_slice(&self.seq.to_be_bytes());
        buf.extend_from_slice(&self.ack.to_be_bytes());
        buf.extend_from_slice(&self.wnd.to_be_bytes());
        buf.extend_from_slice(&self.len.to_be_bytes());
        buf.extend_from_slice(&self.ts_val.to_be_bytes());
        buf.extend_from_slice(&self.ts_ecr.to_be_bytes());
        zeros(buf, self.len);
    }

    /// Decode one segment occupying all of `buf`.
    pub fn decode(buf: &[u8]) -> Result<TcpSegment, DecodeError> {
        let mut r = Reader::new(buf);
        r.version()?;
        let bits = r.u8()?;
        let flags = Flags::from_bits(bits).ok_or(DecodeError::BadFlags(bits))?;
        let seg = TcpSegment {
            flags,
            src_port: r.u16()?,
            dst_port: r.u16()?,
            seq: r.u64()?,
            ack: r.u64()?,
            wnd: r.u32()?,
            len: r.u32()?,
            ts_val: r.u64()?,
            ts_ecr: r.u64()?,
        };
        r.payload(seg.len)?;
        Ok(seg)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn any_segment() -> impl Strategy<Value = TcpSegment> {
        (
            (any::<u16>(), any::<u16>(), any::<u64>(), any::<u64>()),
            (0u8..8, any::<u32>(), 0u32..3000, any::<u64>(), any::<u64>()),
        )
            .prop_map(
                |((src_port, dst_port, seq, ack), (f, wnd, len, ts_val, ts_ecr))| TcpSegment {
                    src_port,
                    dst_port,
                    seq,
                    ack,
                    flags: Flags::from_bits(f).unwrap_or_default(),
                    wnd,
                    len,
                    ts_val,
                    ts_ecr,
                },
            )
    }

    proptest! {
        #[test]
        fn round_trips(seg in any_segment()) {
            let mut buf = Vec::new();
            seg.encode(&mut buf);
            prop_assert_eq!(buf.len(), TCP_ENCODED_HEADER + seg.len as usize);
            prop_assert_eq!(TcpSegment::decode(&buf), Ok(seg));
        }

        #[test]
        fn decoding_random_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = TcpSegment::decode(&bytes);
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
    fn wire_len_adds_ip_and_tcp_headers() {
        let s = TcpSegment {
            len: 1460,
            ..Default::default()
        };
        assert_eq!(s.wire_len(), 1500);
    }
}
