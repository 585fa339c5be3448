//! Where the data path's time goes (`cm ttcp bench`): one process run
//! moves data on loopback through every path the CM's transports use and
//! through the kernel's own baselines, and measures each end's CPU.
//!
//! - raw UDP, one datagram per `send` (and one per `recv`);
//! - raw UDP with GSO (44 datagrams per `sendmsg`) and GRO + `recvmmsg`;
//! - TCP/CM with an embedded CM and through a private daemon;
//! - CC-UDP (`CcUdpSocket`, 1200-byte payloads) with an embedded CM and
//!   through the daemon, then with GSO off (`sendmmsg`) and with no
//!   batching at all (one datagram per call, as the first raw row);
//! - Linux TCP Reno.
//!
//! Every row runs `repeat` times, round after round (so that a slow
//! spell of the machine touches every row alike), and reports its median
//! run. Each row reports goodput, datagrams per second, and CPU per MB moved
//! for the sender thread, the receiver thread and the process's other
//! threads (the daemon, when there is one). Ratios are against the raw-UDP
//! and Reno rows of the same run, because the machine's speed varies from
//! run to run.

use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use cm_udp::{Offload, RecvBatch, UdpIo};
use libcm::Cm;
use rustix::event::PollFlags;
use serde::Serialize;

use crate::error::{Result, TtcpError};
use crate::net::{SOCKET_BUFFER, big_buffers, connected_udp, wait_fd};
use crate::receive::Receiver;
use crate::send::send;
use crate::spec::{ReceiverOptions, SendSpec};
use crate::summary::{Summary, Transport};

/// Datagram payload of the raw-UDP rows (the and the API-overhead
/// benchmark's 1200 bytes).
pub const RAW_DATAGRAM: usize = 1200;

/// What to move.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BenchConfig {
    /// Bytes per transfer row (TCP/CM, CC-UDP, Linux TCP).
    pub bytes: u64,
    /// Datagrams per raw-UDP row.
    pub datagrams: u64,
    /// The control socket of a daemon for the rows through `cmd` (none:
    /// no such rows).
    pub daemon: Option<std::path::PathBuf>,
    /// Rounds of every row; each row reports its median run.
    pub repeat: usize,
}

impl Default for BenchConfig {
    fn default() -> BenchConfig {
        BenchConfig {
            bytes: 1_000_000_000,
            datagrams: 1_000_000,
            daemon: None,
            repeat: 3,
        }
    }
}

/// One path's figures.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct BenchRow {
    /// Which path.
    pub name: String,
    /// Bytes delivered to the receiving application.
    pub bytes: u64,
    /// Delivered bytes over the sender's time, bits per second.
    pub goodput_bps: f64,
    /// Datagrams (or segments) sent per second.
    pub datagrams_per_s: f64,
    /// Sender thread CPU per MB delivered, milliseconds.
    pub sender_ms_per_mb: f64,
    /// Receiver thread CPU per MB delivered, milliseconds.
    pub receiver_ms_per_mb: f64,
    /// The process's other threads (the daemon) per MB, milliseconds.
    pub other_ms_per_mb: f64,
}

/// Every row, in the order above; a row that cannot run is an error.
/// `daemon_cpu` reads the CPU time of the daemon at `cfg.daemon`, if it
/// runs in another process (its row's "other" CPU is then the daemon's).
pub fn run(
    cfg: &BenchConfig,
    daemon_cpu: &dyn Fn() -> Option<Duration>,
    mut progress: impl FnMut(&BenchRow),
) -> Result<Vec<BenchRow>> {
    // CC-UDP datagrams carry the raw rows' 1200 bytes of payload.
    let ccudp = |offload: Option<&'static str>| Leg {
        transport: Transport::CcUdp,
        payload: Some(RAW_DATAGRAM),
        offload,
    };
    let daemon = cfg.daemon.is_some();
    let specs: Vec<(&str, Row)> = vec![
        ("raw UDP, 1 datagram/call", Row::Raw(Offload::NONE)),
        ("raw UDP, GSO + GRO", Row::Raw(Offload::ALL)),
        (
            "TCP/CM, embedded CM",
            Row::Transfer(Leg::plain(Transport::TcpCm), CmKind::Embedded),
        ),
        (
            "TCP/CM, through cmd",
            Row::Transfer(Leg::plain(Transport::TcpCm), CmKind::Daemon),
        ),
        (
            "CC-UDP, embedded CM",
            Row::Transfer(ccudp(None), CmKind::Own),
        ),
        (
            "CC-UDP, through cmd",
            Row::Transfer(ccudp(None), CmKind::Daemon),
        ),
        (
            "CC-UDP, sendmmsg (no GSO)",
            Row::Transfer(ccudp(Some("no-gso")), CmKind::Own),
        ),
        (
            "CC-UDP, 1 datagram/call",
            Row::Transfer(ccudp(Some("none")), CmKind::Own),
        ),
        (
            "Linux TCP Reno",
            Row::Transfer(
                Leg::plain(Transport::LinuxTcp { cc: "reno".into() }),
                CmKind::Own,
            ),
        ),
    ];
    let specs: Vec<(&str, Row)> = specs
        .into_iter()
        .filter(|(_, r)| daemon || !matches!(r, Row::Transfer(_, CmKind::Daemon)))
        .collect();
    // Round after round, every row once, so that a slow spell of the
    // machine touches every row alike; each row's median run is kept.
    let mut runs: Vec<Vec<BenchRow>> = vec![Vec::new(); specs.len()];
    for _ in 0..cfg.repeat.max(1) {
        for (i, (name, row)) in specs.iter().enumerate() {
            let r = match row {
                Row::Raw(offload) => raw_udp(*offload, cfg.datagrams, name)?,
                Row::Transfer(leg, kind) => {
                    let none = || None;
                    let (mut cm, external): (Option<Cm>, &dyn Fn() -> Option<Duration>) =
                        match (kind, &cfg.daemon) {
                            (CmKind::Embedded, _) => {
                                (Some(Cm::embedded(crate::cm_config())?), &none)
                            }
                            (CmKind::Daemon, Some(socket)) => {
                                (Some(Cm::connect(socket)?), daemon_cpu)
                            }
                            _ => (None, &none),
                        };
                    transfer(leg, cfg.bytes, cm.as_mut(), external, name)?
                }
            };
            progress(&r);
            runs[i].push(r);
        }
    }
    Ok(runs.into_iter().filter_map(median).collect())
}

/// The run with the median rate (datagrams, else goodput) of a row's runs.
fn median(mut runs: Vec<BenchRow>) -> Option<BenchRow> {
    let key = |r: &BenchRow| {
        if r.datagrams_per_s > 0.0 {
            r.datagrams_per_s
        } else {
            r.goodput_bps
        }
    };
    runs.sort_by(|a, b| key(a).total_cmp(&key(b)));
    let mid = runs.len() / 2;
    runs.into_iter().nth(mid)
}

/// One row of the table.
enum Row {
    /// Raw UDP blasted with these offloads.
    Raw(Offload),
    /// A transfer through cm-ttcp, with this CM.
    Transfer(Leg, CmKind),
}

/// Which CM a transfer row uses.
enum CmKind {
    /// An embedded CM made for the row.
    Embedded,
    /// The daemon at [`BenchConfig::daemon`].
    Daemon,
    /// The transport's own (CC-UDP's embedded CM) or none (Linux TCP).
    Own,
}

/// What one transfer row moves.
struct Leg {
    transport: Transport,
    /// CC-UDP payload per datagram.
    payload: Option<usize>,
    /// `CM_UDP_OFFLOAD` words for this row's sockets.
    offload: Option<&'static str>,
}

impl Leg {
    fn plain(transport: Transport) -> Leg {
        Leg {
            transport,
            payload: None,
            offload: None,
        }
    }
}

fn per_mb(cpu: Duration, bytes: u64) -> f64 {
    if bytes == 0 {
        return f64::NAN;
    }
    cpu.as_secs_f64() * 1e3 / (bytes as f64 / 1e6)
}

/// A transfer through cm-ttcp's sender and receiver. The "other" CPU is
/// `external`'s (another process) if it reads one, else this process's
/// beyond the two threads.
fn transfer(
    leg: &Leg,
    bytes: u64,
    cm: Option<&mut Cm>,
    external: &dyn Fn() -> Option<Duration>,
    name: &str,
) -> Result<BenchRow> {
    let any: SocketAddr = SocketAddr::from(([127, 0, 0, 1], 0));
    let rx = Receiver::bind(any, &leg.transport, ReceiverOptions::default())?;
    let dst = rx.local_addr();
    let handle = rx.spawn();
    let cpu0 = cm_clock::process_cpu();
    let ext0 = external();
    let mut spec = SendSpec::new(dst, bytes, leg.transport.clone());
    spec.payload = leg.payload;
    spec.udp_offload = leg.offload.map(str::to_owned);
    let sent = send(&spec, cm);
    let got = handle.stop();
    let ext = external().zip(ext0).map(|(a, b)| a.saturating_sub(b));
    let cpu = cm_clock::process_cpu().saturating_sub(cpu0);
    let s: Summary = sent?;
    let r = got?
        .into_iter()
        .next()
        .ok_or_else(|| TtcpError::Invalid(format!("{name}: the receiver saw no transfer")))?;
    let segments = match (&s.tcpcm, &s.ccudp) {
        (Some(d), _) => d.segments_sent,
        (_, Some(d)) => d.datagrams_sent,
        _ => 0,
    };
    let (scpu, rcpu) = (
        Duration::from_secs_f64(s.cpu_s),
        Duration::from_secs_f64(r.cpu_s),
    );
    Ok(BenchRow {
        name: name.into(),
        bytes: r.bytes,
        goodput_bps: r.bytes as f64 * 8.0 / s.seconds.max(1e-9),
        datagrams_per_s: segments as f64 / s.seconds.max(1e-9),
        sender_ms_per_mb: per_mb(scpu, r.bytes),
        receiver_ms_per_mb: per_mb(rcpu, r.bytes),
        other_ms_per_mb: per_mb(
            ext.unwrap_or_else(|| cpu.saturating_sub(scpu + rcpu)),
            r.bytes,
        ),
    })
}

/// What the raw receiver thread saw.
struct Sink {
    bytes: u64,
    cpu: Duration,
}

/// Blast `n` datagrams of [`RAW_DATAGRAM`] bytes at a receiver thread.
fn raw_udp(offload: Offload, n: u64, name: &str) -> Result<BenchRow> {
    let rsock = UdpSocket::bind("127.0.0.1:0").map_err(|e| TtcpError::io("bind", e))?;
    big_buffers(&rsock, SOCKET_BUFFER);
    let dst = rsock
        .local_addr()
        .map_err(|e| TtcpError::io("local address", e))?;
    let mut rio = UdpIo::with_offload(rsock, offload).map_err(|e| TtcpError::io("socket", e))?;
    let done = Arc::new(AtomicBool::new(false));
    let stop = Arc::clone(&done);
    let receiver = std::thread::spawn(move || -> std::io::Result<Sink> {
        let cpu0 = cm_clock::thread_cpu();
        let mut batch = RecvBatch::new(if offload.mmsg { 32 } else { 1 }, 2048);
        let mut bytes = 0u64;
        let mut quiet_since: Option<Instant> = None;
        loop {
            match rio.recv(&mut batch) {
                Ok(_) => {
                    bytes += batch
                        .datagrams()
                        .iter()
                        .map(|d| d.len() as u64)
                        .sum::<u64>();
                    quiet_since = None;
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    if stop.load(Ordering::Acquire) {
                        // Drained: nothing more for 50 ms after the sender ended.
                        let q = *quiet_since.get_or_insert_with(Instant::now);
                        if q.elapsed() > Duration::from_millis(50) {
                            break;
                        }
                    }
                    let _ = wait_fd(rio.socket(), PollFlags::IN, Duration::from_millis(10));
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(Sink {
            bytes,
            cpu: cm_clock::thread_cpu().saturating_sub(cpu0),
        })
    });
    let sent = raw_send(offload, dst, n);
    done.store(true, Ordering::Release);
    let sink = receiver
        .join()
        .map_err(|_| TtcpError::Invalid("raw receiver panicked".into()))?
        .map_err(|e| TtcpError::io("raw receive", e))?;
    let (secs, scpu) = sent?;
    let sent_bytes = n * RAW_DATAGRAM as u64;
    Ok(BenchRow {
        name: name.into(),
        bytes: sink.bytes,
        goodput_bps: sink.bytes as f64 * 8.0 / secs.max(1e-9),
        datagrams_per_s: n as f64 / secs.max(1e-9),
        // The sender's cost is per byte it sent (the receiver may drop
        // what it cannot keep up with), the receiver's per byte it got.
        sender_ms_per_mb: per_mb(scpu, sent_bytes),
        receiver_ms_per_mb: per_mb(sink.cpu, sink.bytes),
        other_ms_per_mb: 0.0,
    })
}

/// Send `n` datagrams as fast as the socket takes them: (seconds, CPU).
fn raw_send(offload: Offload, dst: SocketAddr, n: u64) -> Result<(f64, Duration)> {
    let sock = connected_udp(dst, None)?;
    let mut io = UdpIo::with_offload(sock, offload).map_err(|e| TtcpError::io("socket", e))?;
    // With GSO, runs as long as TCP/CM's GSO calls.
    let per_call = if offload.gso {
        u64::from(crate::tcpcm::sender::RUN_MTUS)
    } else {
        1
    };
    let buf = vec![0x5a_u8; RAW_DATAGRAM * per_call as usize];
    let t0 = Instant::now();
    let cpu0 = cm_clock::thread_cpu();
    let mut sent = 0u64;
    while sent < n {
        let k = (n - sent).min(per_call) as usize;
        match io.send_segments(None, &buf[..k * RAW_DATAGRAM], RAW_DATAGRAM) {
            Ok(m) => sent += m as u64,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                wait_fd(io.socket(), PollFlags::OUT, Duration::from_millis(10))?;
            }
            // The receiver's buffer overflowing is not an error here.
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::Interrupted | std::io::ErrorKind::ConnectionRefused
                ) => {}
            Err(e) => return Err(TtcpError::io("raw send", e)),
        }
    }
    Ok((
        t0.elapsed().as_secs_f64(),
        cm_clock::thread_cpu().saturating_sub(cpu0),
    ))
}
