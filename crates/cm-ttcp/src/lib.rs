//! # cm-ttcp: bulk transfers over real sockets, TCP/CM and Linux TCP
//!
//! ttcp-style bulk transfers for the real-network experiments
//! (cm-implementation-linux §4.1–4.3): **TCP/CM** — cm-transport's sans-IO
//! [`cm_transport::TcpSender`] in [`cm_transport::CcMode::Cm`], carried in
//! UDP datagrams, its congestion control delegated to the Congestion Manager
//! through libcm — and **Linux TCP** with a chosen congestion control, both
//! with the same API and the same [`Summary`].
//!
//! | module | what |
//! |---|---|
//! | `tcpcm::sender` | the TCP/CM event loop: N connections, one [`libcm::Cm`] |
//! | `tcpcm::receiver` | the TCP/CM receiver: one UDP socket, connections by peer |
//! | `linux` | Linux TCP sender and receiver (`TCP_CONGESTION`, `TCP_INFO`) |
//! | [`summary`] | [`Summary`], [`Transport`], [`ProgressSample`] |
//! | [`error`] | [`TtcpError`] |
//! | `payload` | the bytes: zeros, or a file read and written by stream offset |
//! | `net`, `clock`, `sys` | sockets, the µs clock and thread CPU time, `TCP_INFO`/`SIOCOUTQ` |
//!
//! ## TCP/CM over UDP (cm-implementation-linux §3.2)
//!
//! Each connection has its own UDP socket connected to the receiver, one
//! [`cm_transport::TcpSender`] and one CM flow opened with
//! `cm.open(Some(local), dst)` ("Connection creation": `connect` calls
//! `cm_open`). The paper's mapping, as the driver implements it:
//!
//! - **`cmapp_send`**: a [`libcm::CmEvent::Send`] grant goes to
//!   `TcpSender::on_grant`, which sends a queued retransmission, else up to
//!   one MSS of new data, and queues the matching `cm_notify` itself; the
//!   segment goes on the socket, then every queued CM call is forwarded.
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
//! waiting on every socket (non-blocking) and feed it in; run expired
//! timers; take every CM event (each grant sends a segment and, in embedded
//! mode, the next grant is usually ready at once, so a window's worth goes
//! out in one pass); retire completed connections (`cm_close`: the
//! macroflow lingers with what it learned, so a later connection starts
//! from it, §4.3); then `ppoll` the sockets (and the daemon's socket) until
//! the earliest deadline, with nanosecond precision. Daemon mode batches the
//! calls of one pass into one write (`set_autoflush(false)`, flushed before
//! every wait).
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
//! The receiver advertises [`ReceiverOptions::rcv_wnd`] (16 MiB: never the
//! limit) and both ends ask for 8 MiB socket buffers (`SO_RCVBUFFORCE` /
//! `SO_SNDBUFFORCE` as root, else capped by `net.core.*mem_max`).
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
//! ## Threads and namespaces
//!
//! Sockets belong to the network namespace of the thread that creates them:
//! call [`Receiver::bind`] and the `send*` functions on the thread placed in
//! the namespace. Linux TCP transfers of [`send_scheduled`] run on threads
//! spawned from the calling thread (they inherit its namespace).
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

mod clock;
pub mod error;
mod linux;
mod net;
mod payload;
pub mod summary;
mod sys;
mod tcpcm;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use libcm::Cm;
use serde::{Deserialize, Serialize};

pub use clock::epoch;
pub use error::{Result, TtcpError};
pub use net::SOCKET_BUFFER;
pub use summary::{ProgressSample, Role, Summary, TcpCmDetail, Transport, fmt_bytes, fmt_rate};

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

/// Called with (transfer index, sample) as progress samples are taken.
pub type Observer<'a> = &'a mut dyn FnMut(usize, &ProgressSample);

/// One bulk transfer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SendSpec {
    /// The receiver.
    pub dst: SocketAddr,
    /// Bytes to send (> 0).
    pub bytes: u64,
    /// TCP/CM or Linux TCP.
    pub transport: Transport,
    /// Local address to bind (default: any, ephemeral port).
    pub bind: Option<SocketAddr>,
    /// Take a progress sample (bytes acknowledged) this often.
    pub progress_interval: Option<Duration>,
    /// Give up if the connection is not established within this long
    /// (TCP/CM retransmits its SYN after 1, 2, 4 s ...). Default 10 s.
    pub connect_timeout: Duration,
    /// Give up if nothing new is acknowledged for this long. Default 60 s.
    pub idle_timeout: Duration,
    /// Stop after this long even if bytes remain: the summary then counts
    /// what was acknowledged by then and says `complete: false` (for
    /// experiments that run flows for a fixed time). Default: none.
    #[serde(default)]
    pub time_limit: Option<Duration>,
    /// Send this file's contents (the first `bytes` of it) instead of
    /// zeros. See [`SendSpec::file`].
    #[serde(default)]
    pub file: Option<std::path::PathBuf>,
    /// TCP/CM: ask for SACK on the SYN (`cm_transport::TcpConfig::sack`;
    /// RFC 2018 blocks, RFC 6675 recovery). The TCP/CM receiver follows
    /// what the SYN asks for. Linux TCP ignores it (the kernel's
    /// `net.ipv4.tcp_sack` decides). Default false.
    #[serde(default)]
    pub sack: bool,
}

/// The length of the file at `p`.
fn file_len(p: &std::path::Path) -> Result<u64> {
    std::fs::metadata(p)
        .map(|m| m.len())
        .map_err(|e| TtcpError::io(format!("{}", p.display()), e))
}

impl SendSpec {
    /// `bytes` to `dst` over `transport`, default timeouts, no progress.
    pub fn new(dst: SocketAddr, bytes: u64, transport: Transport) -> SendSpec {
        SendSpec {
            dst,
            bytes,
            transport,
            bind: None,
            progress_interval: None,
            connect_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            time_limit: None,
            file: None,
            sack: false,
        }
    }

    /// The whole of the file at `path` to `dst` over `transport`.
    pub fn file(
        dst: SocketAddr,
        path: impl Into<std::path::PathBuf>,
        transport: Transport,
    ) -> Result<SendSpec> {
        let path = path.into();
        let len = file_len(&path)?;
        if len == 0 {
            return Err(TtcpError::Invalid(format!(
                "{} is empty: nothing to send",
                path.display()
            )));
        }
        let mut spec = SendSpec::new(dst, len, transport);
        spec.file = Some(path);
        Ok(spec)
    }

    /// Stopped after `limit` (see [`SendSpec::time_limit`]).
    pub fn time_limit(mut self, limit: Duration) -> SendSpec {
        self.time_limit = Some(limit);
        self
    }

    /// TCP/CM with or without SACK (see [`SendSpec::sack`]).
    pub fn sack(mut self, on: bool) -> SendSpec {
        self.sack = on;
        self
    }

    /// With progress samples every `every`.
    pub fn progress(mut self, every: Duration) -> SendSpec {
        self.progress_interval = Some(every);
        self
    }

    /// With this connect timeout.
    pub fn connect_timeout(mut self, d: Duration) -> SendSpec {
        self.connect_timeout = d;
        self
    }

    /// Check the description.
    pub fn validate(&self) -> Result<()> {
        let bad = |m: &str| Err(TtcpError::Invalid(m.to_owned()));
        if self.bytes == 0 {
            return bad("bytes must be > 0");
        }
        if self.dst.port() == 0 {
            return bad("destination port 0");
        }
        if self.dst.ip().is_unspecified() || self.dst.ip().is_multicast() {
            return Err(TtcpError::Invalid(format!(
                "destination {} is not a unicast address",
                self.dst.ip()
            )));
        }
        if self.connect_timeout.is_zero() || self.idle_timeout.is_zero() {
            return bad("timeouts must be > 0");
        }
        if self.time_limit.is_some_and(|d| d.is_zero()) {
            return bad("time limit must be > 0");
        }
        if let Some(p) = &self.file {
            let len = file_len(p)?;
            if len < self.bytes {
                return Err(TtcpError::Invalid(format!(
                    "{} has {len} bytes, fewer than the {} to send",
                    p.display(),
                    self.bytes
                )));
            }
        }
        if self
            .progress_interval
            .is_some_and(|d| d < Duration::from_millis(1))
        {
            return bad("progress interval must be >= 1 ms");
        }
        if let Transport::LinuxTcp { cc } = &self.transport {
            if cc.is_empty() || cc.len() > 15 || !cc.bytes().all(|b| b.is_ascii_graphic()) {
                return Err(TtcpError::UnknownCongestionControl(cc.clone()));
            }
        }
        Ok(())
    }
}

/// A transfer starting `at` after the group starts.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Scheduled {
    /// Offset from the start of the group.
    pub at: Duration,
    /// The transfer.
    pub spec: SendSpec,
}

/// One transfer. TCP/CM uses `cm` (or [`default_cm`] if `None`); Linux TCP
/// ignores it. The TCP/CM loop batches its calls with
/// `cm.set_autoflush(false)` and leaves `cm` with autoflush on (libcm's
/// default) when it returns.
pub fn send(spec: &SendSpec, cm: Option<&mut Cm>) -> Result<Summary> {
    send_observed(spec, cm, None)
}

/// [`send`], calling `observer` with each progress sample (for a live
/// progress display).
pub fn send_observed(
    spec: &SendSpec,
    cm: Option<&mut Cm>,
    observer: Option<Observer<'_>>,
) -> Result<Summary> {
    let job = Scheduled {
        at: Duration::ZERO,
        spec: spec.clone(),
    };
    let mut v = match send_scheduled_observed(&[job], cm, observer) {
        Ok(v) => v,
        // One transfer: its error without the "transfer 0" wrapper.
        Err(TtcpError::Transfer { source, .. }) => return Err(*source),
        Err(e) => return Err(e),
    };
    v.pop()
        .ok_or_else(|| TtcpError::Invalid("no result".into()))
}

/// Several transfers at once. All TCP/CM transfers run on one loop sharing
/// `cm`, so transfers to the same host share one macroflow; Linux TCP
/// transfers run on their own threads. Summaries in input order; the first
/// failure (by index) is the error.
pub fn send_concurrent(specs: &[SendSpec], cm: Option<&mut Cm>) -> Result<Vec<Summary>> {
    let jobs: Vec<Scheduled> = specs
        .iter()
        .map(|s| Scheduled {
            at: Duration::ZERO,
            spec: s.clone(),
        })
        .collect();
    send_scheduled(&jobs, cm)
}

/// `count` fresh connections of `spec`, started `interval` apart whether or
/// not the previous one finished (they overlap then: cm-implementation-linux
/// Fig 7's 9 retrievals 500 ms apart). TCP/CM connections share `cm`, so a
/// later one starts from the macroflow's learned window.
pub fn send_sequence(
    spec: &SendSpec,
    count: usize,
    interval: Duration,
    cm: Option<&mut Cm>,
) -> Result<Vec<Summary>> {
    let jobs: Vec<Scheduled> = (0..count)
        .map(|i| Scheduled {
            at: interval.saturating_mul(u32::try_from(i).unwrap_or(u32::MAX)),
            spec: spec.clone(),
        })
        .collect();
    send_scheduled(&jobs, cm)
}

/// Transfers with start offsets (the general form of [`send_concurrent`]
/// and [`send_sequence`]).
pub fn send_scheduled(jobs: &[Scheduled], cm: Option<&mut Cm>) -> Result<Vec<Summary>> {
    send_scheduled_observed(jobs, cm, None)
}

/// [`send_scheduled`] with a progress observer (called for the TCP/CM
/// transfers, and for a lone Linux TCP transfer started at once).
pub fn send_scheduled_observed(
    jobs: &[Scheduled],
    cm: Option<&mut Cm>,
    mut observer: Option<Observer<'_>>,
) -> Result<Vec<Summary>> {
    for (index, j) in jobs.iter().enumerate() {
        j.spec.validate().map_err(|e| TtcpError::Transfer {
            index,
            source: Box::new(e),
        })?;
    }
    let mut results: Vec<Option<Result<Summary>>> = (0..jobs.len()).map(|_| None).collect();
    // A lone Linux transfer right now runs on this thread.
    if let [j] = jobs {
        if let (Transport::LinuxTcp { cc }, true) = (&j.spec.transport, j.at.is_zero()) {
            return linux::send(&j.spec, cc, 0, observer).map(|s| vec![s]);
        }
    }
    let t0 = Instant::now();
    let mut threads: Vec<(usize, JoinHandle<Result<Summary>>)> = Vec::new();
    let mut cm_jobs = Vec::new();
    for (index, j) in jobs.iter().enumerate() {
        match &j.spec.transport {
            Transport::LinuxTcp { cc } => {
                let (spec, cc, at) = (j.spec.clone(), cc.clone(), j.at);
                let h = std::thread::Builder::new()
                    .name(format!("ttcp-{index}"))
                    .spawn(move || {
                        std::thread::sleep((t0 + at).saturating_duration_since(Instant::now()));
                        linux::send(&spec, &cc, index, None)
                    })
                    .map_err(|e| TtcpError::io("spawn sender thread", e))?;
                threads.push((index, h));
            }
            Transport::TcpCm => cm_jobs.push(tcpcm::sender::Job {
                index,
                at: j.at.saturating_sub(t0.elapsed()),
                spec: j.spec.clone(),
            }),
        }
    }
    let mut loop_err = None;
    if !cm_jobs.is_empty() {
        let mut own;
        let cm = match cm {
            Some(c) => c,
            None => {
                own = default_cm()?;
                &mut own
            }
        };
        match tcpcm::sender::run(cm, cm_jobs, observer.take()) {
            Ok(rs) => {
                for (i, r) in rs {
                    if let Some(slot) = results.get_mut(i) {
                        *slot = Some(r);
                    }
                }
            }
            Err(e) => loop_err = Some(e),
        }
    }
    for (i, h) in threads {
        let r = h
            .join()
            .unwrap_or_else(|_| Err(TtcpError::Invalid("sender thread panicked".into())));
        if let Some(slot) = results.get_mut(i) {
            *slot = Some(r);
        }
    }
    if let Some(e) = loop_err {
        return Err(e);
    }
    let mut out = Vec::with_capacity(jobs.len());
    for (index, r) in results.into_iter().enumerate() {
        match r {
            Some(Ok(s)) => out.push(s),
            Some(Err(e)) => {
                return Err(TtcpError::Transfer {
                    index,
                    source: Box::new(e),
                });
            }
            None => {
                return Err(TtcpError::Transfer {
                    index,
                    source: Box::new(TtcpError::Invalid("no result".into())),
                });
            }
        }
    }
    Ok(out)
}

/// Receiver parameters.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReceiverOptions {
    /// TCP/CM: the advertised window, bytes (default 16 MiB).
    pub rcv_wnd: u32,
    /// TCP/CM: delayed ACKs (ACK every second segment or after this long);
    /// `None` (default) ACKs every segment.
    pub delayed_ack: Option<Duration>,
    /// Take a progress sample (bytes received) this often.
    pub progress_interval: Option<Duration>,
    /// Forget an unfinished connection silent this long (default 60 s).
    pub idle_timeout: Duration,
    /// Write what arrives to this file (connection n > 1 to `<file>.n`)
    /// instead of discarding it.
    #[serde(default)]
    pub output: Option<std::path::PathBuf>,
}

impl Default for ReceiverOptions {
    fn default() -> Self {
        ReceiverOptions {
            rcv_wnd: 16 << 20,
            delayed_ack: None,
            progress_interval: None,
            idle_timeout: Duration::from_secs(60),
            output: None,
        }
    }
}

/// When [`Receiver::serve`] returns.
#[derive(Clone, Copy, Debug, Default)]
pub struct Until<'a> {
    /// Once this is set.
    pub stop: Option<&'a AtomicBool>,
    /// Once this many connections finished.
    pub count: Option<usize>,
    /// At this time.
    pub deadline: Option<Instant>,
}

impl Until<'_> {
    fn stopped(&self, now: Instant) -> bool {
        self.stop.is_some_and(|s| s.load(Ordering::Relaxed))
            || self.deadline.is_some_and(|d| now >= d)
    }
}

enum Inner {
    TcpCm(tcpcm::receiver::UdpReceiver),
    Linux(linux::TcpReceiverLoop),
}

/// The receiving end of either transport.
pub struct Receiver {
    inner: Inner,
}

impl std::fmt::Debug for Receiver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Receiver")
            .field("local", &self.local_addr())
            .finish()
    }
}

impl Receiver {
    /// Bind `addr` (port 0: any free port) for `transport`: a UDP socket
    /// for TCP/CM, a TCP listener for Linux TCP (its algorithm only governs
    /// the ACK direction).
    pub fn bind(
        addr: SocketAddr,
        transport: &Transport,
        opts: ReceiverOptions,
    ) -> Result<Receiver> {
        if opts.rcv_wnd == 0 {
            return Err(TtcpError::Invalid("receive window must be > 0".into()));
        }
        let inner = match transport {
            Transport::TcpCm => Inner::TcpCm(tcpcm::receiver::UdpReceiver::bind(addr, opts)?),
            Transport::LinuxTcp { cc } => {
                Inner::Linux(linux::TcpReceiverLoop::bind(addr, cc, opts)?)
            }
        };
        Ok(Receiver { inner })
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        match &self.inner {
            Inner::TcpCm(r) => r.local_addr(),
            Inner::Linux(r) => r.local_addr(),
        }
    }

    /// Receive until `until` says stop; `on_done` sees each summary as its
    /// connection ends. Returns every summary (unfinished connections at
    /// the stop are reported with `complete: false`).
    pub fn serve(
        &mut self,
        until: &Until<'_>,
        on_done: &mut dyn FnMut(&Summary),
    ) -> Result<Vec<Summary>> {
        match &mut self.inner {
            Inner::TcpCm(r) => r.serve(until, on_done),
            Inner::Linux(r) => r.serve(until, on_done),
        }
    }

    /// Receive until `stop` is set.
    pub fn serve_until(&mut self, stop: &AtomicBool) -> Result<Vec<Summary>> {
        let until = Until {
            stop: Some(stop),
            ..Until::default()
        };
        self.serve(&until, &mut |_| {})
    }

    /// Receive until `count` connections finished or `timeout` passed.
    pub fn serve_count(&mut self, count: usize, timeout: Option<Duration>) -> Result<Vec<Summary>> {
        let until = Until {
            count: Some(count),
            deadline: timeout.map(|t| Instant::now() + t),
            ..Until::default()
        };
        self.serve(&until, &mut |_| {})
    }

    /// Serve on a new thread (spawned from this one, so in its network
    /// namespace) until [`ReceiverHandle::stop`].
    pub fn spawn(mut self) -> ReceiverHandle {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let thread = std::thread::spawn(move || self.serve_until(&flag));
        ReceiverHandle { stop, thread }
    }
}

/// A receiver serving on its own thread.
#[derive(Debug)]
pub struct ReceiverHandle {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<Result<Vec<Summary>>>,
}

impl ReceiverHandle {
    /// Stop serving and return the summaries.
    pub fn stop(self) -> Result<Vec<Summary>> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread
            .join()
            .unwrap_or_else(|_| Err(TtcpError::Invalid("receiver thread panicked".into())))
    }
}
