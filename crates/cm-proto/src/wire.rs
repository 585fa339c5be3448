//! The CM header (sigcomm1999 §4.3, Fig 10) and the response (Fig 11), and
//! their byte encoding. The layout is documented byte by byte in the crate
//! docs; all integers are big-endian.

use thiserror::Error;

/// First byte of every CM protocol datagram (distinct from CC-UDP's 0xC3).
pub const MAGIC: u8 = 0xCB;
/// Wire version (high nibble of byte 1).
pub const VERSION: u8 = 1;
/// Bytes of the common header.
pub const HEADER_LEN: usize = 16;
/// Bytes of a response's fixed part (header included).
pub const RESPONSE_FIXED_LEN: usize = 32;
/// Bytes of one per-flow entry of a response.
pub const ENTRY_LEN: usize = 28;
/// Most flow entries one response carries (keeps it under 1232 bytes, the
/// IPv6 minimum MTU less headers).
pub const MAX_ENTRIES: usize = 42;
/// The default UDP port of the CM protocol (see the crate docs for why UDP).
pub const DEFAULT_PORT: u16 = 3124;

/// `protocol` of a DATA header whose payload is a datagram for the peer
/// application's socket (the only protocol carried today).
pub const PROTO_DATAGRAM: u16 = 17;

/// Bits of a DATA sequence number that number the flow's packets; the
/// top 16 carry the association's tag (the low 16 bits of its ISN), so a
/// packet headed under an association that has since been reset is not
/// counted by the next one.
pub const PACKET_BITS: u32 = 48;

/// The association tag of a DATA sequence number.
pub fn association_tag(seq: u64) -> u16 {
    (seq >> PACKET_BITS) as u16
}

/// A receiver's preference for one of its flows (the Hints Dispatcher,
/// sigcomm1999 §2 Fig 3), carried back in responses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Hint {
    /// Scheduler weight (0: no preference).
    pub weight: u16,
    /// Preferred rate in bytes/s (0: no preference).
    pub rate: u32,
}

/// One flow's counters in a response.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlowReport {
    /// The flow (as numbered in its DATA headers).
    pub flow: u32,
    /// Datagram bytes (CM header included) received on the flow since the
    /// association began
    /// (cumulative, wraps at 2^64).
    pub bytes: u64,
    /// Packets the receiver's loss detector has declared lost on the flow
    /// (cumulative).
    pub lost: u32,
    /// Packets received on the flow (cumulative, duplicates not counted).
    pub packets: u32,
    /// The receiver's hint for the flow.
    pub hint: Hint,
}

/// A response to a probe (Fig 11, with cumulative counts).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Response {
    /// The probe that triggered it (Fig 11's ThisProbe).
    pub this_probe: u64,
    /// The previous probe the responder received (Fig 11's LastProbe).
    pub last_probe: u64,
    /// Microseconds the probe waited at the responder.
    pub delay_us: u32,
    /// Per-flow counters (at most [`MAX_ENTRIES`]).
    pub flows: Vec<FlowReport>,
}

/// A decoded CM protocol datagram.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Packet {
    /// Opens an association: the sender's initial sequence number.
    Syn {
        /// Initial sequence number (random): the first probe is `isn + 1`.
        isn: u64,
    },
    /// Accepts an association, echoing the SYN's number.
    SynAck {
        /// The SYN's `isn`, echoed.
        isn: u64,
    },
    /// Resets: the receiver has no association matching a probe or data
    /// (it restarted); `seq` echoes the offending probe's number.
    Rst {
        /// The probe sequence number that found no association.
        seq: u64,
    },
    /// A probe: `seq` increments per probe from `isn + 1`.
    Probe {
        /// Probe sequence number.
        seq: u64,
    },
    /// The responder's answer to a probe.
    Response(Response),
    /// Application data with the CM header in front.
    Data {
        /// Transport the receiver hands the payload to ([`PROTO_DATAGRAM`]).
        protocol: u16,
        /// The flow.
        flow: u32,
        /// Per-flow packet sequence number.
        seq: u64,
    },
}

const T_SYN: u8 = 1;
const T_SYN_ACK: u8 = 2;
const T_RST: u8 = 3;
const T_PROBE: u8 = 4;
const T_RESPONSE: u8 = 5;
const T_DATA: u8 = 6;

/// Why a datagram is not a valid CM protocol datagram.
#[derive(Clone, Copy, Debug, Error, PartialEq, Eq)]
pub enum DecodeError {
    /// Shorter than its type needs.
    #[error("truncated: {len} bytes, {need} needed")]
    Truncated {
        /// Bytes present.
        len: usize,
        /// Bytes the type needs.
        need: usize,
    },
    /// The first byte is not [`MAGIC`].
    #[error("not a CM datagram (first byte {0:#04x})")]
    BadMagic(u8),
    /// A version this implementation does not speak.
    #[error("CM protocol version {0} (this is version {VERSION})")]
    BadVersion(u8),
    /// An unknown type.
    #[error("unknown CM packet type {0}")]
    BadType(u8),
    /// A response whose flow count disagrees with its length or limit.
    #[error("response with {0} flow entries")]
    BadFlowCount(u32),
}

/// Whether `buf` starts like a CM protocol datagram (cheap demultiplexing
/// against CC-UDP and raw payloads on one socket).
pub fn is_cm(buf: &[u8]) -> bool {
    buf.len() >= HEADER_LEN && buf[0] == MAGIC && buf[1] >> 4 == VERSION
}

fn header(out: &mut Vec<u8>, ty: u8, protocol: u16, flow: u32, seq: u64) {
    out.extend_from_slice(&fixed_header(ty, protocol, flow, seq));
}

/// The header of a fixed-size packet as an array.
fn fixed_header(ty: u8, protocol: u16, flow: u32, seq: u64) -> [u8; HEADER_LEN] {
    let mut h = [0u8; HEADER_LEN];
    h[0] = MAGIC;
    h[1] = (VERSION << 4) | ty;
    h[2..4].copy_from_slice(&protocol.to_be_bytes());
    h[4..8].copy_from_slice(&flow.to_be_bytes());
    h[8..16].copy_from_slice(&seq.to_be_bytes());
    h
}

/// The header of a DATA packet carrying a datagram
/// ([`PROTO_DATAGRAM`]) of `flow` numbered `seq`, as an array: what
/// `Packet::Data { .. }.encode()` gives, without an allocation (once per
/// datagram on a sender's path).
pub fn datagram_header(flow: u32, seq: u64) -> [u8; HEADER_LEN] {
    fixed_header(T_DATA, PROTO_DATAGRAM, flow, seq)
}

impl Packet {
    /// Appends the encoding to `out` (a DATA packet: its header only; the
    /// payload follows).
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        match self {
            Packet::Syn { isn } => header(out, T_SYN, 0, 0, *isn),
            Packet::SynAck { isn } => header(out, T_SYN_ACK, 0, 0, *isn),
            Packet::Rst { seq } => header(out, T_RST, 0, 0, *seq),
            Packet::Probe { seq } => header(out, T_PROBE, 0, 0, *seq),
            Packet::Data {
                protocol,
                flow,
                seq,
            } => header(out, T_DATA, *protocol, *flow, *seq),
            Packet::Response(r) => {
                let n = r.flows.len().min(MAX_ENTRIES);
                header(out, T_RESPONSE, 0, n as u32, r.this_probe);
                out.extend_from_slice(&r.last_probe.to_be_bytes());
                out.extend_from_slice(&r.delay_us.to_be_bytes());
                out.extend_from_slice(&[0; 4]);
                for f in &r.flows[..n] {
                    out.extend_from_slice(&f.flow.to_be_bytes());
                    out.extend_from_slice(&f.bytes.to_be_bytes());
                    out.extend_from_slice(&f.lost.to_be_bytes());
                    out.extend_from_slice(&f.hint.weight.to_be_bytes());
                    out.extend_from_slice(&[0; 2]);
                    out.extend_from_slice(&f.hint.rate.to_be_bytes());
                    out.extend_from_slice(&f.packets.to_be_bytes());
                }
            }
        }
    }

    /// The encoding as a new vector.
    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(HEADER_LEN);
        self.encode_into(&mut v);
        v
    }

    /// Decodes one datagram. For DATA, returns the header and the offset of
    /// the payload ([`HEADER_LEN`]).
    pub fn decode(buf: &[u8]) -> Result<Packet, DecodeError> {
        if buf.len() < HEADER_LEN {
            return Err(DecodeError::Truncated {
                len: buf.len(),
                need: HEADER_LEN,
            });
        }
        if buf[0] != MAGIC {
            return Err(DecodeError::BadMagic(buf[0]));
        }
        if buf[1] >> 4 != VERSION {
            return Err(DecodeError::BadVersion(buf[1] >> 4));
        }
        let protocol = u16::from_be_bytes([buf[2], buf[3]]);
        let flow = be32(&buf[4..8]);
        let seq = be64(&buf[8..16]);
        Ok(match buf[1] & 0x0f {
            T_SYN => Packet::Syn { isn: seq },
            T_SYN_ACK => Packet::SynAck { isn: seq },
            T_RST => Packet::Rst { seq },
            T_PROBE => Packet::Probe { seq },
            T_DATA => Packet::Data {
                protocol,
                flow,
                seq,
            },
            T_RESPONSE => {
                let n = flow as usize;
                if n > MAX_ENTRIES {
                    return Err(DecodeError::BadFlowCount(flow));
                }
                let need = RESPONSE_FIXED_LEN + n * ENTRY_LEN;
                if buf.len() < need {
                    return Err(DecodeError::Truncated {
                        len: buf.len(),
                        need,
                    });
                }
                let flows = buf[RESPONSE_FIXED_LEN..need]
                    .chunks_exact(ENTRY_LEN)
                    .map(|e| FlowReport {
                        flow: be32(&e[0..4]),
                        bytes: be64(&e[4..12]),
                        lost: be32(&e[12..16]),
                        hint: Hint {
                            weight: u16::from_be_bytes([e[16], e[17]]),
                            rate: be32(&e[20..24]),
                        },
                        packets: be32(&e[24..28]),
                    })
                    .collect();
                Packet::Response(Response {
                    this_probe: seq,
                    last_probe: be64(&buf[16..24]),
                    delay_us: be32(&buf[24..28]),
                    flows,
                })
            }
            t => return Err(DecodeError::BadType(t)),
        })
    }
}

fn be32(b: &[u8]) -> u32 {
    let mut a = [0; 4];
    a.copy_from_slice(&b[..4]);
    u32::from_be_bytes(a)
}

fn be64(b: &[u8]) -> u64 {
    let mut a = [0; 8];
    a.copy_from_slice(&b[..8]);
    u64::from_be_bytes(a)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_datagram_header_is_laid_out_as_documented() {
        assert_eq!(
            datagram_header(0x0102_0304, (5 << PACKET_BITS) | 9),
            [0xCB, 0x16, 0, 17, 1, 2, 3, 4, 0, 5, 0, 0, 0, 0, 0, 9]
        );
    }

    fn arb_packet() -> impl Strategy<Value = Packet> {
        let report = (
            any::<u32>(),
            any::<u64>(),
            any::<u32>(),
            any::<u16>(),
            any::<u32>(),
            any::<u32>(),
        )
            .prop_map(|(flow, bytes, lost, weight, rate, packets)| FlowReport {
                flow,
                bytes,
                lost,
                hint: Hint { weight, rate },
                packets,
            });
        prop_oneof![
            any::<u64>().prop_map(|isn| Packet::Syn { isn }),
            any::<u64>().prop_map(|isn| Packet::SynAck { isn }),
            any::<u64>().prop_map(|seq| Packet::Rst { seq }),
            any::<u64>().prop_map(|seq| Packet::Probe { seq }),
            (any::<u16>(), any::<u32>(), any::<u64>()).prop_map(|(protocol, flow, seq)| {
                Packet::Data {
                    protocol,
                    flow,
                    seq,
                }
            }),
            (
                any::<u64>(),
                any::<u64>(),
                any::<u32>(),
                proptest::collection::vec(report, 0..=MAX_ENTRIES)
            )
                .prop_map(|(this_probe, last_probe, delay_us, flows)| {
                    Packet::Response(Response {
                        this_probe,
                        last_probe,
                        delay_us,
                        flows,
                    })
                }),
        ]
    }

    proptest! {
        #[test]
        fn encode_decode_round_trips(p in arb_packet()) {
            let bytes = p.encode();
            prop_assert!(is_cm(&bytes));
            prop_assert_eq!(Packet::decode(&bytes), Ok(p));
        }

        #[test]
        fn decoding_arbitrary_bytes_never_panics(b in proptest::collection::vec(any::<u8>(), 0..1400)) {
            let _ = Packet::decode(&b);
        }

        #[test]
        fn every_truncation_of_a_response_is_refused(n in 1usize..=8, cut in 1usize..100) {
            let r = Packet::Response(Response {
                flows: vec![FlowReport::default(); n],
                ..Response::default()
            });
            let b = r.encode();
            let keep = b.len().saturating_sub(cut);
            prop_assert!(Packet::decode(&b[..keep]).is_err());
        }
    }

    #[test]
    fn the_header_is_laid_out_as_documented() {
        let b = Packet::Data {
            protocol: PROTO_DATAGRAM,
            flow: 0x0102_0304,
            seq: 5,
        }
        .encode();
        assert_eq!(b, [0xCB, 0x16, 0, 17, 1, 2, 3, 4, 0, 0, 0, 0, 0, 0, 0, 5]);
        assert_eq!(
            Packet::decode(&[0xCB, 0x27, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]),
            Err(DecodeError::BadVersion(2))
        );
        assert_eq!(
            Packet::decode(&[0xCB, 0x19, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]),
            Err(DecodeError::BadType(9))
        );
    }
}
