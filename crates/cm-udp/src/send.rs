//! Sending: GSO runs, `sendmmsg` batches, or one datagram per call.

use std::io;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;

use crate::sys::{self, RawAddr};
use crate::{MAX_BATCH, MAX_GSO_BYTES, SendPath, UdpIo};

impl UdpIo {
    /// Send the datagrams laid back to back in `buf`, each `segment` bytes
    /// but the last (which may be shorter), to `dst` (`None` on a
    /// connected socket).
    ///
    /// Returns how many datagrams the kernel took, from the front; fewer
    /// than all when the send buffer filled or an error followed the first
    /// (the caller sends the rest again). `WouldBlock` when none moved.
    pub fn send_segments(
        &mut self,
        dst: Option<SocketAddr>,
        buf: &[u8],
        segment: usize,
    ) -> io::Result<usize> {
        if segment == 0 || buf.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "send_segments: an empty buffer or a zero segment size",
            ));
        }
        // Each run of up to MAX_BATCH datagrams goes as separate slices of
        // `buf` (one `iovec` each), by GSO where it can.
        let mut sent = 0;
        for chunk in buf.chunks(segment * MAX_BATCH) {
            let mut parts: [&[u8]; MAX_BATCH] = [&[]; MAX_BATCH];
            let mut n = 0;
            for (p, d) in parts.iter_mut().zip(chunk.chunks(segment)) {
                *p = d;
                n += 1;
            }
            match self.send_datagrams(dst, &parts[..n]) {
                Ok(k) => {
                    sent += k;
                    if k < n {
                        break;
                    }
                }
                // What went is reported; the error comes again on the
                // caller's next call if it persists.
                Err(_) if sent > 0 => break,
                Err(e) => return Err(e),
            }
        }
        Ok(sent)
    }

    /// Send each datagram of `msgs` to its own destination (`None` on a
    /// connected socket), in order; sizes may differ. Returns how many
    /// went, from the front, as [`UdpIo::send_segments`] does.
    pub fn send_each(&mut self, msgs: &[(Option<SocketAddr>, &[u8])]) -> io::Result<usize> {
        let mut sent = 0;
        for chunk in msgs.chunks(MAX_BATCH) {
            let mut addrs = [None; MAX_BATCH];
            for (i, (dst, _)) in chunk.iter().enumerate() {
                addrs[i] = dst.map(RawAddr::new);
            }
            let mut raw: [(Option<&RawAddr>, &[u8]); MAX_BATCH] = [(None, &[]); MAX_BATCH];
            for (i, (_, data)) in chunk.iter().enumerate() {
                raw[i] = (addrs[i].as_ref(), data);
            }
            match self.send_raw(&raw[..chunk.len()]) {
                Ok(k) => {
                    sent += k;
                    if k < chunk.len() {
                        break;
                    }
                }
                Err(_) if sent > 0 => break,
                Err(e) => return Err(e),
            }
        }
        Ok(sent)
    }

    /// Send the datagrams of `bufs` to `dst` (`None` on a connected
    /// socket), in order, without first copying them together: one GSO
    /// send per run (an `iovec` per datagram) when every datagram but the
    /// last has the first one's size, else `sendmmsg`. Returns how many
    /// went, from the front, as [`UdpIo::send_segments`] does.
    pub fn send_datagrams(&mut self, dst: Option<SocketAddr>, bufs: &[&[u8]]) -> io::Result<usize> {
        let Some(first) = bufs.first().map(|b| b.len()) else {
            return Ok(0);
        };
        let addr = dst.map(RawAddr::new);
        let last = bufs.len() - 1;
        let uniform = first > 0
            && bufs
                .iter()
                .enumerate()
                .all(|(i, b)| b.len() == first || (i == last && !b.is_empty() && b.len() < first));
        if self.path == SendPath::Gso && bufs.len() > 1 && uniform {
            if let Ok(seg16) = u16::try_from(first) {
                match self.send_gso_vectored(addr.as_ref(), bufs, first, seg16) {
                    Ok(n) => return Ok(n),
                    Err(e) if gso_refusal(&e) => {
                        self.stats.gso_refused += 1;
                        self.path = self.fallback();
                    }
                    Err(e) => return Err(e),
                }
            }
        }
        let mut sent = 0;
        for chunk in bufs.chunks(MAX_BATCH) {
            let mut raw: [(Option<&RawAddr>, &[u8]); MAX_BATCH] = [(None, &[]); MAX_BATCH];
            for (r, b) in raw.iter_mut().zip(chunk) {
                *r = (addr.as_ref(), b);
            }
            match self.send_raw(&raw[..chunk.len()]) {
                Ok(k) => {
                    sent += k;
                    if k < chunk.len() {
                        break;
                    }
                }
                Err(_) if sent > 0 => break,
                Err(e) => return Err(e),
            }
        }
        Ok(sent)
    }

    /// GSO sends of `bufs` (one datagram each, all of `segment` bytes but
    /// the last) in runs of at most [`MAX_BATCH`] datagrams and
    /// [`MAX_GSO_BYTES`] bytes.
    fn send_gso_vectored(
        &mut self,
        addr: Option<&RawAddr>,
        bufs: &[&[u8]],
        segment: usize,
        seg16: u16,
    ) -> io::Result<usize> {
        let per_call = (MAX_GSO_BYTES / segment).clamp(1, MAX_BATCH);
        let mut sent = 0;
        for run in bufs.chunks(per_call) {
            match self.gso_call(addr, run, seg16, sent)? {
                Some(n) => sent += n,
                None => break,
            }
        }
        if sent == 0 {
            return Err(io::ErrorKind::Interrupted.into());
        }
        Ok(sent)
    }

    /// One GSO call of the datagrams of `iov`, after `before` went in this
    /// batch: `Some(count)` when it went, `None` to stop the batch here
    /// (what went is reported), or the error when nothing went.
    fn gso_call(
        &mut self,
        addr: Option<&RawAddr>,
        iov: &[&[u8]],
        seg16: u16,
        before: usize,
    ) -> io::Result<Option<usize>> {
        let count = iov.len();
        self.stats.send_calls += 1;
        let r = if count > 1 {
            sys::send_gso(self.sock.as_raw_fd(), addr, iov, seg16)
        } else {
            single(&self.sock, addr, iov.first().copied().unwrap_or_default())
        };
        match r {
            Ok(_) => {
                self.stats.datagrams_sent += count as u64;
                Ok(Some(count))
            }
            // Nothing went; this run goes again by the next call.
            Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(None),
            Err(e) if before > 0 && !gso_refusal(&e) => Ok(None),
            Err(e) => {
                if before > 0 {
                    // A refusal after some went: report what went; the
                    // rest goes by the fallback on the next call.
                    self.stats.gso_refused += 1;
                    self.path = self.fallback();
                    return Ok(None);
                }
                Err(e)
            }
        }
    }

    /// One batch of at most [`MAX_BATCH`] datagrams by `sendmmsg` or one
    /// call each.
    fn send_raw(&mut self, msgs: &[(Option<&RawAddr>, &[u8])]) -> io::Result<usize> {
        if msgs.is_empty() {
            return Ok(0);
        }
        // One datagram: a plain `send` (no message vector to build).
        if self.path != SendPath::Single && msgs.len() > 1 {
            self.stats.send_calls += 1;
            match sys::sendmmsg(self.sock.as_raw_fd(), msgs) {
                Ok(n) => {
                    self.stats.datagrams_sent += n as u64;
                    return Ok(n);
                }
                Err(e) if e.raw_os_error() == Some(libc::ENOSYS) => {
                    self.path = SendPath::Single;
                }
                Err(e) => return Err(e),
            }
        }
        let mut sent = 0;
        for (addr, data) in msgs {
            self.stats.send_calls += 1;
            match single(&self.sock, *addr, data) {
                Ok(_) => sent += 1,
                Err(_) if sent > 0 => break,
                Err(e) => return Err(e),
            }
        }
        self.stats.datagrams_sent += sent as u64;
        Ok(sent)
    }
}

/// A GSO send the kernel will not do on this socket or device.
fn gso_refusal(e: &io::Error) -> bool {
    // udp_send_skb: EINVAL for a socket without transmit checksums
    // (SO_NO_CHECK) or too many segments, EIO where the device or an IPsec
    // route cannot segment. EMSGSIZE (a segment over the path MTU) is the
    // caller's error and is not retried.
    matches!(
        e.raw_os_error(),
        Some(libc::EIO | libc::EINVAL | libc::EOPNOTSUPP)
    )
}

/// One datagram by `send` or `send_to`.
fn single(sock: &std::net::UdpSocket, addr: Option<&RawAddr>, data: &[u8]) -> io::Result<usize> {
    match addr.and_then(|a| a.to_std()) {
        Some(to) => sock.send_to(data, to),
        None => sock.send(data),
    }
}
