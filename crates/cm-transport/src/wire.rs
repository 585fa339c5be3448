//! Byte-level helpers shared by every wire format, and the decode error.
//!
//! All formats are big-endian with a fixed header that starts with
//! [`VERSION`]; payload bytes (content is never carried, only length) follow
//! zero-filled. Decoders check every length before reading and never panic.

use thiserror::Error;

/// The version byte that starts every encoded header.
pub const VERSION: u8 = 1;

/// Largest payload a decoder accepts (a UDP datagram cannot carry more).
pub const MAX_PAYLOAD: u32 = 65_507;

/// Why a byte string is not a valid packet.
#[derive(Clone, Copy, Debug, Error, PartialEq, Eq)]
pub enum DecodeError {
    /// Fewer bytes than the header (or the declared payload) needs.
    #[error("truncated: need {need} bytes, have {have}")]
    Truncated {
        /// Bytes needed.
        need: usize,
        /// Bytes present.
        have: usize,
    },
    /// The version byte is not the supported one (1).
    #[error("unsupported version {0}")]
    BadVersion(u8),
    /// Flag bits outside the defined set.
    #[error("undefined flag bits {0:#04x}")]
    BadFlags(u8),
    /// A datagram tag byte no variant uses.
    #[error("unknown datagram tag {0}")]
    UnknownTag(u8),
    /// More bytes than the header and its declared payload.
    #[error("length mismatch: header declares {declared} bytes, datagram has {actual}")]
    LengthMismatch {
        /// Header plus declared payload.
        declared: usize,
        /// Bytes present.
        actual: usize,
    },
    /// SACK blocks that are not 1 to 3 non-empty ranges.
    #[error("malformed SACK blocks")]
    BadSack,
    /// A declared payload longer than `MAX_PAYLOAD`.
    #[error("payload of {0} bytes exceeds the maximum")]
    PayloadTooLong(u32),
}

/// A bounds-checked big-endian reader.
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    fn take<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let end = self.pos.saturating_add(N);
        let slice = self.buf.get(self.pos..end).ok_or(DecodeError::Truncated {
            need: end,
            have: self.buf.len(),
        })?;
        let mut out = [0u8; N];
        out.copy_from_slice(slice);
        self.pos = end;
        Ok(out)
    }

    pub(crate) fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.take::<1>()?[0])
    }
    pub(crate) fn u16(&mut self) -> Result<u16, DecodeError> {
        Ok(u16::from_be_bytes(self.take()?))
    }
    pub(crate) fn u32(&mut self) -> Result<u32, DecodeError> {
        Ok(u32::from_be_bytes(self.take()?))
    }
    pub(crate) fn u64(&mut self) -> Result<u64, DecodeError> {
        Ok(u64::from_be_bytes(self.take()?))
    }

    /// Check the version byte.
    pub(crate) fn version(&mut self) -> Result<(), DecodeError> {
        match self.u8()? {
            VERSION => Ok(()),
            v => Err(DecodeError::BadVersion(v)),
        }
    }

    /// Consume a zero-filled payload of `len` bytes that must end the input.
    pub(crate) fn payload(&mut self, len: u32) -> Result<(), DecodeError> {
        if len > MAX_PAYLOAD {
            return Err(DecodeError::PayloadTooLong(len));
        }
        let declared = self.pos + len as usize;
        let actual = self.buf.len();
        if actual < declared {
            return Err(DecodeError::Truncated {
                need: declared,
                have: actual,
            });
        }
        if actual > declared {
            return Err(DecodeError::LengthMismatch { declared, actual });
        }
        self.pos = declared;
        Ok(())
    }
}

/// Append `len` zero bytes (the payload stand-in).
pub(crate) fn zeros(buf: &mut Vec<u8>, len: u32) {
    buf.resize(buf.len() + len as usize, 0);
}
