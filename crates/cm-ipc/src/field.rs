//! Bounds-checked little-endian reading and writing of message fields.
//! Decoding untrusted bytes never panics: every read checks its length.

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// Why bytes could not be decoded.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// The input ended inside a field.
    #[error("truncated: needed {needed} more bytes")]
    Truncated {
        /// Bytes missing.
        needed: usize,
    },
    /// The frame does not start with the protocol magic.
    #[error("bad magic {0:#06x}")]
    BadMagic(u16),
    /// The frame is of another protocol version.
    #[error("unsupported protocol version {0}")]
    Version(u8),
    /// A message tag this side does not know.
    #[error("unknown message tag {0:#04x}")]
    UnknownTag(u8),
    /// A field holds a value outside its domain.
    #[error("invalid field: {0}")]
    Invalid(&'static str),
    /// A message body is longer than its fields.
    #[error("{0} trailing bytes in a message")]
    Trailing(usize),
    /// The frame claims more messages than allowed or present.
    #[error("bad message count {0}")]
    Count(usize),
}

/// A cursor over untrusted bytes. Its small reads are `#[inline]`: called,
/// each returned a `Result` with a `DecodeError` (24 bytes) through memory,
/// and reading it back stalled; inlined, the daemon's cost per ALF packet
/// fell by a quarter (`cargo bench -p cm-daemon --bench calls`: 261 to
/// 196 ns).
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    #[inline]
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Reader { buf }
    }

    #[inline]
    pub(crate) fn remaining(&self) -> usize {
        self.buf.len()
    }

    #[inline]
    pub(crate) fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if self.buf.len() < n {
            return Err(DecodeError::Truncated {
                needed: n - self.buf.len(),
            });
        }
        let (head, tail) = self.buf.split_at(n);
        self.buf = tail;
        Ok(head)
    }

    #[inline]
    fn array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }

    #[inline]
    pub(crate) fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.array::<1>()?[0])
    }
    #[inline]
    pub(crate) fn u16(&mut self) -> Result<u16, DecodeError> {
        Ok(u16::from_le_bytes(self.array()?))
    }
    #[inline]
    pub(crate) fn u32(&mut self) -> Result<u32, DecodeError> {
        Ok(u32::from_le_bytes(self.array()?))
    }
    #[inline]
    pub(crate) fn u64(&mut self) -> Result<u64, DecodeError> {
        Ok(u64::from_le_bytes(self.array()?))
    }
    #[inline]
    pub(crate) fn i64(&mut self) -> Result<i64, DecodeError> {
        Ok(i64::from_le_bytes(self.array()?))
    }
    #[inline]
    pub(crate) fn f64(&mut self) -> Result<f64, DecodeError> {
        Ok(f64::from_le_bytes(self.array()?))
    }
    #[inline]
    pub(crate) fn bool(&mut self) -> Result<bool, DecodeError> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(DecodeError::Invalid("bool")),
        }
    }

    pub(crate) fn ip(&mut self) -> Result<IpAddr, DecodeError> {
        match self.u8()? {
            4 => Ok(IpAddr::V4(Ipv4Addr::from(self.array::<4>()?))),
            6 => Ok(IpAddr::V6(Ipv6Addr::from(self.array::<16>()?))),
            _ => Err(DecodeError::Invalid("address family")),
        }
    }

    pub(crate) fn sockaddr(&mut self) -> Result<SocketAddr, DecodeError> {
        let ip = self.ip()?;
        let port = self.u16()?;
        Ok(SocketAddr::new(ip, port))
    }

    pub(crate) fn opt_sockaddr(&mut self) -> Result<Option<SocketAddr>, DecodeError> {
        if self.bool()? {
            Ok(Some(self.sockaddr()?))
        } else {
            Ok(None)
        }
    }

    pub(crate) fn opt_ip(&mut self) -> Result<Option<IpAddr>, DecodeError> {
        if self.bool()? {
            Ok(Some(self.ip()?))
        } else {
            Ok(None)
        }
    }

    /// A flag and a u64 that is zero when the flag is clear (one encoding
    /// per value: a nonzero one without its flag is `what`).
    #[inline]
    pub(crate) fn opt_u64(&mut self, what: &'static str) -> Result<Option<u64>, DecodeError> {
        let some = self.bool()?;
        let v = self.u64()?;
        if !some && v != 0 {
            return Err(DecodeError::Invalid(what));
        }
        Ok(some.then_some(v))
    }

    /// A UTF-8 string of at most `max` bytes behind a u16 length (longer
    /// or not UTF-8: `what`).
    pub(crate) fn text(&mut self, max: usize, what: &'static str) -> Result<String, DecodeError> {
        let len = usize::from(self.u16()?);
        if len > max {
            return Err(DecodeError::Invalid(what));
        }
        let bytes = self.take(len)?;
        core::str::from_utf8(bytes)
            .map(str::to_owned)
            .map_err(|_| DecodeError::Invalid(what))
    }
}

/// Appends fields to a byte vector.
pub(crate) struct Writer<'a> {
    pub(crate) buf: &'a mut Vec<u8>,
}

impl Writer<'_> {
    pub(crate) fn u8(&mut self, v: u8) {
        self.buf.push(v);
    }
    pub(crate) fn u16(&mut self, v: u16) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    pub(crate) fn u32(&mut self, v: u32) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    pub(crate) fn u64(&mut self, v: u64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    pub(crate) fn i64(&mut self, v: i64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    pub(crate) fn f64(&mut self, v: f64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    pub(crate) fn bool(&mut self, v: bool) {
        self.buf.push(u8::from(v));
    }
    pub(crate) fn ip(&mut self, ip: IpAddr) {
        match ip {
            IpAddr::V4(a) => {
                self.u8(4);
                self.buf.extend_from_slice(&a.octets());
            }
            IpAddr::V6(a) => {
                self.u8(6);
                self.buf.extend_from_slice(&a.octets());
            }
        }
    }
    pub(crate) fn sockaddr(&mut self, a: SocketAddr) {
        self.ip(a.ip());
        self.u16(a.port());
    }
    pub(crate) fn opt_sockaddr(&mut self, a: Option<SocketAddr>) {
        self.bool(a.is_some());
        if let Some(a) = a {
            self.sockaddr(a);
        }
    }
    pub(crate) fn opt_ip(&mut self, a: Option<IpAddr>) {
        self.bool(a.is_some());
        if let Some(a) = a {
            self.ip(a);
        }
    }
    /// A flag and the value, zero when absent (fixed size).
    pub(crate) fn opt_u64(&mut self, v: Option<u64>) {
        self.bool(v.is_some());
        self.u64(v.unwrap_or(0));
    }
    /// A u16 length and the string's bytes, cut to at most `max` bytes at a
    /// character boundary (so what is written always decodes with the same
    /// `max`; callers keep their strings within it).
    pub(crate) fn text(&mut self, s: &str, max: usize) {
        let s = truncate(s, max.min(usize::from(u16::MAX)));
        self.u16(u16::try_from(s.len()).unwrap_or(u16::MAX));
        self.buf.extend_from_slice(s.as_bytes());
    }
}

/// `s` cut to at most `max` bytes, at a character boundary.
pub(crate) fn truncate(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}
