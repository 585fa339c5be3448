//! A vat frame on the wire: a magic, the sequence number and the time the
//! frame was made (Unix time, ns), then audio (zeros here) to the frame's
//! size.

/// Bytes of the frame header.
pub const FRAME_HEADER: usize = 20;
const MAGIC: [u8; 4] = *b"VAT1";

/// A decoded frame header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Frame {
    /// Sequence number, from 0.
    pub seq: u64,
    /// When the source made the frame, ns since the Unix epoch.
    pub made_ns: u64,
}

impl Frame {
    /// The frame's bytes, `size` long (at least [`FRAME_HEADER`]).
    pub fn encode(&self, size: usize) -> Vec<u8> {
        let mut b = vec![0u8; size.max(FRAME_HEADER)];
        b[..4].copy_from_slice(&MAGIC);
        b[4..12].copy_from_slice(&self.seq.to_be_bytes());
        b[12..20].copy_from_slice(&self.made_ns.to_be_bytes());
        b
    }

    /// The header of `b`, or `None` if `b` is not a vat frame. Never
    /// panics, whatever the bytes.
    pub fn decode(b: &[u8]) -> Option<Frame> {
        if b.len() < FRAME_HEADER || b[..4] != MAGIC {
            return None;
        }
        let seq = u64::from_be_bytes(b[4..12].try_into().ok()?);
        let made_ns = u64::from_be_bytes(b[12..20].try_into().ok()?);
        Some(Frame { seq, made_ns })
    }
}

/// Bytes of the sender's [`End`] message.
pub const END_BYTES: usize = 12;
const END_MAGIC: [u8; 4] = *b"VATE";

/// The sender's last word, as RTCP's BYE (RFC 3550 §6.6): the source made
/// `made` frames and sends no more, so the receiver can stop now rather
/// than on its idle timer, and count the frames after the last that
/// arrived as lost.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct End {
    /// Frames the source made (sequence numbers `0..made`).
    pub made: u64,
}

impl End {
    /// The message's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(END_BYTES);
        b.extend_from_slice(&END_MAGIC);
        b.extend_from_slice(&self.made.to_be_bytes());
        b
    }

    /// The message in `b`, or `None` if `b` is not one. Never panics.
    pub fn decode(b: &[u8]) -> Option<End> {
        if b.len() != END_BYTES || b[..4] != END_MAGIC {
            return None;
        }
        Some(End {
            made: u64::from_be_bytes(b[4..12].try_into().ok()?),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_garbage() {
        let f = Frame {
            seq: 77,
            made_ns: 1_700_000_000_123_456_789,
        };
        let b = f.encode(160);
        assert_eq!(b.len(), 160);
        assert_eq!(Frame::decode(&b), Some(f));
        assert_eq!(Frame::decode(&b[..19]), None);
        assert_eq!(Frame::decode(b"VAT2 and some more bytes here"), None);
        assert_eq!(Frame::decode(&[]), None);
    }

    #[test]
    fn the_end_message_round_trips_and_is_not_a_frame() {
        let e = End { made: 3000 };
        let b = e.encode();
        assert_eq!(b.len(), END_BYTES);
        assert_eq!(End::decode(&b), Some(e));
        assert_eq!(Frame::decode(&b), None);
        assert_eq!(End::decode(&Frame { seq: 1, made_ns: 2 }.encode(160)), None);
        assert_eq!(End::decode(&b[..11]), None);
        let mut long = b.clone();
        long.push(0);
        assert_eq!(End::decode(&long), None);
    }
}
