//! The CC-UDP wire format: a 16-byte header in front of every data
//! datagram, and a 52-byte acknowledgement datagram
//! (cm-implementation-linux §3.3: the application supplies the feedback the
//! kernel's UDP does not; the header carries what the sender needs to turn
//! acknowledgements into `cm_update`).
//!
//! All integers are big-endian.
//!
//! ```text
//! data:  0 magic 0xC3 | 1 version<<4 | kind(1) | 2..4 session
//!        4..12 seq (u64, 0,1,2,.. per connection) | 12..16 send time (µs, u32, wraps)
//!        16.. payload
//! ack:   0 magic 0xC3 | 1 version<<4 | kind(2) | 2..4 session (echoed)
//!        4..12  highest seq received
//!        12..20 mask: bit i set = seq (highest - i) received (bit 0 always)
//!        20..28 datagrams received (cumulative, this session)
//!        28..36 bytes received (cumulative, header included)
//!        36..44 echo seq: the newest datagram received
//!        44..48 its send time, echoed | 48..52 µs it waited at the receiver
//! ```
//!
//! The cumulative counts make the feedback robust to lost acks (a later
//! ack says everything an earlier one did); the mask lets the sender tell
//! which of the last 64 datagrams arrived, so it can tolerate reordering
//! (RFC 5681 §3.2's three-duplicate rule) instead of calling every gap a
//! loss.

/// First byte of every CC-UDP datagram.
pub const MAGIC: u8 = 0xC3;
/// Wire version (high nibble of byte 1).
pub const VERSION: u8 = 1;
/// Bytes of header in front of each data payload.
pub const DATA_HEADER_LEN: usize = 16;
/// Bytes of an acknowledgement datagram.
pub const ACK_LEN: usize = 52;

const KIND_DATA: u8 = 1;
const KIND_ACK: u8 = 2;

/// The header of one data datagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DataHeader {
    /// Identifies the connection (chosen at random by the sender), so a
    /// reconnected peer's sequence numbers start afresh.
    pub session: u16,
    /// Sequence number, from 0 per session.
    pub seq: u64,
    /// Sender's clock when the datagram was queued, µs (wraps):
    /// [`timestamp`].
    pub ts: u32,
}

/// `now` in the header's 32-bit µs clock (wraps), for [`DataHeader::ts`]
/// and the sender's reading of an echoed one.
pub fn timestamp(now: cm_core::Instant) -> u32 {
    now.as_micros() as u32
}

/// An acknowledgement (see the module docs for the fields' layout).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ack {
    /// The session of the data acknowledged.
    pub session: u16,
    /// The highest sequence number received.
    pub highest: u64,
    /// Bit i set: `highest - i` was received.
    pub mask: u64,
    /// Data datagrams received so far in this session.
    pub recv_count: u64,
    /// Bytes (header included) of those.
    pub recv_bytes: u64,
    /// The newest datagram received.
    pub echo_seq: u64,
    /// Its header's send time, echoed.
    pub echo_ts: u32,
    /// How long it waited at the receiver before this ack, µs.
    pub echo_delay_us: u32,
}

/// A decoded datagram.
#[derive(Debug, PartialEq, Eq)]
pub enum Packet<'a> {
    /// Application data.
    Data {
        /// Its header.
        header: DataHeader,
        /// The application's bytes.
        payload: &'a [u8],
    },
    /// An acknowledgement.
    Ack(Ack),
}

/// Why bytes are not a CC-UDP datagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WireError {
    /// Shorter than its header.
    #[error("datagram too short for a CC-UDP header")]
    Short,
    /// The first byte is not [`MAGIC`].
    #[error("bad magic byte")]
    BadMagic,
    /// A wire version this code does not speak.
    #[error("unsupported CC-UDP version {0}")]
    BadVersion(u8),
    /// Neither data nor ack.
    #[error("unknown CC-UDP datagram kind {0}")]
    BadKind(u8),
    /// An ack whose fields contradict each other.
    #[error("inconsistent acknowledgement")]
    BadAck,
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_be_bytes(a)
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    u32::from_be_bytes(a)
}

impl DataHeader {
    /// Append the header and `payload` to `out` (cleared first).
    pub fn encode(&self, payload: &[u8], out: &mut Vec<u8>) {
        out.clear();
        out.reserve(DATA_HEADER_LEN + payload.len());
        out.extend_from_slice(&self.bytes());
        out.extend_from_slice(payload);
    }

    /// The header's bytes (what goes in front of the payload).
    pub fn bytes(&self) -> [u8; DATA_HEADER_LEN] {
        let mut b = [0u8; DATA_HEADER_LEN];
        b[0] = MAGIC;
        b[1] = VERSION << 4 | KIND_DATA;
        b[2..4].copy_from_slice(&self.session.to_be_bytes());
        b[4..12].copy_from_slice(&self.seq.to_be_bytes());
        b[12..16].copy_from_slice(&self.ts.to_be_bytes());
        b
    }
}

impl Ack {
    /// The ack's bytes.
    pub fn encode(&self) -> [u8; ACK_LEN] {
        let mut b = [0u8; ACK_LEN];
        b[0] = MAGIC;
        b[1] = VERSION << 4 | KIND_ACK;
        b[2..4].copy_from_slice(&self.session.to_be_bytes());
        b[4..12].copy_from_slice(&self.highest.to_be_bytes());
        b[12..20].copy_from_slice(&self.mask.to_be_bytes());
        b[20..28].copy_from_slice(&self.recv_count.to_be_bytes());
        b[28..36].copy_from_slice(&self.recv_bytes.to_be_bytes());
        b[36..44].copy_from_slice(&self.echo_seq.to_be_bytes());
        b[44..48].copy_from_slice(&self.echo_ts.to_be_bytes());
        b[48..52].copy_from_slice(&self.echo_delay_us.to_be_bytes());
        b
    }
}

/// Decode one datagram. Untrusted input: never panics, whatever the bytes.
pub fn decode(b: &[u8]) -> Result<Packet<'_>, WireError> {
    if b.len() < 4 {
        return Err(WireError::Short);
    }
    if b[0] != MAGIC {
        return Err(WireError::BadMagic);
    }
    let version = b[1] >> 4;
    if version != VERSION {
        return Err(WireError::BadVersion(version));
    }
    let session = u16::from_be_bytes([b[2], b[3]]);
    match b[1] & 0x0f {
        KIND_DATA => {
            if b.len() < DATA_HEADER_LEN {
                return Err(WireError::Short);
            }
            Ok(Packet::Data {
                header: DataHeader {
                    session,
                    seq: u64_at(b, 4),
                    ts: u32_at(b, 12),
                },
                payload: &b[DATA_HEADER_LEN..],
            })
        }
        KIND_ACK => {
            if b.len() < ACK_LEN {
                return Err(WireError::Short);
            }
            let ack = Ack {
                session,
                highest: u64_at(b, 4),
                mask: u64_at(b, 12),
                recv_count: u64_at(b, 20),
                recv_bytes: u64_at(b, 28),
                echo_seq: u64_at(b, 36),
                echo_ts: u32_at(b, 44),
                echo_delay_us: u32_at(b, 48),
            };
            // The newest datagram is received (bit 0), no later than the
            // highest, and counted.
            if ack.mask & 1 == 0 || ack.echo_seq > ack.highest || ack.recv_count == 0 {
                return Err(WireError::BadAck);
            }
            Ok(Packet::Ack(ack))
        }
        k => Err(WireError::BadKind(k)),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn data_round_trip() {
        let h = DataHeader {
            session: 0xbeef,
            seq: 1 << 40,
            ts: 0xdead_beef,
        };
        let mut out = Vec::new();
        h.encode(b"hello", &mut out);
        assert_eq!(out.len(), DATA_HEADER_LEN + 5);
        assert_eq!(
            decode(&out).unwrap(),
            Packet::Data {
                header: h,
                payload: b"hello"
            }
        );
    }

    #[test]
    fn ack_round_trip() {
        let a = Ack {
            session: 7,
            highest: 100,
            mask: 0b1011,
            recv_count: 90,
            recv_bytes: 90_000,
            echo_seq: 100,
            echo_ts: 12345,
            echo_delay_us: 17,
        };
        assert_eq!(decode(&a.encode()).unwrap(), Packet::Ack(a));
    }

    #[test]
    fn malformed_is_an_error_never_a_panic() {
        assert_eq!(decode(b""), Err(WireError::Short));
        assert_eq!(decode(b"hello world, no header"), Err(WireError::BadMagic));
        assert_eq!(
            decode(&[MAGIC, 2 << 4 | 1, 0, 0]),
            Err(WireError::BadVersion(2))
        );
        assert_eq!(
            decode(&[MAGIC, 1 << 4 | 9, 0, 0]),
            Err(WireError::BadKind(9))
        );
        assert_eq!(decode(&[MAGIC, 1 << 4 | 1, 0, 0, 1]), Err(WireError::Short));
        let mut a = Ack {
            session: 0,
            highest: 5,
            mask: 0,
            recv_count: 1,
            recv_bytes: 1,
            echo_seq: 5,
            echo_ts: 0,
            echo_delay_us: 0,
        };
        assert_eq!(decode(&a.encode()), Err(WireError::BadAck));
        a.mask = 1;
        a.echo_seq = 6;
        assert_eq!(decode(&a.encode()), Err(WireError::BadAck));
        // Every prefix and every byte value in the header: no panic.
        let good = a.encode();
        for n in 0..good.len() {
            let _ = decode(&good[..n]);
        }
        for i in 0..4 {
            for v in 0..=255u8 {
                let mut b = good;
                b[i] = v;
                let _ = decode(&b);
            }
        }
    }
}
