//! Buffered send (`cm_send`, cm-implementation-linux §2.1.2 (i), §3.3): a
//! congestion-controlled UDP socket. Datagrams queue in libcm
//! (`send_queue.rs`); each grant the CM issues for the flow sends the head
//! datagram and notifies the CM, so the socket's output is paced by the
//! macroflow's window and rate. The application still reports
//! acknowledgements with [`Cm::update`].

use std::net::{SocketAddr, UdpSocket};

use cm_core::FlowId;

use super::Cm;
use crate::error::CmError;
use crate::event::CmEvent;
use crate::send_queue::SendQueue;

impl Cm {
    /// Open a buffered flow: datagrams given to [`Cm::send`] leave `sock`
    /// for `dst` as the CM allows. Keep a clone of the socket
    /// (`try_clone`) to read acknowledgements from it.
    pub fn open_buffered(&mut self, sock: UdpSocket, dst: SocketAddr) -> Result<FlowId, CmError> {
        let src = sock.local_addr().ok();
        let flow = self.open(src, dst)?;
        let q = match SendQueue::new(sock, dst) {
            Ok(q) => q,
            Err(e) => {
                let _ = self.close(flow);
                return Err(CmError::Io(e));
            }
        };
        self.buffered.insert(flow, q);
        Ok(flow)
    }

    /// `cm_send(flow, data)`: queue one datagram (at most one MTU; larger
    /// datagrams are refused rather than fragmented). Fails with
    /// [`CmError::QueueFull`] when the flow's queue holds its limit: call
    /// [`Cm::dispatch`] (or wait) and try again.
    pub fn send(&mut self, flow: FlowId, data: &[u8]) -> Result<(), CmError> {
        self.enqueue_with(flow, data.len(), |b| b.copy_from_slice(data))?;
        // Sent at once like any call (batch with `set_autoflush(false)`):
        // an application may well wait on the descriptor before it next
        // dispatches.
        self.request_queued(flow)
    }

    /// `cm_send` of several datagrams: each is queued as [`Cm::send`]
    /// queues it, and one k-MTU request covers them all, so the grants
    /// that answer it send them in batches (cm-udp: GSO or `sendmmsg`).
    /// Returns how many were queued, from the front (fewer than all when
    /// the queue filled); [`CmError::QueueFull`] if not even the first
    /// fitted. A datagram over the MTU is refused before any is queued.
    pub fn send_batch(&mut self, flow: FlowId, datagrams: &[&[u8]]) -> Result<usize, CmError> {
        let mtu = self.mtu(flow)? as usize;
        if datagrams.iter().any(|d| d.len() > mtu) {
            return Err(CmError::Invalid("datagram larger than the flow's MTU"));
        }
        let mut queued = 0;
        for d in datagrams {
            match self.enqueue_with(flow, d.len(), |b| b.copy_from_slice(d)) {
                Ok(()) => queued += 1,
                Err(CmError::QueueFull(_)) if queued > 0 => break,
                Err(e) => return Err(e),
            }
        }
        self.request_queued(flow)?;
        Ok(queued)
    }

    /// Queue one datagram of `len` bytes that `fill` writes (every byte)
    /// into the queue's own buffer, without asking the CM for it yet
    /// ([`Cm::request_queued`] does).
    pub(crate) fn enqueue_with(
        &mut self,
        flow: FlowId,
        len: usize,
        fill: impl FnOnce(&mut [u8]),
    ) -> Result<(), CmError> {
        let mtu = self.mtu(flow)? as usize;
        if len > mtu {
            return Err(CmError::Invalid("datagram larger than the flow's MTU"));
        }
        if !self.queue_mut(flow)?.push_with(len, fill) {
            return Err(CmError::QueueFull(flow));
        }
        Ok(())
    }

    /// The queue of a buffered flow and the flow's MTU, looked up once for
    /// a batch of datagrams built in place ([`SendQueue::push_with`]; the
    /// caller keeps each under the MTU, as [`Cm::enqueue_with`] does).
    pub(crate) fn buffered_queue(
        &mut self,
        flow: FlowId,
    ) -> Result<(&mut SendQueue, usize), CmError> {
        let mtu = self.mtu(flow)? as usize;
        Ok((self.queue_mut(flow)?, mtu))
    }

    /// Ask the CM for the flow's queued datagrams that have no request
    /// yet: one k-MTU request (per at most `max_request_mtus` of them).
    pub(crate) fn request_queued(&mut self, flow: FlowId) -> Result<(), CmError> {
        let k = self.queue_mut(flow)?.take_unrequested();
        self.request_mtus_split(flow, u32::try_from(k).unwrap_or(u32::MAX))
    }

    /// Bytes queued on a buffered flow and not yet sent.
    pub fn backlog(&self, flow: FlowId) -> Result<usize, CmError> {
        self.queue(flow).map(SendQueue::queued_bytes)
    }

    /// Datagrams a buffered flow has sent so far.
    pub fn buffered_sent(&self, flow: FlowId) -> Result<u64, CmError> {
        self.queue(flow).map(SendQueue::sent)
    }

    /// When the `nth` datagram given to [`Cm::send`] on this flow (counting
    /// from 0) actually left the socket, for RTT samples: time spent
    /// waiting in the queue is not round-trip time (measuring from `send`
    /// inflates the RTT, which slows the pacing, which lengthens the queue).
    /// `None` if it has not been sent yet or is too old (the last 65,536
    /// are kept).
    pub fn buffered_send_time(&self, flow: FlowId, nth: u64) -> Option<std::time::Instant> {
        self.buffered.get(&flow)?.send_time(nth)
    }

    /// Turn off batching paths for a buffered flow's socket (UDP GSO,
    /// `sendmmsg`; see [`Offload`](crate::Offload)), as `CM_UDP_OFFLOAD`
    /// does for the whole process; paths are never turned back on.
    pub fn restrict_offload(
        &mut self,
        flow: FlowId,
        offload: crate::Offload,
    ) -> Result<(), CmError> {
        self.queue_mut(flow)?.restrict(offload);
        Ok(())
    }

    /// Set the queue limit of a buffered flow, in bytes.
    pub fn set_queue_limit(&mut self, flow: FlowId, bytes: usize) -> Result<(), CmError> {
        self.queue_mut(flow)?.set_limit(bytes);
        Ok(())
    }

    fn queue(&self, flow: FlowId) -> Result<&SendQueue, CmError> {
        self.buffered.get(&flow).ok_or(CmError::NotBuffered(flow))
    }

    fn queue_mut(&mut self, flow: FlowId) -> Result<&mut SendQueue, CmError> {
        self.buffered
            .get_mut(&flow)
            .ok_or(CmError::NotBuffered(flow))
    }

    /// Serve grants of buffered flows from their queues (called as events
    /// arrive). The grants a flow holds at that moment are served together,
    /// so their datagrams leave in one batch (cm-udp), and each grant is
    /// then notified in order with the bytes that went under it. A grant
    /// with nothing queued is declined.
    pub(super) fn serve_buffered(&mut self) -> Result<(), CmError> {
        let mut i = 0;
        let mut grants = Vec::new();
        while i < self.events.len() {
            let CmEvent::Send { flow, .. } = self.events[i] else {
                i += 1;
                continue;
            };
            if !self.buffered.contains_key(&flow) {
                i += 1;
                continue;
            }
            let mtu = u64::from(self.mtus.get(&flow).copied().unwrap_or(1460).max(1));
            // This grant and every later one of the same flow.
            grants.clear();
            let mut j = i;
            while j < self.events.len() {
                match self.events[j] {
                    CmEvent::Send { flow: f, bytes } if f == flow => {
                        self.events.remove(j);
                        grants.push(bytes);
                    }
                    _ => j += 1,
                }
            }
            for &b in &grants {
                self.observe(&CmEvent::Send { flow, bytes: b });
            }
            let Some(q) = self.buffered.get_mut(&flow) else {
                continue;
            };
            let total: u64 = grants.iter().map(|b| b.get()).sum();
            let sent = q.serve(total, mtu);
            let mut left = sent;
            for b in &grants {
                let n = left.min(b.get());
                left -= n;
                self.notify(flow, n)?;
            }
            // Keep one MTU requested per queued datagram.
            self.request_queued(flow)?;
        }
        Ok(())
    }
}
