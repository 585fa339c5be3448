//! The one datagram type the simulator and the socket drivers carry.

use crate::audio::{AudioFeedback, AudioPacket};
use crate::cbr::CbrPacket;
use crate::segment::TcpSegment;
use crate::wire::DecodeError;

const TAG_TCP: u8 = 1;
const TAG_CBR: u8 = 2;
const TAG_AUDIO: u8 = 3;
const TAG_AUDIO_FEEDBACK: u8 = 4;

/// Any packet of this crate's transports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Datagram {
    /// A TCP segment (NewReno or TCP/CM, data or ACK).
    Tcp(TcpSegment),
    /// Constant-bit-rate cross traffic.
    Cbr(CbrPacket),
    /// Layered audio data.
    Audio(AudioPacket),
    /// Layered audio receiver report.
    AudioFeedback(AudioFeedback),
}

impl Datagram {
    /// Bytes on the wire, including IP and transport headers.
    pub fn wire_len(&self) -> u32 {
        match self {
            Datagram::Tcp(s) => s.wire_len(),
            Datagram::Cbr(p) => p.wire_len(),
            Datagram::Audio(p) => p.wire_len(),
            Datagram::AudioFeedback(f) => f.wire_len(),
        }
    }

    /// Append a tag byte and the variant's encoding.
    pub fn encode(&self, buf: &mut Vec<u8>) {
        match self {
            Datagram::Tcp(s) => {
                buf.push(TAG_TCP);
                s.encode(buf);
            }
            Datagram::Cbr(p) => {
                buf.push(TAG_CBR);
                p.encode(buf);
            }
            Datagram::Audio(p) => {
                buf.push(TAG_AUDIO);
                p.encode(buf);
            }
            Datagram::AudioFeedback(f) => {
                buf.push(TAG_AUDIO_FEEDBACK);
                f.encode(buf);
            }
        }
    }

    /// Decode a datagram occupying all of `buf`.
    pub fn decode(buf: &[u8]) -> Result<Datagram, DecodeError> {
        let (&tag, rest) = buf
            .split_first()
            .ok_or(DecodeError::Truncated { need: 1, have: 0 })?;
        Ok(match tag {
            TAG_TCP => Datagram::Tcp(TcpSegment::decode(rest)?),
            TAG_CBR => Datagram::Cbr(CbrPacket::decode(rest)?),
            TAG_AUDIO => Datagram::Audio(AudioPacket::decode(rest)?),
            TAG_AUDIO_FEEDBACK => Datagram::AudioFeedback(AudioFeedback::decode(rest)?),
            t => return Err(DecodeError::UnknownTag(t)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::segment::Flags;
    use cm_core::{Duration, Instant};
    use proptest::prelude::*;

    fn any_datagram() -> impl Strategy<Value = Datagram> {
        prop_oneof![
            (any::<u64>(), any::<u64>(), 0u32..2000, 0u8..8).prop_map(|(seq, ack, len, f)| {
                Datagram::Tcp(TcpSegment {
                    seq,
                    ack,
                    len,
                    flags: Flags::from_bits(f).unwrap_or_default(),
                    ..Default::default()
                })
            }),
            (any::<u64>(), 0u32..2000, any::<u64>()).prop_map(|(seq, len, t)| {
                Datagram::Cbr(CbrPacket {
                    seq,
                    len,
                    sent_at: Instant::from_micros(t),
                })
            }),
            (any::<u64>(), 0u32..2000, any::<u32>(), any::<u64>()).prop_map(|(seq, len, k, t)| {
                Datagram::Audio(AudioPacket {
                    seq,
                    len,
                    encoding_kbps: k,
                    sent_at: Instant::from_micros(t),
                })
            }),
            (any::<[u64; 5]>()).prop_map(|v| {
                Datagram::AudioFeedback(AudioFeedback {
                    highest_seq: v[0],
                    received_count: v[1],
                    received_bytes: v[2],
                    echo_ts: Instant::from_micros(v[3]),
                    echo_delay: Duration::from_micros(v[4]),
                })
            }),
        ]
    }

    proptest! {
        #[test]
        fn round_trips(d in any_datagram()) {
            let mut buf = Vec::new();
            d.encode(&mut buf);
            prop_assert_eq!(Datagram::decode(&buf), Ok(d));
        }

        #[test]
        fn decoding_random_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..120)) {
            let _ = Datagram::decode(&bytes);
        }

        #[test]
        fn decoding_mutated_datagrams_never_panics(d in any_datagram(), i in any::<usize>(), b in any::<u8>()) {
            let mut buf = Vec::new();
            d.encode(&mut buf);
            let i = i % buf.len();
            buf[i] = b;
            let _ = Datagram::decode(&buf);
        }
    }

    #[test]
    fn empty_and_unknown_tags_are_errors() {
        assert!(matches!(
            Datagram::decode(&[]),
            Err(DecodeError::Truncated { .. })
        ));
        assert_eq!(Datagram::decode(&[77]), Err(DecodeError::UnknownTag(77)));
    }
}
