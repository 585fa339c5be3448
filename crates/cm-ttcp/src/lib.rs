//! # cm-ttcp: bulk transfers over real sockets, TCP/CM, Linux TCP, CC-UDP
//!
//! ttcp-style bulk transfers for the real-network experiments
//! (cm-implementation-linux §4.1–4.3): **TCP/CM** — cm-transport's sans-IO
//! [`cm_transport::TcpSender`] in [`cm_transport::CcMode::Cm`], carried in
//! UDP datagrams, its congestion control delegated to the Congestion Manager
//! through libcm — **Linux TCP** with a chosen congestion control, and
//! **CC-UDP** — unreliable datagrams through libcm's
//! [`libcm::ccudp::CcUdpSocket`], the receiving application sending nothing
//! back, so the sender learns loss and RTT from the CM protocol's probes
//! (sigcomm1999 §4.2–4.3) — all with the same API and the same [`Summary`].
//!
//! | module | what |
//! |---|---|
//! | `tcpcm::sender` | the TCP/CM event loop: N connections, one [`libcm::Cm`] |
//! | `tcpcm::receiver` | the TCP/CM receiver: one UDP socket, connections by peer |
//! | `linux_tcp` | Linux TCP sender and receiver (`TCP_CONGESTION`, `TCP_INFO`) |
//! | `ccudp` | CC-UDP: setup and report on a control port, sender, receiver ([`ccudp_config`], [`DRAIN_LIMIT`]) |
//! | [`summary`] | [`Summary`], [`Transport`], [`ProgressSample`], [`TcpCmDetail`], [`CcUdpDetail`] |
//! | [`error`] | [`TtcpError`] |
//! | `spec` | [`SendSpec`], [`Scheduled`], [`ReceiverOptions`], [`CcUdpReceiverOptions`], [`Until`] |
//! | `send` | [`send`] and its group forms ([`send_concurrent`], [`send_scheduled`], ...) |
//! | `receive` | [`Receiver`], [`ReceiverHandle`] |
//! | `payload` | the bytes: zeros, or a file read and written by stream offset |
//! | `outbox` | datagrams of one loop pass sent together: GSO runs, `sendmmsg` batches |
//! | [`bench`](mod@bench) | `cm ttcp bench`: every path on loopback against raw UDP and Linux TCP |
//! | `net`, `sys` | sockets, `TCP_INFO`/`SIOCOUTQ` (clocks: `cm-clock`; formatting: `cm-report`) |
//!
//! ## TCP/CM over UDP (cm-implementation-linux §3.2)
//!
//! Each connection has its own UDP socket connected to the receiver, one
//! [`cm_transport::TcpSender`] and one CM flow opened with
//! `cm.open(Some(local), dst)` ("Connection creation": `connect` calls
//! `cm_open`). The paper's mapping, as the driver implements it:
//!
//! - **`cmapp_send`**: a [`libcm::CmEvent::Send`] grant goes to
//!   `TcpSender::on_grant`, which sends a queued retransmission, else new
//!   data, one MSS per MTU granted (requests ask for up to 88 MTUs, two GSO
//!   runs, split under the CM's `max_request_mtus`), and queues the
//!   matching `cm_notify` itself; the segments join
//!   the connection's outgoing run, then every queued CM call is forwarded.
//! - **TCP input**: every datagram on the socket is decoded and given to
//!   `handle_segment`; RTT samples (RFC 1323 timestamps), new-data ACKs,
//!   the third duplicate ACK (transient loss) and later ones come out of
//!   `poll_cm()` as `cm_update`s and go to the CM in order.
//! - **Timeouts**: `TcpSender::poll_timeout` (its RTO; expiry reports
//!   persistent congestion, `CM_LOST_FEEDBACK`) and the CM's own timers
//!   ([`libcm::Cm::next_timeout`]; daemon mode also polls
//!   [`libcm::Cm::pollable_fd`]).
//!
//! The loop: start the transfers that are due; read **every** datagram
//! waiting on every socket (non-blocking, `recvmmsg`) and feed it in; run
//! expired timers; take every CM event (each grant queues its segments and,
//! in embedded mode, the next grant is usually ready at once, so a window's
//! worth goes out in one pass); retire completed connections (`cm_close`:
//! the macroflow lingers with what it learned, so a later connection starts
//! from it, §4.3); send each connection's queued segments as GSO runs;
//! while data is in flight, let at least min(srtt/8, 1 ms) pass since the
//! pass began (wake-up coalescing, as Linux sizes TSO bursts to about 1 ms;
//! skipped under 200 µs); then `ppoll` the sockets (and the daemon's
//! socket) until the earliest deadline, with nanosecond precision. Daemon
//! mode batches the calls of one pass into one write
//! (`set_autoflush(false)`, flushed before every wait).
//!
//! Wire format: one [`cm_transport::TcpSegment`] per UDP datagram (46-byte
//! header + zero payload). [`TCPCM_MSS`] = 1472 − 46 = 1426 bytes keeps a
//! segment in one 1500-byte IP packet. The MSS is `min(1426, cm.mtu(flow))`;
//! grants are in payload bytes. The CM's default MTU is 1460, so a grant
//! may exceed one segment; the sender uses 1426 of it and notifies what it
//! sent. For an exact match give the CM [`cm_config`] (MTU 1426).
//! With [`SendSpec::sack`] the receiver's ACKs carry up to 3 SACK blocks
//! (1 + 16 bytes each after the 46-byte header, at most 95 bytes); they are
//! pure ACKs, and data segments never carry blocks, so the MSS is the same
//! with SACK on.
//!
//! Both ends ask for 8 MiB socket buffers (`SO_RCVBUFFORCE` /
//! `SO_SNDBUFFORCE` as root, else capped by `net.core.*mem_max`). The
//! receiver advertises [`ReceiverOptions::rcv_wnd`] (16 MiB) or half the
//! receive buffer the kernel granted, whichever is less (8 MiB as root),
//! so a receiver that falls behind applies flow control instead of
//! dropping runs of segments.
//!
//! ## Batched I/O (cm-udp)
//!
//! Sockets go through [`cm_udp::UdpIo`]. The sender queues the segments of
//! one pass of its loop per connection and sends them as UDP GSO runs (one
//! system call per up to 44 full segments); it reads ACKs by `recvmmsg`.
//! The receiver reads by `recvmmsg` with UDP GRO, handles a whole batch,
//! and sends the batch's ACKs in one `sendmmsg`. It delays ACKs by default
//! ([`DELAYED_ACK`]: every second segment, 40 ms timer, out-of-order data
//! at once; RFC 5681 §4.2); the CM counts acknowledged bytes, so a stretch
//! of two segments per ACK grows the window as one per ACK would.
//! `CM_UDP_OFFLOAD` turns the batching off piece by piece.
//!
//! ## Linux TCP
//!
//! `setsockopt(TCP_CONGESTION)` per socket (`reno`, `cubic`, ...; root may
//! use any algorithm the kernel has). SACK, timestamps and the initial
//! window are per-namespace sysctls (`net.ipv4.tcp_sack`, ...) and the
//! route's `initcwnd`: set them in the namespace, not here. The sender
//! writes everything, shuts its side down and reads until EOF; the receiver
//! closes after its EOF, so the sender's time, like TCP/CM's, runs from
//! `connect()` until the receiver has every byte. Retransmissions come from
//! `TCP_INFO` (`tcpi_total_retrans`), progress from `SIOCOUTQ`.
//!
//! ## CC-UDP
//!
//! The receiver listens on a UDP port for control messages only: a sender
//! announces its data socket (HELLO), the receiver connects a fresh
//! receiving `CcUdpSocket` to it and answers with that socket's port
//! (READY); the data flows between the two sockets, and at the end the
//! receiver reports what it got (DONE → REPORT). The receiving socket never
//! sends application data or acknowledgements: its receiver CM answers the
//! sender's handshake and probes. With
//! [`CcUdpReceiverOptions::cm_protocol`] off the receiver is a peer without
//! a receiver CM, and the sender runs on CC-UDP's own acks. Each CC-UDP
//! transfer has an embedded CM of its own ([`ccudp_config`]). `seconds`
//! runs from the first datagram queued until every datagram sent is
//! resolved by the feedback (at most [`DRAIN_LIMIT`] after the last);
//! `bytes` is what the receiver reported.
//!
//! ## Threads and namespaces
//!
//! Sockets belong to the network namespace of the thread that creates them:
//! call [`Receiver::bind`] and the `send*` functions on the thread placed in
//! the namespace. Linux TCP and CC-UDP transfers of [`send_scheduled`] run
//! on threads spawned from the calling thread (they inherit its namespace).
//!
//! ## Measured (this machine: 2 cores, loopback, release build)
//!
//! `cargo run --release -p cm-ttcp --example loopback_bench -- 200`
//! (loopback is CPU-bound: this is per-packet cost, not a network):
//!
//! | 200 MB | throughput | sender CPU s/MB |
//! |---|---|---|
//! | TCP/CM, embedded CM | ≈ 700 Mbit/s | 0.004 |
//! | TCP/CM, CM daemon | ≈ 270 Mbit/s | 0.015 (+ the daemon's) |
//! | Linux TCP reno (64 KB GSO segments) | ≈ 21 Gbit/s | 0.0001 |
//!
//! Over a cm-netem path (100 Mbit/s tbf, 5 ms each way, 250 KB queue),
//! 40 MB: TCP/CM ≈ 84 Mbit/s vs Linux reno ≈ 95 Mbit/s. TCP/CM's steady
//! state is the line rate (95 Mbit/s per 100 ms sample); the deficit is the
//! start: slow start overshoots the queue, and NewReno without SACK
//! recovers hundreds of losses through an RTO and go-back-N (~0.5 s at
//! near zero), where Linux's SACK recovery does not stall. Not CPU: one
//! sender needs ≈ 20 % of a core at 100 Mbit/s.
//!
//! ## Example
//!
//! ```
//! use cm_ttcp::{Receiver, ReceiverOptions, SendSpec, Transport, cm_config, send};
//!
//! let rx = Receiver::bind("127.0.0.1:0".parse().unwrap(), &Transport::TcpCm, ReceiverOptions::default()).unwrap();
//! let dst = rx.local_addr();
//! let server = rx.spawn();
//! let mut cm = libcm::Cm::embedded(cm_config()).unwrap();
//! let s = send(&SendSpec::new(dst, 1_000_000, Transport::TcpCm), Some(&mut cm)).unwrap();
//! assert_eq!(s.bytes, 1_000_000);
//! println!("{s}"); // tcpcm 1.0 MB in 0.01 s = 800.00 Mbit/s, 0 retransmissions, cpu 0.01 s
//! let received = server.stop().unwrap();
//! assert_eq!(received[0].bytes, 1_000_000);
//! ```
#![warn(missing_docs)]

pub mod bench;
mod ccudp;
pub mod error;
mod linux_tcp;
mod net;
mod outbox;
mod payload;
mod receive;
mod send;
mod spec;
pub mod summary;
mod sys;
mod tcpcm;

use libcm::Cm;

pub use ccudp::{DRAIN_LIMIT, ccudp_config};
pub use error::{Result, TtcpError};
pub use net::SOCKET_BUFFER;
pub use receive::{Receiver, ReceiverHandle};
pub use send::{
    send, send_concurrent, send_observed, send_scheduled, send_scheduled_observed, send_sequence,
};
pub use spec::{
    CcUdpReceiverOptions, DELAYED_ACK, Observer, ReceiverOptions, Scheduled, SendSpec, Until,
};
pub use summary::{CcUdpDetail, ProgressSample, Role, Summary, TcpCmDetail, Transport};
pub use sys::{TcpInfo, tcp_info};

/// Largest UDP payload in one 1500-byte IPv4 packet.
pub const UDP_PAYLOAD_MAX: usize = 1500 - 20 - 8;

/// TCP/CM's MSS: one segment with its encoded header fills a 1472-byte UDP
/// payload (no fragmentation).
pub const TCPCM_MSS: u32 = (UDP_PAYLOAD_MAX - cm_transport::segment::TCP_ENCODED_HEADER) as u32;

/// A CM configuration whose MTU is [`TCPCM_MSS`] (otherwise the default),
/// for embedded CMs running TCP/CM.
pub fn cm_config() -> libcm::Config {
    libcm::Config {
        mtu: libcm::Bytes(u64::from(TCPCM_MSS)),
        ..libcm::Config::default()
    }
}

/// The CM daemon at the default socket if one answers, else an embedded CM
/// with [`cm_config`].
pub fn default_cm() -> Result<Cm> {
    let path = libcm::default_socket_path();
    if path.exists() {
        if let Ok(cm) = Cm::connect(&path) {
            return Ok(cm);
        }
    }
    Ok(Cm::embedded(cm_config())?)
}
