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
    /// The socket is connected to `dst`: `send`, not `send_to` (the kernel
    /// then reuses the connected route instead of looking one up per
    /// datagram).
    connected: bool,
    queue: VecDeque<Vec<u8>>,
    /// Buffers of sent datagrams, reused for the next ones (no allocation
    /// per datagram in steady state).
    spare: Vec<Vec<u8>>,
    queued_bytes: usize,
    limit: usize,
    /// Requests outstanding at the CM (one per queued datagram).
    requested: usize,
    /// Datagrams sent so far.
    sent: u64,
    /// When recent datagrams left the socket: entry i is datagram
    /// `sent - len + i` (in `send` order).
    sent_times: VecDeque<std::time::Instant>,
}

/// Send times kept per buffered flow (for RTT samples).
const SEND_TIMES: usize = 1 << 16;

impl Cm {
    /// Open a buffered flow: datagrams given to [`Cm::send`] leave `sock`
    /// for `dst` as the CM allows. Keep a clone of the socket
    /// (`try_clone`) to read acknowledgements from it.
    pub fn open_buffered(&mut self, sock: UdpSocket, dst: SocketAddr) -> Result<FlowId, CmError> {
        let src = sock.local_addr().ok();
        let connected = sock.peer_addr().ok() == Some(dst);
        let flow = self.open(src, dst)?;
        self.buffered.insert(
            flow,
            SendQueue {
                sock,
                dst,
                connected,
                queue: VecDeque::new(),
                spare: Vec::new(),
                queued_bytes: 0,
                limit: DEFAULT_QUEUE_BYTES,
                requested: 0,
                sent: 0,
                sent_times: VecDeque::new(),
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
        let mut buf = q.spare.pop().unwrap_or_default();
        buf.clear();
        buf.extend_from_slice(data);
        q.queue.push_back(buf);
        q.queued_bytes += data.len();
        q.requested += 1;
        // Sent at once like any call (batch with `set_autoflush(false)`):
        // an application may well wait on the descriptor before it next
        // dispatches.
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

    /// When the `nth` datagram given to [`Cm::send`] on this flow (counting
    /// from 0) actually left the socket, for RTT samples: time spent
    /// waiting in the queue is not round-trip time (measuring from `send`
    /// inflates the RTT, which slows the pacing, which lengthens the queue).
    /// `None` if it has not been sent yet or is too old (the last 65,536
    /// are kept).
    pub fn buffered_send_time(&self, flow: FlowId, nth: u64) -> Option<std::time::Instant> {
        let q = self.buffered.get(&flow)?;
        let first = q.sent - q.sent_times.len() as u64;
        let i = usize::try_from(nth.checked_sub(first)?).ok()?;
        q.sent_times.get(i).copied()
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
            let mtu = u64::from(self.mtus.get(&flow).copied().unwrap_or(1460).max(1));
            let Some(q) = self.buffered.get_mut(&flow) else {
                i += 1;
                continue;
            };
            self.events.remove(i);
            // The core may answer several one-MTU requests with one grant.
            let answered = usize::try_from((bytes.get() / mtu).max(1)).unwrap_or(usize::MAX);
            q.requested = q.requested.saturating_sub(answered);
            let mut sent = 0u64;
            let budget = usize::try_from(bytes.get()).unwrap_or(usize::MAX);
            while let Some(d) = q.queue.front() {
                if sent as usize + d.len() > budget {
                    break;
                }
                let r = if q.connected {
                    q.sock.send(d)
                } else {
                    q.sock.send_to(d, q.dst)
                };
                match r {
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
                if q.sent_times.len() == SEND_TIMES {
                    q.sent_times.pop_front();
                }
                q.sent_times.push_back(std::time::Instant::now());
                if let Some(b) = q.queue.pop_front() {
                    // Keep up to a window of buffers for reuse.
                    if q.spare.len() < 256 {
                        q.spare.push(b);
                    }
                }
            }
            // Keep one request outstanding per queued datagram.
            let missing = q.queue.len().saturating_sub(q.requested);
            q.requested += missing;
            self.notify(flow, sent)?;
            for _ in 0..missing {
                self.request(flow)?;
            }
        }
        Ok(())
    }
}
