//! [`CcUdpSocket`]: a connected UDP socket whose output the CM paces and
//! whose acknowledgements feed `cm_update` (cm-implementation-linux §3.3).

use std::cell::{RefCell, RefMut};
use std::io;
use std::net::{SocketAddr, ToSocketAddrs, UdpSocket};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::rc::Rc;
use std::time::{Duration as StdDuration, Instant as StdInstant};

use cm_core::{FlowId, PathEstimate};
use cm_udp::{RecvBatch, UdpIo};

use super::feedback::Accounting;
use super::inbox::Inbox;
use super::proto::{Proto, ProtoStats};
use super::receiver::AckState;
use super::wire::DATA_HEADER_LEN;
use crate::{Cm, CmError};

/// A [`Cm`] shared by the sockets and flows of one thread.
pub type SharedCm = Rc<RefCell<Cm>>;

/// Datagrams read from the socket per [`CcUdpSocket::drive`], at most.
pub(super) const READ_BATCH: usize = 256;
/// Receive buffers per batched read (each 64 KiB with GRO).
const RECV_SLOTS: usize = 4;
/// Default number of received payloads held for [`CcUdpSocket::recv`].
pub const DEFAULT_RECV_QUEUE: usize = 1024;

/// Counters of one [`CcUdpSocket`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CcUdpStats {
    /// Data datagrams that left the socket.
    pub sent: u64,
    /// Of those, acknowledged as received.
    pub acked: u64,
    /// Of those, declared lost (transient or timeout).
    pub lost: u64,
    /// Declared lost, then acknowledged after all.
    pub spurious: u64,
    /// Retransmission timeouts (persistent congestion reported).
    pub timeouts: u64,
    /// Datagrams this socket queued whose departure it has not seen yet:
    /// it learns of departures when it is driven, so after another socket
    /// of the same `Cm` served the grants this lags until this one is
    /// driven. [`CcUdpStats::queued_bytes`] is the CM's queue now.
    pub queued: u64,
    /// Bytes (headers included) queued in the CM for this socket's flow,
    /// now.
    pub queued_bytes: u64,
    /// Data datagrams sent and not yet resolved.
    pub in_flight: u64,
    /// Payloads received from the peer (delivered or waiting in the queue).
    pub received: u64,
    /// Duplicate data datagrams dropped.
    pub duplicates: u64,
    /// Data dropped because the receive queue was full (not acknowledged,
    /// so the peer sees it as a loss).
    pub recv_queue_drops: u64,
    /// Datagrams that were not CC-UDP (no header, bad magic, version or
    /// kind, inconsistent ack), dropped.
    pub malformed: u64,
    /// Acks that belong to another session or acknowledge what was never
    /// sent, ignored.
    pub foreign_acks: u64,
    /// Acks sent.
    pub acks_sent: u64,
    /// Acks received.
    pub acks_received: u64,
    /// Acks the kernel would not take (dropped; the next one covers them).
    pub acks_dropped: u64,
    /// ICMP errors reported on the socket (e.g. port unreachable).
    pub icmp_errors: u64,
    /// The CM protocol on this socket (the receiver CM and the prober).
    pub proto: ProtoStats,
}

/// The connection to the peer.
#[derive(Debug)]
pub(super) struct Peer {
    pub(super) addr: SocketAddr,
    pub(super) flow: FlowId,
    pub(super) session: u16,
    pub(super) acct: Accounting,
}

/// A congestion-controlled, connected UDP socket (see the module docs).
#[derive(Debug)]
pub struct CcUdpSocket {
    pub(super) cm: SharedCm,
    pub(super) sock: UdpSocket,
    pub(super) peer: Option<Peer>,
    pub(super) nonblocking: bool,
    pub(super) read_timeout: Option<StdDuration>,
    pub(super) write_timeout: Option<StdDuration>,
    pub(super) rx: AckState,
    pub(super) inbox: Inbox,
    pub(super) stats: CcUdpStats,
    /// The socket again (a duplicate descriptor), for batched reads.
    pub(super) rio: UdpIo,
    /// Buffers of batched reads (taken while a batch is handled).
    pub(super) rbatch: Option<RecvBatch>,
    /// The CM protocol: prober (sending) and receiver CM (receiving).
    pub(super) proto: Proto,
    /// Queued datagrams that have left the socket so far.
    pub(super) departed: u64,
    /// Feedback of the receive batch being read, for one `cm_update`.
    pub(super) folded: Option<cm_core::Feedback>,
}

pub(super) fn cm_err(e: CmError) -> io::Error {
    match e {
        CmError::Io(e) => e,
        CmError::QueueFull(_) => io::Error::new(io::ErrorKind::WouldBlock, e),
        e => io::Error::other(e),
    }
}

/// The largest payload a flow's MTU leaves room for.
pub(super) fn payload_limit(cm: &mut Cm, flow: FlowId) -> io::Result<usize> {
    Ok((cm.mtu(flow).map_err(cm_err)? as usize).saturating_sub(DATA_HEADER_LEN))
}

pub(super) fn oversized(len: usize, max: usize) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("payload of {len} bytes over the {max}-byte limit"),
    )
}

pub(super) fn not_connected() -> io::Error {
    io::Error::new(io::ErrorKind::NotConnected, "CcUdpSocket is not connected")
}

impl CcUdpSocket {
    /// A socket bound to `addr`, using `cm` for congestion control. Connect
    /// it before sending or receiving.
    pub fn bind(cm: &SharedCm, addr: impl ToSocketAddrs) -> io::Result<CcUdpSocket> {
        CcUdpSocket::from_std(cm, UdpSocket::bind(addr)?)
    }

    /// Wraps a socket the caller already has (inherited, or duplicated
    /// from another one): its queued datagrams are kept, and the new
    /// `CcUdpSocket` starts with fresh CM and receiver-CM state. Connect
    /// it before sending or receiving.
    pub fn from_std(cm: &SharedCm, sock: UdpSocket) -> io::Result<CcUdpSocket> {
        // Always non-blocking underneath: blocking calls wait in `poll`
        // so that they can drive the CM and the ack timer meanwhile.
        sock.set_nonblocking(true)?;
        // Reads take up to a batch of datagrams per call, coalesced by GRO
        // where the kernel does it (`CM_UDP_OFFLOAD` can turn either off).
        let rio = UdpIo::new(sock.try_clone()?)?;
        Ok(CcUdpSocket {
            cm: Rc::clone(cm),
            sock,
            peer: None,
            nonblocking: false,
            read_timeout: None,
            write_timeout: None,
            rx: AckState::default(),
            inbox: Inbox::new(DEFAULT_RECV_QUEUE),
            stats: CcUdpStats::default(),
            rio,
            // Room for the largest UDP datagram, as the single 64 KiB
            // buffer before batching had (GRO needs as much anyway).
            rbatch: Some(RecvBatch::new(RECV_SLOTS, 65_536)),
            proto: Proto::new(random_secret()),
            departed: 0,
            folded: None,
        })
    }

    /// [`CcUdpSocket::bind`] to `local` and [`CcUdpSocket::connect`] to
    /// `remote`.
    pub fn open(
        cm: &SharedCm,
        local: impl ToSocketAddrs,
        remote: impl ToSocketAddrs,
    ) -> io::Result<CcUdpSocket> {
        let mut s = CcUdpSocket::bind(cm, local)?;
        s.connect(remote)?;
        Ok(s)
    }

    /// Connect to `addr`: only its datagrams are received, and a CM flow
    /// (in the macroflow of `addr`'s host) paces what is sent. Connecting
    /// again closes the old flow, dropping what it still had queued.
    pub fn connect(&mut self, addr: impl ToSocketAddrs) -> io::Result<()> {
        self.sock.connect(addr)?;
        let addr = self.sock.peer_addr()?;
        let clone = self.sock.try_clone()?;
        let cm_rc = Rc::clone(&self.cm);
        let mut cm = borrow(&cm_rc)?;
        if let Some(old) = self.peer.take() {
            cm.close(old.flow).map_err(cm_err)?;
        }
        let flow = cm.open_buffered(clone, addr).map_err(cm_err)?;
        self.peer = Some(Peer {
            addr,
            flow,
            session: random_session(),
            acct: Accounting::new(),
        });
        self.rx = AckState::default();
        self.inbox.clear();
        let enabled = self.proto.enabled;
        self.proto = Proto::new(random_secret());
        self.proto.enabled = enabled;
        self.departed = 0;
        self.folded = None;
        Ok(())
    }

    /// The CM flow of this socket (for [`Cm::set_weight`], [`Cm::thresh`]
    /// and the like).
    pub fn flow(&self) -> Option<FlowId> {
        self.peer.as_ref().map(|p| p.flow)
    }

    /// The [`Cm`] this socket uses.
    pub fn cm(&self) -> &SharedCm {
        &self.cm
    }

    /// The local address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.sock.local_addr()
    }

    /// The peer's address.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.peer.as_ref().map(|p| p.addr).ok_or_else(not_connected)
    }

    /// In non-blocking mode `send` with a full queue and `recv` with
    /// nothing received return [`io::ErrorKind::WouldBlock`]; in blocking
    /// mode (the default) they wait, driving the CM and the acks.
    pub fn set_nonblocking(&mut self, on: bool) -> io::Result<()> {
        self.nonblocking = on;
        Ok(())
    }

    /// How long a blocking `recv` waits (`None`: for ever); after it,
    /// [`io::ErrorKind::WouldBlock`] as from `std`'s sockets.
    pub fn set_read_timeout(&mut self, t: Option<StdDuration>) -> io::Result<()> {
        self.read_timeout = t;
        Ok(())
    }

    /// How long a blocking `send` waits for queue space (`None`: for ever).
    pub fn set_write_timeout(&mut self, t: Option<StdDuration>) -> io::Result<()> {
        self.write_timeout = t;
        Ok(())
    }

    /// Whether the socket speaks the CM protocol (default: yes): as a
    /// sender it handshakes with the peer and, if the peer answers, sends
    /// with the CM header and learns loss and RTT from probes instead of
    /// acks; as a receiver it answers the peer's handshake and probes.
    /// Turned off, the socket behaves as a peer without a receiver CM.
    /// Set it before the first send.
    pub fn set_cm_protocol(&mut self, on: bool) {
        self.proto.enabled = on;
    }

    /// The CM protocol's timers and probe rate for this socket's sending
    /// side (default [`cm_proto::ProberConfig::default`]: two probes per
    /// RTT, three SYNs 1, 2 and 4 s apart). Set it before the first send.
    pub fn set_probe_config(&mut self, cfg: cm_proto::ProberConfig) {
        self.proto.cfg = cfg;
    }

    /// As the receiver: a preference for the peer's flow to this socket
    /// (the Hints Dispatcher, sigcomm1999 §2 Fig 3), carried back in probe
    /// responses. The sender applies the weight to its flow in its
    /// macroflow's scheduler (`set_weight`); the rate is carried and
    /// reported but not enforced. Takes effect once the peer negotiated
    /// the protocol.
    pub fn set_receiver_hint(&mut self, weight: u16, rate_bytes_per_sec: u32) {
        self.proto.responder.set_default_hint(cm_proto::Hint {
            weight,
            rate: rate_bytes_per_sec,
        });
    }

    /// Turn off UDP batching paths for this socket, both ways (GSO and
    /// `sendmmsg` on send, GRO and `recvmmsg` on receive; see
    /// [`Offload`](crate::Offload)), as `CM_UDP_OFFLOAD` does for the
    /// whole process. Paths are never turned back on. Call it after
    /// [`CcUdpSocket::connect`] (connecting makes a new CM flow).
    pub fn restrict_offload(&mut self, offload: crate::Offload) -> io::Result<()> {
        self.rio.restrict(offload);
        if let Some(p) = &self.peer {
            borrow(&self.cm)?
                .restrict_offload(p.flow, offload)
                .map_err(cm_err)?;
        }
        Ok(())
    }

    /// Cap on bytes (headers included) waiting in the CM's queue for this
    /// socket (libcm's default: [`crate::DEFAULT_QUEUE_BYTES`]).
    pub fn set_send_queue_limit(&mut self, bytes: usize) -> io::Result<()> {
        let flow = self.peer.as_ref().ok_or_else(not_connected)?.flow;
        borrow(&self.cm)?
            .set_queue_limit(flow, bytes)
            .map_err(cm_err)
    }

    /// Cap on received payloads waiting for `recv` (default
    /// [`DEFAULT_RECV_QUEUE`]); beyond it data is dropped unacknowledged.
    pub fn set_recv_queue_limit(&mut self, datagrams: usize) {
        self.inbox.set_limit(datagrams);
    }

    /// The largest payload `send` accepts: the flow's MTU less the header.
    pub fn max_payload(&self) -> io::Result<usize> {
        let flow = self.peer.as_ref().ok_or_else(not_connected)?.flow;
        payload_limit(&mut *borrow(&self.cm)?, flow)
    }

    /// The next payload from the peer, copied into `buf` (truncated if
    /// longer, as UDP does). Returns its length as copied. Blocks (driving
    /// the CM) unless non-blocking.
    pub fn recv(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let deadline = self.read_timeout.map(|t| StdInstant::now() + t);
        if self.peer.is_none() {
            return Err(not_connected());
        }
        let cm_rc = Rc::clone(&self.cm);
        let mut cm = borrow(&cm_rc)?;
        loop {
            if self.inbox.is_empty() {
                self.drive_with(&mut cm)?;
            }
            if let Some(n) = self.inbox.pop_into(buf) {
                return Ok(n);
            }
            if self.nonblocking || deadline.is_some_and(|d| StdInstant::now() >= d) {
                return Err(io::Error::new(
                    io::ErrorKind::WouldBlock,
                    "no CC-UDP datagram ready",
                ));
            }
            self.wait_with(&mut cm, deadline)?;
        }
    }

    /// Make progress without blocking: read acks and data, send acks,
    /// serve the CM's grants (send queued datagrams), report feedback and
    /// timeouts with `cm_update`. An application that only sends
    /// (non-blocking) must call this from its loop, e.g. when the socket's
    /// descriptor is readable or [`CcUdpSocket::next_timeout`] has passed.
    pub fn drive(&mut self) -> io::Result<()> {
        let cm_rc = Rc::clone(&self.cm);
        let mut cm = borrow(&cm_rc)?;
        self.drive_with(&mut cm)
    }

    /// Block until everything queued has left the socket, or `timeout`.
    /// Returns whether the queue is empty.
    pub fn flush(&mut self, timeout: Option<StdDuration>) -> io::Result<bool> {
        let deadline = timeout.map(|t| StdInstant::now() + t);
        let cm_rc = Rc::clone(&self.cm);
        let mut cm = borrow(&cm_rc)?;
        let flow = self.peer.as_ref().ok_or_else(not_connected)?.flow;
        loop {
            self.drive_with(&mut cm)?;
            if cm.backlog(flow).map_err(cm_err)? == 0 {
                return Ok(true);
            }
            if deadline.is_some_and(|d| StdInstant::now() >= d) {
                return Ok(false);
            }
            self.wait_with(&mut cm, deadline)?;
        }
    }

    /// How long the application may wait (on this socket's descriptor,
    /// and in daemon mode also on [`Cm::pollable_fd`]) before it must call
    /// [`CcUdpSocket::drive`]: the sooner of the CM's next timer and this
    /// socket's loss timeout. `None`: no timer is running.
    pub fn next_timeout(&mut self) -> io::Result<Option<StdDuration>> {
        let cm_rc = Rc::clone(&self.cm);
        let mut cm = borrow(&cm_rc)?;
        Ok(self.timeout_with(&mut cm))
    }

    /// `cm_query` for this socket's flow: its share of the path's rate,
    /// the macroflow's smoothed RTT and loss rate.
    pub fn estimate(&self) -> io::Result<PathEstimate> {
        let flow = self.peer.as_ref().ok_or_else(not_connected)?.flow;
        borrow(&self.cm)?.query(flow).map_err(cm_err)
    }

    /// The socket's counters.
    pub fn stats(&self) -> CcUdpStats {
        let mut s = self.stats;
        s.duplicates += self.rx.duplicates;
        if let Some(p) = &self.peer {
            let c = p.acct.counters;
            (s.acked, s.lost, s.spurious, s.timeouts) = (c.acked, c.lost, c.spurious, c.timeouts);
            s.foreign_acks += c.bogus_acks;
            s.in_flight = p.acct.in_flight_bytes().1;
            if let Ok(cm) = self.cm.try_borrow() {
                s.sent = cm.buffered_sent(p.flow).unwrap_or(0);
                s.queued_bytes = cm.backlog(p.flow).map_or(0, |b| b as u64);
            } else {
                s.sent = p.acct.departed();
            }
            s.queued = self.proto.queued.len() as u64;
        }
        s.proto = self.proto.stats();
        // Datagrams resolved by the peer's receiver CM count as acked or
        // lost like those resolved by acks.
        if let Some(pr) = &self.proto.prober {
            s.acked += pr.packets_received();
            s.lost += s.proto.cm_lost;
        }
        s
    }
}

impl Drop for CcUdpSocket {
    /// Closes the CM flow; datagrams still queued in the CM are discarded
    /// (call [`CcUdpSocket::flush`] first to send them).
    fn drop(&mut self) {
        if let (Some(p), Ok(mut cm)) = (&self.peer, self.cm.try_borrow_mut()) {
            let _ = cm.close(p.flow);
        }
    }
}

impl AsFd for CcUdpSocket {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.sock.as_fd()
    }
}

impl AsRawFd for CcUdpSocket {
    fn as_raw_fd(&self) -> RawFd {
        self.sock.as_raw_fd()
    }
}

pub(super) fn borrow(cm: &SharedCm) -> io::Result<RefMut<'_, Cm>> {
    cm.try_borrow_mut().map_err(|_| {
        io::Error::other("the Cm is in use (a CcUdpSocket called from inside a Cm callback?)")
    })
}

/// 64 random bits (the protocol's secret: ISNs and flow numbers).
fn random_secret() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(StdInstant::now().elapsed().as_nanos());
    h.finish()
}

/// A session id nobody can predict across runs (std's hasher keys are
/// random per process and per `RandomState`).
fn random_session() -> u16 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(StdInstant::now().elapsed().as_nanos());
    h.finish() as u16
}
