//! The send queue of one buffered flow (`cm_send`,
//! cm-implementation-linux §2.1.2 (i), §3.3): datagrams waiting for the
//! CM's grants, the UDP socket they leave by, and when each left (for RTT
//! samples). [`crate::Cm`]'s `buffered.rs` feeds it and serves grants
//! from it.

use std::collections::VecDeque;
use std::net::{SocketAddr, UdpSocket};

use cm_udp::{MAX_BATCH, Offload, UdpIo};

/// Default cap on queued bytes per buffered flow.
pub const DEFAULT_QUEUE_BYTES: usize = 256 * 1024;

/// Send times kept per buffered flow (for RTT samples).
const SEND_TIMES: usize = 1 << 16;

/// Spare datagram buffers kept for reuse (about a window's worth).
const SPARE_BUFFERS: usize = 256;

/// The send queue of one buffered flow.
#[derive(Debug)]
pub(crate) struct SendQueue {
    /// The socket, with batched sends (cm-udp: GSO, else `sendmmsg`).
    io: UdpIo,
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
    /// MTUs requested from the CM and not granted yet (one per queued
    /// datagram once [`SendQueue::take_unrequested`] counted it).
    requested: usize,
    /// Datagrams sent so far.
    sent: u64,
    /// When recent datagrams left the socket: entry i is datagram
    /// `sent - len + i` (in `send` order).
    sent_times: VecDeque<std::time::Instant>,
}

impl SendQueue {
    /// An empty queue sending on `sock` to `dst`. Fails on a
    /// `CM_UDP_OFFLOAD` setting cm-udp does not know.
    pub(crate) fn new(sock: UdpSocket, dst: SocketAddr) -> std::io::Result<SendQueue> {
        let connected = sock.peer_addr().ok() == Some(dst);
        Ok(SendQueue {
            // Never GRO: the owner reads this socket (or a clone of it)
            // one datagram per call.
            io: UdpIo::with_offload(
                sock,
                Offload {
                    gro: false,
                    ..Offload::from_env()?
                },
            )?,
            dst,
            connected,
            queue: VecDeque::new(),
            spare: Vec::new(),
            queued_bytes: 0,
            limit: DEFAULT_QUEUE_BYTES,
            requested: 0,
            sent: 0,
            sent_times: VecDeque::new(),
        })
    }

    /// Queue one datagram of `len` bytes that `fill` writes in place (no
    /// copy of its own). `fill` must write every byte: the buffer is a
    /// reused one and holds an earlier datagram's bytes (or zeros). False
    /// (nothing queued) when it would pass the limit of a non-empty queue.
    pub(crate) fn push_with(&mut self, len: usize, fill: impl FnOnce(&mut [u8])) -> bool {
        if self.queued_bytes + len > self.limit && !self.queue.is_empty() {
            return false;
        }
        let mut buf = self.spare.pop().unwrap_or_default();
        // A reused buffer of the same length is not written here: the
        // datagram is written once, by `fill`.
        buf.resize(len, 0);
        fill(&mut buf);
        self.queued_bytes += len;
        self.queue.push_back(buf);
        true
    }

    /// Queued datagrams the CM has no request for yet, now counted as
    /// requested: the caller asks for that many MTUs.
    pub(crate) fn take_unrequested(&mut self) -> usize {
        let k = self.queue.len().saturating_sub(self.requested);
        self.requested += k;
        k
    }

    /// Bytes queued and not yet sent.
    pub(crate) fn queued_bytes(&self) -> usize {
        self.queued_bytes
    }

    /// Datagrams sent so far.
    pub(crate) fn sent(&self) -> u64 {
        self.sent
    }

    /// Turn off the batching paths `offload` rules out.
    pub(crate) fn restrict(&mut self, offload: Offload) {
        self.io.restrict(offload);
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
    /// datagrams that fit, in as few system calls as the socket allows.
    /// Returns the bytes sent (for `cm_notify`); what stays queued is asked
    /// for again by [`SendQueue::take_unrequested`].
    pub(crate) fn serve(&mut self, bytes: u64, mtu: u64) -> u64 {
        // The core may answer several one-MTU requests with one grant.
        let answered = usize::try_from((bytes / mtu).max(1)).unwrap_or(usize::MAX);
        self.requested = self.requested.saturating_sub(answered);
        let budget = usize::try_from(bytes).unwrap_or(usize::MAX);
        let mut sent = 0usize;
        loop {
            // The head datagrams within what is left of the grant, as
            // many as one send call moves (a full GSO run, not a run and a
            // remnant).
            let run = self.io.run_len(self.queue.front().map_or(1, Vec::len));
            let mut n = 0;
            let mut size = 0;
            for d in self.queue.iter().take(run) {
                if sent + size + d.len() > budget {
                    break;
                }
                size += d.len();
                n += 1;
            }
            if n == 0 {
                break;
            }
            let (went, bytes) = match self.send_head(n) {
                Ok(k) => (k, self.queue.iter().take(k).map(Vec::len).sum::<usize>()),
                // The kernel's buffer is full: the datagrams stay queued
                // and are asked for again below.
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                // A datagram the network refuses (e.g. unreachable) is
                // dropped from the queue, as a kernel UDP socket would.
                Err(_) => (1, self.queue.front().map_or(0, Vec::len)),
            };
            if went == 0 {
                break;
            }
            sent += bytes;
            self.queued_bytes -= bytes;
            let now = std::time::Instant::now();
            for _ in 0..went {
                self.sent += 1;
                if self.sent_times.len() == SEND_TIMES {
                    self.sent_times.pop_front();
                }
                self.sent_times.push_back(now);
                if let Some(b) = self.queue.pop_front() {
                    if self.spare.len() < SPARE_BUFFERS {
                        self.spare.push(b);
                    }
                }
            }
            if went < n {
                break;
            }
        }
        sent as u64
    }

    /// Send the first `n` queued datagrams, each from its own buffer: one
    /// GSO call when they are of one size (the last may be shorter), else
    /// `sendmmsg` (cm-udp decides). How many went.
    fn send_head(&mut self, n: usize) -> std::io::Result<usize> {
        let dst = (!self.connected).then_some(self.dst);
        let mut bufs: [&[u8]; MAX_BATCH] = [&[]; MAX_BATCH];
        let n = n.min(MAX_BATCH);
        for (b, d) in bufs.iter_mut().zip(self.queue.iter().take(n)) {
            *b = d;
        }
        self.io.send_datagrams(dst, &bufs[..n])
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    /// A queue on a socket connected to a receiver that never reads (the
    /// datagrams only need to leave).
    fn queue() -> (SendQueue, UdpSocket) {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let dst = rx.local_addr().unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        tx.connect(dst).unwrap();
        let mut q = SendQueue::new(tx, dst).unwrap();
        q.io = UdpIo::with_offload(q.io.into_socket(), Offload::ALL).unwrap();
        q.set_limit(usize::MAX);
        (q, rx)
    }

    #[test]
    fn a_grant_leaves_in_full_gso_runs_not_runs_and_remnants() {
        let (mut q, _rx) = queue();
        if q.io.send_path() != cm_udp::SendPath::Gso {
            eprintln!("skipped: this kernel has no UDP GSO");
            return;
        }
        // 106 datagrams of 1216 bytes: two GSO runs of 53. Taking 64 at a
        // time (the most one call of any path moves) made three calls:
        // 53 and 11, then 42.
        for _ in 0..106 {
            assert!(q.push_with(1216, |b| b.fill(7)));
        }
        let sent = q.serve(106 * 1216, 1216);
        assert_eq!(sent, 106 * 1216);
        assert_eq!(q.sent(), 106);
        assert_eq!(q.io.stats().send_calls, 2, "{:?}", q.io.stats());
    }
}
