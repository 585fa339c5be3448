//! The socket's send path: datagrams built in place in the CM's queue
//! (header and payload, one copy), one k-MTU request per batch, and the
//! grants served by the engine (cm-implementation-linux §3.3).

use std::io;
use std::rc::Rc;
use std::time::Instant as StdInstant;

use cm_core::{FlowId, Instant};

use super::socket::{CcUdpSocket, borrow, cm_err, not_connected, oversized, payload_limit};
use super::wire::{self, DATA_HEADER_LEN, DataHeader};
use crate::{Cm, CmError};

/// The header a datagram goes out with.
enum Header {
    /// The CM protocol's (the peer runs a receiver CM).
    Cm([u8; cm_proto::wire::HEADER_LEN]),
    /// CC-UDP's own data header.
    CcUdp(DataHeader),
}

impl CcUdpSocket {
    /// Queue one datagram for the peer; the CM sends it when the
    /// macroflow's window and rate allow. Returns `buf.len()`. A payload
    /// over [`CcUdpSocket::max_payload`] is refused (`InvalidInput`); a full
    /// queue is [`io::ErrorKind::WouldBlock`] in non-blocking mode and a
    /// wait (driving the CM) in blocking mode.
    pub fn send(&mut self, buf: &[u8]) -> io::Result<usize> {
        let deadline = self.write_timeout.map(|t| StdInstant::now() + t);
        let cm_rc = Rc::clone(&self.cm);
        let mut cm = borrow(&cm_rc)?;
        let flow = self.peer.as_ref().ok_or_else(not_connected)?.flow;
        let max = payload_limit(&mut cm, flow)?;
        if buf.len() > max {
            return Err(oversized(buf.len(), max));
        }
        self.flush_proto(&mut cm)?;
        let mut retried = false;
        loop {
            match self.queue(&mut cm, flow, cm_clock::now(), buf) {
                Ok(()) => break,
                Err(CmError::QueueFull(_)) => {
                    if !retried {
                        // Serving grants may have made room.
                        retried = true;
                        self.drive_with(&mut cm)?;
                        continue;
                    }
                    if self.nonblocking {
                        return Err(io::Error::new(
                            io::ErrorKind::WouldBlock,
                            "CC-UDP send queue full",
                        ));
                    }
                    if deadline.is_some_and(|d| StdInstant::now() >= d) {
                        return Err(io::Error::new(
                            io::ErrorKind::WouldBlock,
                            "CC-UDP send timed out",
                        ));
                    }
                    self.wait_with(&mut cm, deadline)?;
                    self.drive_with(&mut cm)?;
                }
                Err(e) => return Err(cm_err(e)),
            }
        }
        cm.request_queued(flow).map_err(cm_err)?;
        self.drive_with(&mut cm)?;
        Ok(buf.len())
    }

    /// Queue several datagrams for the peer with one clock reading, one
    /// k-MTU request and one pass of the engine for all of them, so that
    /// what the window allows leaves in batches (UDP GSO or `sendmmsg`,
    /// straight from the queue's buffers) instead of one system call and
    /// one CM call each. Returns how many were queued, from the front:
    /// fewer than all when the queue filled (in blocking mode at least
    /// one, after a wait as [`CcUdpSocket::send`] waits). Each payload is
    /// checked as `send` checks it; an oversized one is refused before
    /// anything is queued.
    pub fn send_batch(&mut self, bufs: &[&[u8]]) -> io::Result<usize> {
        let cm_rc = Rc::clone(&self.cm);
        {
            let mut cm = borrow(&cm_rc)?;
            let flow = self.peer.as_ref().ok_or_else(not_connected)?.flow;
            let max = payload_limit(&mut cm, flow)?;
            if let Some(b) = bufs.iter().find(|b| b.len() > max) {
                return Err(oversized(b.len(), max));
            }
            self.flush_proto(&mut cm)?;
            // One timestamp for the batch: its datagrams are queued within
            // microseconds, and the RTT is measured from departure anyway.
            let now = cm_clock::now();
            let mut queued = 0;
            for buf in bufs {
                match self.queue(&mut cm, flow, now, buf) {
                    Ok(()) => queued += 1,
                    Err(CmError::QueueFull(_)) => break,
                    Err(e) => return Err(cm_err(e)),
                }
            }
            if queued > 0 {
                cm.request_queued(flow).map_err(cm_err)?;
                self.drive_with(&mut cm)?;
                return Ok(queued);
            }
        }
        // Not even the first fitted: wait for room as `send` does.
        match bufs.first() {
            Some(b) => self.send(b).map(|_| 1),
            None => Ok(0),
        }
    }

    /// Build the datagram for payload `buf` in the CM's queue of `flow`
    /// (not requested yet: the caller asks with `request_queued`). A
    /// CC-UDP datagram (not the CM protocol's) is counted by the
    /// accounting; one that does not fit gives its header back.
    fn queue(
        &mut self,
        cm: &mut Cm,
        flow: FlowId,
        now: Instant,
        buf: &[u8],
    ) -> Result<(), CmError> {
        let header = self.header(now, buf.len())?;
        let (len, r) = match &header {
            Header::Cm(h) => {
                let len = h.len() + buf.len();
                let r = cm.enqueue_with(flow, len, |out| {
                    out.extend_from_slice(h);
                    out.extend_from_slice(buf);
                });
                (len, r)
            }
            Header::CcUdp(h) => {
                let len = DATA_HEADER_LEN + buf.len();
                (len, cm.enqueue_with(flow, len, |out| h.encode(buf, out)))
            }
        };
        let cm_header = matches!(header, Header::Cm(_));
        if let Err(e) = r {
            self.proto.unqueue(cm_header);
            return Err(e);
        }
        if let (Some(p), false) = (&mut self.peer, cm_header) {
            p.acct.on_queued(len);
        }
        Ok(())
    }

    /// The header for a payload of `len` bytes: the CM protocol's once the
    /// peer negotiated it, else CC-UDP's data header.
    fn header(&mut self, now: Instant, len: usize) -> Result<Header, CmError> {
        let Some(p) = &self.peer else {
            return Err(CmError::Invalid("CcUdpSocket is not connected"));
        };
        let (session, seq) = (p.session, p.acct.next_seq());
        let len32 = u32::try_from(len).unwrap_or(u32::MAX);
        Ok(match self.proto.header_for(now, len32) {
            Some(h) => Header::Cm(h),
            None => Header::CcUdp(DataHeader {
                session,
                seq,
                ts: wire::timestamp(now),
            }),
        })
    }
}
