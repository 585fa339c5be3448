//! Congestion-controlled UDP sockets (cm-implementation-linux §3.3).
//!
//! [`CcUdpSocket`] is used like a connected [`std::net::UdpSocket`]
//! (`bind`, `connect`, `send`, `recv`, `local_addr`, `peer_addr`,
//! `set_nonblocking`, and its descriptor for poll loops), but:
//!
//! - `send` queues the datagram in the CM's buffered send path
//!   ([`Cm::open_buffered`](crate::Cm::open_buffered) +
//!   [`Cm::send`](crate::Cm::send)): it leaves the socket when the
//!   macroflow's window and pacing allow, so the socket is TCP-friendly
//!   and shares its macroflow with every other flow of the same [`Cm`](crate::Cm) to
//!   the same host. A full queue is [`std::io::ErrorKind::WouldBlock`] in
//!   non-blocking mode and a wait in blocking mode; nothing is dropped
//!   silently.
//! - every datagram carries a 16-byte header (magic and version, session,
//!   sequence number, send time: [`wire`]); the receiving `CcUdpSocket`
//!   strips it, delivers the payload from `recv`, and acknowledges every
//!   second datagram (and whatever is left when it has drained the
//!   socket). Acks are small separate datagrams, not congestion controlled
//!   (like TCP's), cumulative so that a lost ack loses nothing.
//! - the sender turns acks into `cm_update` ([`feedback::Accounting`]):
//!   bytes resolved and received, transient loss for holes with three
//!   later arrivals, persistent loss when a retransmission timeout passes
//!   without an ack (RFC 3124 §4.2 `CM_NO_FEEDBACK`), and an RTT sample
//!   measured from when the datagram left the socket.
//!
//! Both ends are `CcUdpSocket`s connected to each other, and both may send.
//!
//! The wire format and both ends' bookkeeping are sans-IO and live in
//! `cm_transport::ccudp` (re-exported here as [`wire`], [`receiver`] and
//! [`feedback`]), so the simulator runs the same code; this module adds the
//! socket, the clock and the CM calls.
//!
//! ## Ownership
//!
//! The socket holds a [`SharedCm`] (`Rc<RefCell<Cm>>`) and borrows it only
//! inside its own calls, so the application keeps using the same `Cm` for
//! other flows (which then share macroflows with the socket) between those
//! calls. Calling a socket from inside a `Cm` callback would need the `Cm`
//! twice: it fails with an error instead of panicking. Sockets of one `Cm`
//! live on one thread (a `Cm` is not `Send`); another thread makes its own
//! `Cm` (in daemon mode they still share the host's macroflows).
//! Dropping the socket closes its flow and discards what the CM has not
//! sent yet: call [`CcUdpSocket::flush`] first.
//!
//! ## Progress
//!
//! There is no background thread: acks are read, grants served, feedback
//! and timeouts reported whenever the application calls `send`, `recv`,
//! [`CcUdpSocket::drive`], [`CcUdpSocket::flush`] or
//! [`CcUdpSocket::next_timeout`]. Blocking `send` and `recv` drive while
//! they wait. A non-blocking application that only sends must call
//! `drive` from its loop — when the socket's descriptor is readable (acks
//! arrived), after [`CcUdpSocket::next_timeout`], and in daemon mode also
//! when [`Cm::pollable_fd`](crate::Cm::pollable_fd) is readable (grants
//! arrived) — or the queue will not drain. A receiver acknowledges only
//! when it is driven (`recv` or `drive`), so a slow reader slows its
//! sender, and one that stops reading stops it.
//!
//! ## Example
//!
//! ```
//! use std::{cell::RefCell, rc::Rc, time::Duration};
//! use libcm::{Cm, Config, ccudp::CcUdpSocket};
//!
//! let cm = Rc::new(RefCell::new(Cm::embedded(Config::default()).unwrap()));
//! let mut a = CcUdpSocket::bind(&cm, "127.0.0.1:0").unwrap();
//! let mut b = CcUdpSocket::bind(&cm, "127.0.0.1:0").unwrap();
//! a.connect(b.local_addr().unwrap()).unwrap();
//! b.connect(a.local_addr().unwrap()).unwrap();
//! b.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
//!
//! a.send(b"hello").unwrap();
//! let mut buf = [0u8; 1500];
//! // One thread plays both ends here, so let `a` send before `b` blocks.
//! a.flush(Some(Duration::from_secs(2))).unwrap();
//! let n = b.recv(&mut buf).unwrap();
//! assert_eq!(&buf[..n], b"hello");
//! // `a` reads b's ack and reports it to the CM.
//! while a.stats().acked == 0 {
//!     a.drive().unwrap();
//! }
//! assert!(a.estimate().unwrap().srtt.is_some());
//! ```

mod accept;
mod engine;
mod inbox;
mod proto;
mod send;
mod socket;

pub use cm_transport::ccudp::{feedback, receiver, wire};

pub use accept::{Accepting, FirstDatagram, first_datagram};
pub use cm_proto::ProberConfig;
pub use proto::ProtoStats;
pub use socket::{CcUdpSocket, CcUdpStats, DEFAULT_RECV_QUEUE, SharedCm};
