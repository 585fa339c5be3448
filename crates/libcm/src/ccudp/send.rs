//! The socket's send path: datagrams built in place in the CM's queue
//! (header and payload written once, into a reused buffer), one k-MTU
//! request per batch, and the grants served by the engine
//! (cm-implementation-linux §3.3).

use std::io;
use std::rc::Rc;
use std::time::Instant as StdInstant;

use cm_core::{FlowId, Instant};

use super::socket::{CcUdpSocket, borrow, cm_err, not_connected, oversized, payload_limit};
use super::wire::{self, DATA_HEADER_LEN, DataHeader};
use crate::CmError;
use crate::send_queue::SendQueue;

/// Both headers are one size, so a payload limit holds for either.
const HEADER_LEN: usize = DATA_HEADER_LEN;
const _: () = assert!(cm_proto::wire::HEADER_LEN == DATA_HEADER_LEN);

impl CcUdpSocket {
    /// Queue one datagram for the peer; the CM sends it when the
    /// macroflow's window and rate allow. Returns `buf.len()`. A payload
    /// over [`CcUdpSocket::max_payload`] is refused (`InvalidInput`); a full
    /// queue is [`io::ErrorKind::WouldBlock`] in non-blocking mode and a
    /// wait (driving the CM) in blocking mode.
    pub fn send(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.send_with(buf.len(), |b| b.copy_from_slice(buf))?;
        Ok(buf.len())
    }

    /// [`CcUdpSocket::send`] of a payload of `len` bytes that `fill`
    /// writes in place, in the CM's queue: no copy of the payload on the
    /// way to the socket. `fill` must write all `len` bytes (the buffer is
    /// a reused one and holds an earlier datagram's bytes). It is called
    /// once, when there is room.
    pub fn send_with(&mut self, len: usize, fill: impl FnOnce(&mut [u8])) -> io::Result<()> {
        let deadline = self.write_timeout.map(|t| StdInstant::now() + t);
        let cm_rc = Rc::clone(&self.cm);
        let mut cm = borrow(&cm_rc)?;
        let flow = self.peer.as_ref().ok_or_else(not_connected)?.flow;
        let max = payload_limit(&mut cm, flow)?;
        if len > max {
            return Err(oversized(len, max));
        }
        self.flush_proto(&mut cm)?;
        let mut fill = Some(fill);
        let mut retried = false;
        loop {
            let (q, mtu) = cm.buffered_queue(flow).map_err(cm_err)?;
            match self.queue(q, mtu, flow, cm_clock::now(), len, &mut fill) {
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
        self.drive_with(&mut cm)
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
        self.batch(
            bufs.len(),
            |i| bufs.get(i).map_or(0, |b| b.len()),
            |i, b| b.copy_from_slice(bufs.get(i).copied().unwrap_or_default()),
        )
    }

    /// [`CcUdpSocket::send_batch`] of payloads of the lengths `lens` that
    /// `fill(i, buf)` writes in place, as [`CcUdpSocket::send_with`] does:
    /// `fill` writes all of `buf` (payload `i`, `lens[i]` bytes), and is
    /// called for the payloads queued, in order.
    pub fn send_batch_with(
        &mut self,
        lens: &[usize],
        fill: impl FnMut(usize, &mut [u8]),
    ) -> io::Result<usize> {
        self.batch(lens.len(), |i| lens.get(i).copied().unwrap_or(0), fill)
    }

    /// The batch send of `n` payloads, payload `i` of `len(i)` bytes.
    fn batch(
        &mut self,
        n: usize,
        len: impl Fn(usize) -> usize,
        mut fill: impl FnMut(usize, &mut [u8]),
    ) -> io::Result<usize> {
        let cm_rc = Rc::clone(&self.cm);
        {
            let mut cm = borrow(&cm_rc)?;
            let flow = self.peer.as_ref().ok_or_else(not_connected)?.flow;
            let max = payload_limit(&mut cm, flow)?;
            if let Some(l) = (0..n).map(&len).find(|&l| l > max) {
                return Err(oversized(l, max));
            }
            // One timestamp for the batch: its datagrams are queued within
            // microseconds, and the RTT is measured from departure anyway.
            let now = cm_clock::now();
            self.flush_proto_at(&mut cm, now)?;
            let mut queued = 0;
            let (q, mtu) = cm.buffered_queue(flow).map_err(cm_err)?;
            for i in 0..n {
                let mut f = Some(|b: &mut [u8]| fill(i, b));
                match self.queue(q, mtu, flow, now, len(i), &mut f) {
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
        if n == 0 {
            return Ok(0);
        }
        self.send_with(len(0), |b| fill(0, b)).map(|()| 1)
    }

    /// Build the datagram for a payload of `len` bytes, which `fill` (taken
    /// when the datagram is queued) writes, in `q`, the CM's queue of
    /// `flow` with MTU `mtu` (not requested yet: the caller asks with
    /// `request_queued`). A CC-UDP datagram (not the CM protocol's) is
    /// counted by the accounting; one that does not fit gives its header
    /// back.
    fn queue(
        &mut self,
        q: &mut SendQueue,
        mtu: usize,
        flow: FlowId,
        now: Instant,
        len: usize,
        fill: &mut Option<impl FnOnce(&mut [u8])>,
    ) -> Result<(), CmError> {
        let (header, cm_header) = self.header(now, len)?;
        let total = HEADER_LEN + len;
        let pushed = total <= mtu
            && q.push_with(total, |b| {
                let (h, payload) = b.split_at_mut(HEADER_LEN);
                h.copy_from_slice(&header);
                if let Some(f) = fill.take() {
                    f(payload);
                }
            });
        if !pushed {
            self.proto.unqueue(cm_header);
            return Err(if total > mtu {
                CmError::Invalid("datagram larger than the flow's MTU")
            } else {
                CmError::QueueFull(flow)
            });
        }
        if let (Some(p), false) = (&mut self.peer, cm_header) {
            p.acct.on_queued(total);
        }
        Ok(())
    }

    /// The header for a payload of `len` bytes, and whether it is the CM
    /// protocol's (once the peer negotiated it) rather than CC-UDP's data
    /// header.
    fn header(&mut self, now: Instant, len: usize) -> Result<([u8; HEADER_LEN], bool), CmError> {
        let Some(p) = &self.peer else {
            return Err(CmError::Invalid("CcUdpSocket is not connected"));
        };
        let (session, seq) = (p.session, p.acct.next_seq());
        let len32 = u32::try_from(len).unwrap_or(u32::MAX);
        Ok(match self.proto.header_for(now, len32) {
            Some(h) => (h, true),
            None => {
                let h = DataHeader {
                    session,
                    seq,
                    ts: wire::timestamp(now),
                };
                (h.bytes(), false)
            }
        })
    }
}
