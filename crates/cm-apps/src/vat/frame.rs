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
}
