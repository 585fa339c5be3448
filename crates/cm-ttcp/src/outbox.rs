//! Datagrams queued during one pass of an event loop and sent together
//! through [`cm_udp::UdpIo`]: a [`Run`] to one destination leaves as UDP
//! GSO runs (segments of one size, the last possibly shorter), [`Mixed`]
//! datagrams to many peers (ACKs) leave by `sendmmsg`.

use std::net::SocketAddr;
use std::time::Duration;

use cm_udp::{MAX_BATCH, MAX_GSO_BYTES, UdpIo};
use rustix::event::PollFlags;

use crate::error::{Result, TtcpError};
use crate::net::wait_fd;

/// Datagrams to one destination, back to back.
#[derive(Debug, Default)]
pub(crate) struct Run {
    buf: Vec<u8>,
    /// Size of every datagram of the run but the last.
    stride: usize,
    count: usize,
    /// The last datagram was shorter than `stride`: the run is closed.
    closed: bool,
}

/// What [`Run::flush`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Sent {
    /// Every datagram went.
    All,
    /// The peer refused (ICMP port unreachable); the rest were dropped.
    Refused,
}

impl Run {
    /// Append one datagram written by `write` (which appends to the vector
    /// it is given); sends what is queued first when the new datagram
    /// cannot join the run, and sends the run when it is full.
    pub(crate) fn push(
        &mut self,
        io: &mut UdpIo,
        write: impl FnOnce(&mut Vec<u8>) -> Result<()>,
    ) -> Result<Sent> {
        let start = self.buf.len();
        if let Err(e) = write(&mut self.buf) {
            self.buf.truncate(start);
            return Err(e);
        }
        let len = self.buf.len() - start;
        let mut sent = Sent::All;
        if self.count > 0 && (self.closed || len > self.stride) {
            // Send the run without the new datagram, then start afresh
            // with it.
            let new = self.buf.split_off(start);
            sent = self.flush(io)?;
            self.buf = new;
        }
        if self.count == 0 {
            self.stride = len;
        }
        self.count += 1;
        self.closed = len < self.stride;
        if self.closed || self.count >= MAX_BATCH || self.buf.len() + self.stride > MAX_GSO_BYTES {
            let s = self.flush(io)?;
            if s == Sent::Refused {
                sent = s;
            }
        }
        Ok(sent)
    }

    /// Send everything queued, waiting (briefly, repeatedly) while the
    /// socket's buffer is full.
    pub(crate) fn flush(&mut self, io: &mut UdpIo) -> Result<Sent> {
        let mut at = 0;
        let mut result = Sent::All;
        while at < self.buf.len() {
            let rest = self.buf.get(at..).unwrap_or(&[]);
            match io.send_segments(None, rest, self.stride) {
                Ok(n) => at += n * self.stride,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    wait_fd(io.socket(), PollFlags::OUT, Duration::from_millis(10))?;
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                    result = Sent::Refused;
                    break;
                }
                Err(e) => {
                    self.clear();
                    return Err(TtcpError::io("send", e));
                }
            }
        }
        self.clear();
        Ok(result)
    }

    fn clear(&mut self) {
        self.buf.clear();
        self.count = 0;
        self.closed = false;
    }
}

/// Datagrams of any size to any peers.
#[derive(Debug, Default)]
pub(crate) struct Mixed {
    buf: Vec<u8>,
    /// Each datagram's peer and end offset in `buf`.
    items: Vec<(SocketAddr, usize)>,
}

impl Mixed {
    /// Append one datagram to `to`, written by `write`; sends the batch
    /// when it is full.
    pub(crate) fn push(
        &mut self,
        io: &mut UdpIo,
        to: SocketAddr,
        write: impl FnOnce(&mut Vec<u8>),
    ) -> Result<()> {
        write(&mut self.buf);
        self.items.push((to, self.buf.len()));
        if self.items.len() >= MAX_BATCH {
            self.flush(io)?;
        }
        Ok(())
    }

    /// Send everything queued. A datagram a peer refuses (ICMP port
    /// unreachable from an earlier one) is skipped: not ours to act on.
    pub(crate) fn flush(&mut self, io: &mut UdpIo) -> Result<()> {
        let mut msgs: Vec<(Option<SocketAddr>, &[u8])> = Vec::with_capacity(self.items.len());
        let mut from = 0;
        for &(to, end) in &self.items {
            msgs.push((Some(to), self.buf.get(from..end).unwrap_or(&[])));
            from = end;
        }
        let mut at = 0;
        let mut result = Ok(());
        while at < msgs.len() {
            match io.send_each(msgs.get(at..).unwrap_or(&[])) {
                Ok(n) => at += n,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    if let Err(e) = wait_fd(io.socket(), PollFlags::OUT, Duration::from_millis(10))
                    {
                        result = Err(e);
                        break;
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => at += 1,
                Err(e) => {
                    result = Err(TtcpError::io("send", e));
                    break;
                }
            }
        }
        drop(msgs);
        self.buf.clear();
        self.items.clear();
        result
    }
}
