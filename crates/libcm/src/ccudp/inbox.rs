//! Received payloads waiting for [`CcUdpSocket::recv`](super::CcUdpSocket::recv):
//! a bounded FIFO whose buffers are reused, so a steady stream allocates
//! nothing per datagram.

use std::collections::VecDeque;

/// Spare buffers kept for reuse, at most.
const SPARE: usize = 256;

/// A bounded queue of received payloads.
#[derive(Debug)]
pub(super) struct Inbox {
    queue: VecDeque<Vec<u8>>,
    spare: Vec<Vec<u8>>,
    limit: usize,
}

impl Inbox {
    /// An empty inbox holding at most `limit` payloads.
    pub(super) fn new(limit: usize) -> Inbox {
        Inbox {
            queue: VecDeque::new(),
            spare: Vec::new(),
            limit: limit.max(1),
        }
    }

    /// Keep a copy of `payload`; false (dropped) when full.
    pub(super) fn push(&mut self, payload: &[u8]) -> bool {
        if self.queue.len() >= self.limit {
            return false;
        }
        let mut b = self.spare.pop().unwrap_or_default();
        b.clear();
        b.extend_from_slice(payload);
        self.queue.push_back(b);
        true
    }

    /// Whether another payload would be dropped.
    pub(super) fn is_full(&self) -> bool {
        self.queue.len() >= self.limit
    }

    pub(super) fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// The oldest payload copied into `buf` (truncated if longer):
    /// its length as copied.
    pub(super) fn pop_into(&mut self, buf: &mut [u8]) -> Option<usize> {
        let d = self.queue.pop_front()?;
        let n = d.len().min(buf.len());
        buf[..n].copy_from_slice(&d[..n]);
        if self.spare.len() < SPARE {
            self.spare.push(d);
        }
        Some(n)
    }

    pub(super) fn clear(&mut self) {
        while let Some(d) = self.queue.pop_front() {
            if self.spare.len() < SPARE {
                self.spare.push(d);
            }
        }
    }

    pub(super) fn set_limit(&mut self, limit: usize) {
        self.limit = limit.max(1);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn fifo_bounded_truncating_and_reusing_buffers() {
        let mut i = Inbox::new(2);
        assert!(i.push(b"abc") && i.push(b"defg"));
        assert!(i.is_full() && !i.push(b"x"), "the third is dropped");
        let mut buf = [0u8; 3];
        assert_eq!(i.pop_into(&mut buf), Some(3));
        assert_eq!(&buf, b"abc");
        assert_eq!(i.pop_into(&mut buf), Some(3), "truncated as UDP does");
        assert_eq!(&buf, b"def");
        assert_eq!(i.pop_into(&mut buf), None);
        assert_eq!(i.spare.len(), 2, "both buffers kept for reuse");
        assert!(i.push(b"hi"));
        assert_eq!(i.spare.len(), 1);
        i.clear();
        assert!(i.is_empty());
    }
}
