//! The send queue of one buffered flow (`cm_send`,
//! cm-implementation-linux §2.1.2 (i), §3.3): datagrams waiting for the
//! CM's grants, the UDP socket they leave by, and when each left (for RTT
//! samples). [`crate::Cm`]'s `buffered.rs` feeds it and serves grants
//! from it.

use std::collections::VecDeque;
use std::net::{SocketAddr, UdpSocket};

/// Default cap on queued bytes per buffered flow.
pub const DEFAULT_QUEUE_BYTES: usize = 256 * 1024;

/// Send times kept per buffered flow (for RTT samples).
const SEND_TIMES: usize = 1 << 16;

/// Spare datagram buffers kept for reuse (about a window's worth).
const SPARE_BUFFERS: usize = 256;

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

impl SendQueue {
    /// An empty queue sending on `sock` to `dst`.
    pub(crate) fn new(sock: UdpSocket, dst: SocketAddr) -> SendQueue {
        let connected = sock.peer_addr().ok() == Some(dst);
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
        }
    }

    /// Queue one datagram, counting the request the caller makes for it.
    /// False (nothing queued) when it would pass the limit of a non-empty
    /// queue.
    pub(crate) fn push(&mut self, data: &[u8]) -> bool {
        if self.queued_bytes + data.len() > self.limit && !self.queue.is_empty() {
            return false;
        }
        let mut buf = self.spare.pop().unwrap_or_default();
        buf.clear();
        buf.extend_from_slice(data);
        self.queue.push_back(buf);
        self.queued_bytes += data.len();
        self.requested += 1;
        true
    }

    /// Bytes queued and not yet sent.
    pub(crate) fn queued_bytes(&self) -> usize {
        self.queued_bytes
    }

    /// Datagrams sent so far.
    pub(crate) fn sent(&self) -> u64 {
        self.sent
    }

    /// Set the limit on queued bytes (at least 1).
    pub(crate) fn set_limit(&mut self, bytes: usize) {
        self.limit = bytes.max(1);
    }

    /// When the `nth` datagram queued left the socket, if it is among the
    /// last [`SEND_TIMES`] sent.
    pub(crate) fn send_time(&self, nth: u64) -> Option<std::time::Instant> {
        let first = self.sent - self.sent_times.len() as u64;
        let i = usize::try_from(nth.checked_sub(first)?).ok()?;
        self.sent_times.get(i).copied()
    }

    /// Answer a grant of `bytes` (of `mtu`-sized requests): send the head
    /// datagrams that fit. Returns the bytes sent (for `cm_notify`) and how
    /// many requests to make so that one stays outstanding per queued
    /// datagram.
    pub(crate) fn serve(&mut self, bytes: u64, mtu: u64) -> (u64, usize) {
        // The core may answer several one-MTU requests with one grant.
        let answered = usize::try_from((bytes / mtu).max(1)).unwrap_or(usize::MAX);
        self.requested = self.requested.saturating_sub(answered);
        let mut sent = 0u64;
        let budget = usize::try_from(bytes).unwrap_or(usize::MAX);
        while let Some(d) = self.queue.front() {
            if sent as usize + d.len() > budget {
                break;
            }
            let r = if self.connected {
                self.sock.send(d)
            } else {
                self.sock.send_to(d, self.dst)
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
            self.queued_bytes -= d.len();
            self.sent += 1;
            if self.sent_times.len() == SEND_TIMES {
                self.sent_times.pop_front();
            }
            self.sent_times.push_back(std::time::Instant::now());
            if let Some(b) = self.queue.pop_front() {
                if self.spare.len() < SPARE_BUFFERS {
                    self.spare.push(b);
                }
            }
        }
        // Keep one request outstanding per queued datagram.
        let missing = self.queue.len().saturating_sub(self.requested);
        self.requested += missing;
        (sent, missing)
    }
}
