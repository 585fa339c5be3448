//! Frames: a header and a batch of messages (see the crate docs for the
//! layout).

use crate::field::{DecodeError, Reader};
use crate::msg::Message;
use crate::{MAGIC, MAX_FRAME, MAX_MESSAGES, VERSION};

const HEADER: usize = 6;
/// tag + len
const MSG_HEADER: usize = 3;

/// A frame being built: push messages, then [`Frame::finish`].
///
/// ```
/// use cm_ipc::{Frame, ToClient};
/// let mut f = Frame::new();
/// assert!(f.is_empty());
/// f.push(&ToClient::Grant { flow: 1, bytes: 2920 });
/// assert_eq!(f.len(), 1);
/// ```
#[derive(Clone, Debug)]
pub struct Frame {
    buf: Vec<u8>,
    count: u16,
}

impl Default for Frame {
    fn default() -> Self {
        Self::new()
    }
}

impl Frame {
    /// An empty frame.
    pub fn new() -> Self {
        let mut buf = Vec::with_capacity(1024);
        buf.extend_from_slice(&MAGIC.to_le_bytes());
        buf.push(VERSION);
        buf.push(0);
        buf.extend_from_slice(&0u16.to_le_bytes());
        Frame { buf, count: 0 }
    }

    /// Messages in the frame.
    pub fn len(&self) -> usize {
        usize::from(self.count)
    }

    /// No messages yet.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Encoded size so far.
    pub fn byte_len(&self) -> usize {
        self.buf.len()
    }

    /// Whether another message of up to `body` bytes still fits.
    pub fn has_room(&self, body: usize) -> bool {
        usize::from(self.count) < MAX_MESSAGES && self.buf.len() + MSG_HEADER + body <= MAX_FRAME
    }

    /// Append a message. Every message of this protocol is under 256 bytes,
    /// so the caller only needs [`Frame::has_room`] with 256 to stay
    /// inside [`MAX_FRAME`].
    pub fn push<M: Message>(&mut self, m: &M) {
        let at = self.buf.len();
        self.buf.extend_from_slice(&[0, 0, 0]);
        let tag = m.encode_body(&mut self.buf);
        // Bodies are a few dozen bytes (the largest, StatFlow, is < 128).
        let len = u16::try_from(self.buf.len() - at - MSG_HEADER).unwrap_or(u16::MAX);
        self.buf[at] = tag;
        self.buf[at + 1..at + 3].copy_from_slice(&len.to_le_bytes());
        self.count += 1;
    }

    /// The encoded frame; the builder is reset to empty.
    pub fn finish(&mut self) -> Vec<u8> {
        self.buf[4..6].copy_from_slice(&self.count.to_le_bytes());
        let out = std::mem::replace(&mut self.buf, Frame::new().buf);
        self.count = 0;
        out
    }

    /// The encoded frame so far, without resetting (the header's count is
    /// brought up to date).
    pub fn bytes(&mut self) -> &[u8] {
        self.buf[4..6].copy_from_slice(&self.count.to_le_bytes());
        &self.buf
    }

    /// Empty the frame, keeping its allocation.
    pub fn clear(&mut self) {
        self.buf.truncate(HEADER);
        self.count = 0;
    }
}

/// Decode a whole frame of messages of type `M` (untrusted input: errors,
/// never panics).
pub fn decode_frame<M: Message>(bytes: &[u8]) -> Result<Vec<M>, DecodeError> {
    let mut out = Vec::new();
    decode_frame_into(bytes, &mut out)?;
    Ok(out)
}

/// Decode a frame, appending its messages to `out`; on error `out` holds
/// the messages before the bad one.
pub fn decode_frame_into<M: Message>(
    bytes: &[u8],
    out: &mut impl Extend<M>,
) -> Result<(), DecodeError> {
    each_body(bytes, |tag, body| {
        out.extend(Some(M::decode_body(tag, body)?));
        Ok(())
    })
}

/// Decode a frame, handing each message to `f` as it is decoded (no
/// collection in between: the daemon's per-frame path); on error `f` has
/// seen the messages before the bad one. `f` borrows the message where it
/// was decoded: moving a `ToDaemon` (72 bytes) into a by-value argument
/// cost store-forwarding stalls, 6% of the daemon's frame handling
/// (`cargo bench -p cm-daemon --bench calls`).
pub fn decode_frame_each<M: Message>(
    bytes: &[u8],
    mut f: impl FnMut(&M),
) -> Result<(), DecodeError> {
    each_body(bytes, |tag, body| match M::decode_body(tag, body) {
        // Borrowed in place: `?` would move the message out first.
        Ok(ref m) => {
            f(m);
            Ok(())
        }
        Err(e) => Err(e),
    })
}

/// Check a frame's header and hand each message's tag and body to `f`, in
/// order, until one fails.
fn each_body(
    bytes: &[u8],
    mut f: impl FnMut(u8, &[u8]) -> Result<(), DecodeError>,
) -> Result<(), DecodeError> {
    let mut r = Reader::new(bytes);
    let magic = r.u16()?;
    if magic != MAGIC {
        return Err(DecodeError::BadMagic(magic));
    }
    let version = r.u8()?;
    if version != VERSION {
        return Err(DecodeError::Version(version));
    }
    if r.u8()? != 0 {
        return Err(DecodeError::Invalid("flags"));
    }
    let count = usize::from(r.u16()?);
    if count > MAX_MESSAGES || count * MSG_HEADER > r.remaining() {
        return Err(DecodeError::Count(count));
    }
    for _ in 0..count {
        let tag = r.u8()?;
        let len = usize::from(r.u16()?);
        f(tag, r.take(len)?)?;
    }
    match r.remaining() {
        0 => Ok(()),
        n => Err(DecodeError::Trailing(n)),
    }
}
