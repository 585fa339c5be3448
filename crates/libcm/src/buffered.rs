//! Buffered send (`cm_send`, cm-implementation-linux §2.1.2 (i), §3.3): a
//! congestion-controlled UDP socket. Datagrams queue in libcm; each grant
//! the CM issues for the flow sends the head datagram and notifies the CM,
//! so the socket's output is paced by the macroflow's window and rate.
//! The application still reports acknowledgements with [`Cm::update`].

use std::collections::VecDeque;
use std::net::{SocketAddr, UdpSocket};

use cm_core::FlowId;

use crate::error::CmError;
use crate::{Cm, CmEvent};

/// Default cap on queued bytes per buffered flow.
pub const DEFAULT_QUEUE_BYTES: usize = 256 * 1024;

/// The send queue of one buffered flow.
#[derive(Debug)]
pub(crate) struct SendQueue {
    sock: UdpSocket,
    dst: SocketAddr,
    queue: VecDeque<Vec<u8>>,
    queued_bytes: usize,
    limit: usize,
    /// Requests outstanding at the CM (one per queued datagram).
    requested: usize,
    /// Datagrams sent so far.
    sent: u64,
}

impl Cm {
    /// Open a buffered flow: datagrams given to [`Cm::send`] leave `sock`
    /// for `dst` as the CM allows. Keep a clone of the socket
    /// (`try_clone`) to read acknowledgements from it.
    pub fn open_buffered(&mut self, sock: UdpSocket, dst: SocketAddr) -> Result<FlowId, CmError> {
        let src = sock.local_addr().ok();
        let flow = self.open(src, dst)?;
        self.buffered.insert(
            flow,
            SendQueue {
                sock,
                dst,
                queue: VecDeque::new(),
                queued_bytes: 0,
                limit: DEFAULT_QUEUE_BYTES,
                requested: 0,
                sent: 0,
            },
        );
        Ok(flow)
    }

    /// `cm_send(flow, data)`: queue one datagram (at most one MTU; larger
    /// datagrams are refused rather than fragmented). Fails with
    /// [`CmError::QueueFull`] when the flow's queue holds its limit: call
    /// [`Cm::dispatch`] (or wait) and try again.
    pub fn send(&mut self, flow: FlowId, data: &[u8]) -> Result<(), CmError> {
        let mtu = self.mtu(flow)? as usize;
        if data.len() > mtu {
            return Err(CmError::Invalid("datagram larger than the flow's MTU"));
        }
        let q = self
            .buffered
            .get_mut(&flow)
            .ok_or(CmError::NotBuffered(flow))?;
        if q.queued_bytes + data.len() > q.limit && !q.queue.is_empty() {
            return Err(CmError::QueueFull(flow));
        }
        q.queue.push_back(data.to_vec());
        q.queued_bytes += data.len();
        q.requested += 1;
        self.request(flow)
    }

    /// Bytes queued on a buffered flow and not yet sent.
    pub fn backlog(&self, flow: FlowId) -> Result<usize, CmError> {
        self.buffered
            .get(&flow)
            .map(|q| q.queued_bytes)
            .ok_or(CmError::NotBuffered(flow))
    }

    /// Datagrams a buffered flow has sent so far.
    pub fn buffered_sent(&self, flow: FlowId) -> Result<u64, CmError> {
        self.buffered
            .get(&flow)
            .map(|q| q.sent)
            .ok_or(CmError::NotBuffered(flow))
    }

    /// Set the queue limit of a buffered flow, in bytes.
    pub fn set_queue_limit(&mut self, flow: FlowId, bytes: usize) -> Result<(), CmError> {
        let q = self
            .buffered
            .get_mut(&flow)
            .ok_or(CmError::NotBuffered(flow))?;
        q.limit = bytes.max(1);
        Ok(())
    }

    /// Serve grants of buffered flows from their queues (called as events
    /// arrive). A grant with nothing queued is declined.
    pub(crate) fn serve_buffered(&mut self) -> Result<(), CmError> {
        let mut i = 0;
        while i < self.events.len() {
            let CmEvent::Send { flow, bytes } = self.events[i] else {
                i += 1;
                continue;
            };
            let Some(q) = self.buffered.get_mut(&flow) else {
                i += 1;
                continue;
            };
            self.events.remove(i);
            q.requested = q.requested.saturating_sub(1);
            let mut sent = 0u64;
            let budget = usize::try_from(bytes.get()).unwrap_or(usize::MAX);
            while let Some(d) = q.queue.front() {
                if sent as usize + d.len() > budget {
                    break;
                }
                match q.sock.send_to(d, q.dst) {
                    Ok(_) => {}
                    // The kernel's buffer is full: the datagram stays queued
                    // and is asked for again below.
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                    // A datagram the network refuses (e.g. unreachable) is
                    // dropped from the queue, as a kernel UDP socket would.
                    Err(_) => {}
                }
                sent += d.len() as u64;
                q.queued_bytes -= d.len();
                q.sent += 1;
                q.queue.pop_front();
            }
            let rerequest = q.queue.len() > q.requested;
            if rerequest {
                q.requested += 1;
            }
            self.notify(flow, sent)?;
            if rerequest {
                self.request(flow)?;
            }
        }
        Ok(())
    }
}
