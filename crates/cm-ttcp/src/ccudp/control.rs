//! The control messages of a CC-UDP transfer, exchanged on the receiver's
//! listening port outside the data path (plain UDP, never congestion
//! controlled; each is one small datagram, repeated until answered).
//!
//! ```text
//! bytes 0..4   magic "cmU1"
//! byte  4      type: 1 HELLO, 2 READY, 3 DONE, 4 REPORT
//! bytes 5..13  nonce (the sender's random transfer id), big-endian
//! HELLO   13..15  the sender's data port
//! READY   13..15  the receiver's data port for this transfer
//! DONE    (nothing more)
//! REPORT  13..21 payload bytes received, 21..29 datagrams received,
//!         29..37 duplicates dropped, 37..41 socket restarts
//! ```
//!
//! HELLO: the sender's data socket is bound to `port` at the HELLO's source
//! address; the receiver binds a fresh `CcUdpSocket` connected to it and
//! answers READY with its port (the same port again for a repeated HELLO).
//! DONE: the sender has finished; the receiver answers REPORT with what it
//! got. Both requests are repeated by the sender until answered, as the
//! path may drop them.

/// The first bytes of every control message.
pub(crate) const MAGIC: [u8; 4] = *b"cmU1";

/// One control message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Control {
    /// Sender → receiver: a new transfer from the sender's data `port`.
    Hello { nonce: u64, port: u16 },
    /// Receiver → sender: send the data to `port`.
    Ready { nonce: u64, port: u16 },
    /// Sender → receiver: the transfer is over.
    Done { nonce: u64 },
    /// Receiver → sender: what arrived.
    Report {
        nonce: u64,
        bytes: u64,
        datagrams: u64,
        duplicates: u64,
        restarts: u32,
    },
}

impl Control {
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut b = MAGIC.to_vec();
        match *self {
            Control::Hello { nonce, port } => {
                b.push(1);
                b.extend_from_slice(&nonce.to_be_bytes());
                b.extend_from_slice(&port.to_be_bytes());
            }
            Control::Ready { nonce, port } => {
                b.push(2);
                b.extend_from_slice(&nonce.to_be_bytes());
                b.extend_from_slice(&port.to_be_bytes());
            }
            Control::Done { nonce } => {
                b.push(3);
                b.extend_from_slice(&nonce.to_be_bytes());
            }
            Control::Report {
                nonce,
                bytes,
                datagrams,
                duplicates,
                restarts,
            } => {
                b.push(4);
                b.extend_from_slice(&nonce.to_be_bytes());
                b.extend_from_slice(&bytes.to_be_bytes());
                b.extend_from_slice(&datagrams.to_be_bytes());
                b.extend_from_slice(&duplicates.to_be_bytes());
                b.extend_from_slice(&restarts.to_be_bytes());
            }
        }
        b
    }

    /// The message in `b`, or `None` for anything else (never a panic).
    pub(crate) fn decode(b: &[u8]) -> Option<Control> {
        if b.get(..4)? != MAGIC {
            return None;
        }
        let kind = *b.get(4)?;
        let nonce = u64::from_be_bytes(b.get(5..13)?.try_into().ok()?);
        let u16_at = |i: usize| -> Option<u16> {
            Some(u16::from_be_bytes(b.get(i..i + 2)?.try_into().ok()?))
        };
        let u64_at = |i: usize| -> Option<u64> {
            Some(u64::from_be_bytes(b.get(i..i + 8)?.try_into().ok()?))
        };
        match kind {
            1 => Some(Control::Hello {
                nonce,
                port: u16_at(13)?,
            }),
            2 => Some(Control::Ready {
                nonce,
                port: u16_at(13)?,
            }),
            3 => Some(Control::Done { nonce }),
            4 => Some(Control::Report {
                nonce,
                bytes: u64_at(13)?,
                datagrams: u64_at(21)?,
                duplicates: u64_at(29)?,
                restarts: u32::from_be_bytes(b.get(37..41)?.try_into().ok()?),
            }),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_message_round_trips_and_garbage_is_refused() {
        let all = [
            Control::Hello {
                nonce: 7,
                port: 5003,
            },
            Control::Ready {
                nonce: u64::MAX,
                port: 1,
            },
            Control::Done { nonce: 0 },
            Control::Report {
                nonce: 9,
                bytes: 10_000_000,
                datagrams: 6868,
                duplicates: 2,
                restarts: 1,
            },
        ];
        for m in all {
            let b = m.encode();
            assert_eq!(Control::decode(&b), Some(m));
            // Every truncation is refused.
            for n in 0..b.len() {
                assert_eq!(Control::decode(&b[..n]), None, "{m:?} cut at {n}");
            }
        }
        assert_eq!(Control::decode(b"cmU1\x09aaaaaaaa"), None);
        assert_eq!(Control::decode(b"xxxx\x01aaaaaaaaaa"), None);
    }
}
