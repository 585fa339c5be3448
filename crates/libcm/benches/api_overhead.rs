//! cm-implementation-linux Fig 6 / Table 1 on loopback: the cost per packet
//! of sending through the CM's APIs, against raw UDP measured in the same
//! run.
//!
//! Every variant sends N datagrams of one size to a receiver thread that
//! acknowledges each one (the paper's test programs "sent packets ... on a
//! UDP socket, and waited for acknowledgement packets"), with at most W
//! datagrams unacknowledged, so the CM's window never limits (W × size is
//! far below what the window grows to on loopback). Variants:
//!
//! - `raw`: plain UDP, the baseline (the paper's TCP/CM-nodelay role).
//! - `buffered`: `cm_send` (CC-UDP): libcm queues, the CM grants, libcm sends
//!   and notifies; acks feed `cm_update` one call each.
//! - `alf`: request/callback with explicit `cm_notify` per packet and one
//!   `cm_update` + `cm_request` call per ack (the paper's ALF/noconnect:
//!   a user-space CM has no IP-layer hook, so every ALF sender notifies).
//! - `alf-bulk`: the same, but the acks of one loop turn are reported with
//!   `cm_bulk_update` and the next requests with `cm_bulk_request`
//!   (cm-implementation-linux §5 "Optimizations"), and calls to the daemon
//!   are batched (`set_autoflush(false)`: sent every 32 calls once a
//!   request is among them, and before the loop sleeps).
//!
//! In daemon mode both sides spin before they block (cm-ipc "Waiting:
//! spin, then block"): the daemon polls for 50 µs after a busy turn
//! (`spin_us`), and libcm polls for the grants of requests it just sent
//! in `next_timeout` before the loop sleeps, for an adaptive time of at
//! most 500 µs (`Cm::set_spin`). The loop itself (and raw UDP's) waits the same way as before:
//! `poll` on the ack socket and, in daemon mode, the control socket.
//!
//! each in embedded and daemon mode, the daemon reached over its control
//! socket (`/dmn`) and over the shared-memory rings (`/shm`, cm_ipc::shm,
//! libcm's default) (the daemon is the real `cmd` loop on
//! its own thread; every run's receiver listens on an address of its own
//! in 127/8, so every daemon run starts from a fresh macroflow), plus
//! kernel TCP (`TCP_NODELAY`, the same window of
//! acknowledged messages) for reference. Output: µs per packet (median of
//! the reps) and the throughput ratio to raw UDP: every run of a variant
//! comes right after a raw UDP run of its own, and the ratio printed is the
//! median over the reps of each run's ratio to that raw run (raw UDP alone
//! moves by 10-20% between runs on this machine; a ratio to the run just
//! before shares more of the machine's state than one to a median taken
//! over minutes). The raw UDP column is the median of all its runs.
//! `CM_BENCH_QUICK=1` measures 1200-byte datagrams only, with fewer packets
//! (20,000) and more pairs (7), so that its medians are less at the mercy
//! of one slow run (what CI runs: 3 pairs gave 0.80-0.95 for per-call ALF
//! in three CI runs of code that a full run puts at 0.90-0.97).
//!
//! Two hosts on one machine: the paper's programs ran on separate sender
//! and receiver machines (cm-implementation-linux §4), so the sender thread
//! is pinned to CPU 0 and every receiver thread (the TCP server too) to
//! CPU 1, in every variant. The daemon is the sender host's and is not
//! pinned: it starts free and moves next to its client as `cmd` does
//! anywhere (`follow_client_cpu`). Left to the kernel, sender and receiver
//! share a CPU in some runs and not in others, and paired runs of one
//! variant against raw UDP then scatter from 0.71 to 1.25 (embedded ALF
//! bulk, measured): the placement, not the CM, decides the figure.
//!
//! For investigating (never for the table): `CM_BENCH_SIZE=1200` runs one
//! size; `CM_BENCH_ONLY=alf-bulk/dmn` (comma-separated variant names,
//! `kernel-tcp` included) runs raw UDP and the variants named only;
//! `CM_BENCH_BATCH=n` sets the ALF-bulk batch limit; `CM_BENCH_NO_PIN=1`
//! lets the kernel place sender and receiver (see "Two hosts" below);
//! `CM_BENCH_SPIN_US=n` the daemon's spin and `CM_BENCH_CLIENT_SPIN_US=n`
//! the clients' (0: block at once, as before); `CM_BENCH_NO_FOLLOW=1`
//! keeps the daemon where the kernel puts it (`follow_client_cpu = false`);
//! `CM_BENCH_DEBUG=1`
//! prints, per run, the window, RTT and IPC counters and each thread's CPU
//! per packet and context switches (the sender is the main thread, the
//! daemon the other long-lived one, the receiver has exited: "exited").

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::cell::RefCell;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream, UdpSocket};
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration as StdDuration, Instant};

use libcm::{Cm, CmError, Config, Duration, Feedback, FlowId};
use rustix::event::{PollFd, PollFlags, Timespec, poll};

/// Unacknowledged datagrams allowed in flight.
const W: u64 = 64;
const ACK: usize = 8;
/// What the running variant is doing, for the watchdog: [variant index,
/// acked, queued/requested, sent].
static DIAG: [std::sync::atomic::AtomicU64; 4] =
    [const { std::sync::atomic::AtomicU64::new(0) }; 4];

fn diag(i: usize, v: u64) {
    DIAG[i].store(v, Ordering::Relaxed);
}

/// Abort with the diagnostics if a run acknowledges nothing for `limit`: a
/// hung benchmark must fail loudly, never stall CI.
fn watchdog(limit: StdDuration) {
    std::thread::spawn(move || {
        let mut last = u64::MAX;
        let mut since = Instant::now();
        loop {
            std::thread::sleep(StdDuration::from_millis(500));
            let progress = DIAG[1].load(Ordering::Relaxed);
            if progress != last {
                last = progress;
                since = Instant::now();
            } else if since.elapsed() > limit {
                eprintln!(
                    "watchdog: no progress for {:?}: variant {} acked {} queued {} sent {}",
                    limit,
                    DIAG[0].load(Ordering::Relaxed),
                    DIAG[1].load(Ordering::Relaxed),
                    DIAG[2].load(Ordering::Relaxed),
                    DIAG[3].load(Ordering::Relaxed),
                );
                std::process::exit(3);
            }
        }
    });
}

/// Datagrams lost on loopback over the whole run (reported at the end).
static LOST: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

struct Receiver {
    addr: std::net::SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Receiver {
    /// Acknowledge every datagram with its sequence number.
    /// Each receiver listens on an address of its own in 127/8, so that
    /// every run through the daemon starts with a fresh macroflow (the CM
    /// keys macroflows by destination host and keeps a closed one's state
    /// for 10 minutes): one variant's window, RTT and aging must not carry
    /// into the next, as nothing carries between embedded runs either.
    fn start() -> Receiver {
        static RUNS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let k = RUNS.fetch_add(1, Ordering::Relaxed);
        let ip = std::net::Ipv4Addr::new(127, 0, ((k / 250) % 256) as u8, (2 + k % 250) as u8);
        let sock = UdpSocket::bind((ip, 0)).unwrap();
        sock.set_read_timeout(Some(StdDuration::from_millis(50)))
            .unwrap();
        let addr = sock.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let s2 = stop.clone();
        let thread = std::thread::spawn(move || {
            pin_to(1);
            let mut buf = [0u8; 2048];
            while !s2.load(Ordering::Relaxed) {
                if let Ok((n, from)) = sock.recv_from(&mut buf) {
                    if n >= ACK {
                        let _ = sock.send_to(&buf[..ACK], from);
                    }
                }
            }
        });
        Receiver {
            addr,
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Pin the calling thread to `cpu` (the sender to 0, the receiver to 1;
/// the daemon's thread stays free): the two hosts of the module docs.
/// `CM_BENCH_NO_PIN=1` leaves placement to the kernel. A machine without
/// that CPU refuses, and the thread runs where the kernel puts it.
#[allow(unsafe_code)]
fn pin_to(cpu: usize) {
    if std::env::var_os("CM_BENCH_NO_PIN").is_some() {
        return;
    }
    // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET and
    // sched_setaffinity (0 = the calling thread) only read it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

fn sender_socket(rx: &Receiver) -> UdpSocket {
    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    s.connect(rx.addr).unwrap();
    s.set_nonblocking(true).unwrap();
    s
}

fn packet(seq: u64, size: usize, buf: &mut Vec<u8>) {
    buf.clear();
    buf.extend_from_slice(&seq.to_le_bytes());
    buf.resize(size, 0);
}

/// Block until `sock` (or `extra`) is readable or `timeout` passes.
fn wait_readable(
    sock: &UdpSocket,
    extra: Option<std::os::fd::BorrowedFd<'_>>,
    timeout: StdDuration,
) {
    let ts = Timespec {
        tv_sec: timeout.as_secs() as i64,
        tv_nsec: i64::from(timeout.subsec_nanos()),
    };
    match extra {
        Some(fd) => {
            let mut fds = [
                PollFd::new(sock, PollFlags::IN),
                PollFd::new(&fd, PollFlags::IN),
            ];
            let _ = poll(&mut fds, Some(&ts));
        }
        None => {
            let mut fds = [PollFd::new(sock, PollFlags::IN)];
            let _ = poll(&mut fds, Some(&ts));
        }
    }
}

/// Read every ack waiting; call `f(seq)` for each.
fn drain_acks(sock: &UdpSocket, mut f: impl FnMut(u64)) -> usize {
    let mut buf = [0u8; 64];
    let mut n = 0;
    while let Ok(len) = sock.recv(&mut buf) {
        if len >= ACK {
            f(u64::from_le_bytes(buf[..8].try_into().unwrap()));
            n += 1;
        }
    }
    n
}

/// Raw UDP, the baseline.
fn run_raw(n: u64, size: usize) -> StdDuration {
    let rx = Receiver::start();
    let sock = sender_socket(&rx);
    let mut buf = Vec::new();
    let (mut next, mut acked) = (0u64, 0u64);
    let t0 = Instant::now();
    while acked < n {
        while next < n && next - acked < W {
            packet(next, size, &mut buf);
            if sock.send(&buf).is_err() {
                break;
            }
            next += 1;
        }
        let got = drain_acks(&sock, |_| {});
        if got == 0 {
            wait_readable(&sock, None, StdDuration::from_millis(200));
            if drain_acks(&sock, |_| acked += 1) == 0 {
                LOST.fetch_add(next - acked, Ordering::Relaxed);
                acked = next; // lost on loopback: move on
            }
        } else {
            acked += got as u64;
        }
    }
    t0.elapsed()
}

#[derive(Clone, Copy, PartialEq)]
enum Api {
    Buffered,
    Alf,
    AlfBulk,
}

struct AlfState {
    sock: UdpSocket,
    next: u64,
    n: u64,
    size: usize,
    sent_at: Vec<Instant>,
    buf: Vec<u8>,
}

/// One of the CM variants on a fresh handle `cm`.
fn run_cm(mut cm: Cm, api: Api, n: u64, size: usize) -> StdDuration {
    let rx = Receiver::start();
    let sock = sender_socket(&rx);
    let ack_sock = sock.try_clone().unwrap();
    let daemon = cm.mode() == libcm::Mode::Daemon;
    let t0 = Instant::now();
    let mut acked = 0u64;
    let rtt_of = |sent: &[Instant], seq: u64| {
        let at = sent.get(seq as usize).copied().unwrap_or(t0);
        Duration::from_micros((at.elapsed().as_micros() as u64).max(1))
    };
    if api == Api::Buffered {
        let flow = cm.open_buffered(sock, rx.addr).unwrap();
        let mut queued = 0u64;
        let mut buf = Vec::new();
        let mut sent_at = vec![t0; n as usize];
        let mut idle = Instant::now();
        while acked < n {
            while queued < n && queued - acked < W {
                packet(queued, size, &mut buf);
                match cm.send(flow, &buf) {
                    Ok(()) => {
                        sent_at[queued as usize] = Instant::now();
                        queued += 1;
                    }
                    Err(CmError::QueueFull(_)) => break,
                    Err(e) => panic!("{e}"),
                }
            }
            cm.dispatch().unwrap();
            diag(1, acked);
            diag(2, queued);
            diag(3, cm.buffered_sent(flow).unwrap());
            let mut got = 0;
            let mut fbs = Vec::new();
            drain_acks(&ack_sock, |seq| {
                // RTT from when libcm sent it, not from when it was queued.
                let at = cm
                    .buffered_send_time(flow, seq)
                    .unwrap_or(sent_at[seq as usize]);
                let rtt = Duration::from_micros((at.elapsed().as_micros() as u64).max(1));
                fbs.push((flow, Feedback::acked(size as u64, rtt)));
                got += 1;
            });
            for (f, fb) in fbs {
                cm.update(f, fb).unwrap();
            }
            acked += got;
            if got == 0 {
                let t = cm.next_timeout().unwrap_or(StdDuration::from_millis(200));
                let fd = if daemon {
                    Some(cm.pollable_fd().unwrap())
                } else {
                    None
                };
                wait_readable(&ack_sock, fd, t.min(StdDuration::from_millis(200)));
                if idle.elapsed() > StdDuration::from_secs(2) {
                    // A stall is a bug to see, not a number to print.
                    let st = cm.stat().unwrap();
                    eprintln!(
                        "buffered stall: acked {acked} queued {queued} backlog {} sent {} \
                         next_timeout {:?} mf {:?} flows {:?}",
                        cm.backlog(flow).unwrap(),
                        cm.buffered_sent(flow).unwrap(),
                        cm.next_timeout(),
                        st.macroflows,
                        st.flows
                    );
                    std::process::exit(3);
                }
                if idle.elapsed() > StdDuration::from_millis(200) && cm.backlog(flow).unwrap() == 0
                {
                    let sent = cm.buffered_sent(flow).unwrap();
                    LOST.fetch_add(sent - acked, Ordering::Relaxed);
                    acked = sent;
                    idle = Instant::now();
                }
            } else {
                idle = Instant::now();
            }
        }
        let e = t0.elapsed();
        debug_counters(&mut cm, flow);
        return e;
    }
    let flow = cm.open(None, rx.addr).unwrap();
    let st = Rc::new(RefCell::new(AlfState {
        sock,
        next: 0,
        n,
        size,
        sent_at: vec![t0; n as usize],
        buf: Vec::new(),
    }));
    let s2 = st.clone();
    // cmapp_send: one datagram per granted MTU (the core may answer several
    // one-MTU requests with one grant), then tell the CM what left.
    cm.register_send(move |cm, flow: FlowId, bytes| {
        let mut s = s2.borrow_mut();
        let slots = (bytes.get() / 1460).max(1);
        let mut sent = 0u64;
        let mut failed = 0u64;
        for _ in 0..slots {
            if s.next >= s.n {
                break;
            }
            let (seq, size) = (s.next, s.size);
            let mut buf = std::mem::take(&mut s.buf);
            packet(seq, size, &mut buf);
            let ok = s.sock.send(&buf).is_ok();
            s.buf = buf;
            if ok {
                s.sent_at[seq as usize] = Instant::now();
                s.next += 1;
                sent += size as u64;
            } else {
                failed += 1;
            }
        }
        drop(s);
        cm.notify(flow, sent).unwrap();
        // A full socket buffer: ask again rather than lose the slots.
        for _ in 0..failed {
            cm.request(flow).unwrap();
        }
    });
    let mut requested = W.min(n);
    if api == Api::AlfBulk {
        // Batch calls to the daemon (sent every 32 calls and before sleeping).
        cm.set_autoflush(false);
        if let Some(b) = std::env::var("CM_BENCH_BATCH")
            .ok()
            .and_then(|v| v.parse().ok())
        {
            cm.set_batch_limit(b);
        }
        cm.bulk_request(&vec![(flow, 1); requested as usize])
            .unwrap();
    } else {
        for _ in 0..requested {
            cm.request(flow).unwrap();
        }
    }
    let mut fbs = Vec::with_capacity(W as usize);
    let mut lost_guard = Instant::now();
    while acked < n {
        cm.dispatch().unwrap();
        diag(1, acked);
        diag(2, requested);
        diag(3, st.borrow().next);
        fbs.clear();
        {
            let s = st.borrow();
            drain_acks(&ack_sock, |seq| {
                fbs.push((flow, Feedback::acked(size as u64, rtt_of(&s.sent_at, seq))));
            });
        }
        let got = fbs.len() as u64;
        acked += got;
        let more = got.min(n - requested);
        requested += more;
        match api {
            Api::AlfBulk => {
                if got > 0 {
                    cm.bulk_update(&fbs).unwrap();
                    cm.bulk_request(&vec![(flow, 1); more as usize]).unwrap();
                }
            }
            _ => {
                for &(f, fb) in &fbs {
                    cm.update(f, fb).unwrap();
                }
                for _ in 0..more {
                    cm.request(flow).unwrap();
                }
            }
        }
        if got == 0 {
            let t = cm.next_timeout().unwrap_or(StdDuration::from_millis(200));
            if !t.is_zero() {
                let fd = if daemon {
                    Some(cm.pollable_fd().unwrap())
                } else {
                    None
                };
                wait_readable(&ack_sock, fd, t.min(StdDuration::from_millis(200)));
            }
            if lost_guard.elapsed() > StdDuration::from_millis(200) {
                // Datagrams lost on loopback (a full receive buffer): count
                // them as done and keep the window of requests full.
                let sent = st.borrow().next;
                if std::env::var_os("CM_BENCH_DEBUG").is_some() {
                    let stat = cm.stat().unwrap();
                    eprintln!(
                        "stall: acked {acked} sent {sent} requested {requested} mf {:?} flows {:?} events {:?}",
                        stat.macroflows,
                        stat.flows,
                        cm.next_timeout()
                    );
                }
                LOST.fetch_add(sent - acked, Ordering::Relaxed);
                acked = sent;
                let more = (acked + W).min(n).saturating_sub(requested);
                requested += more;
                for _ in 0..more {
                    cm.request(flow).unwrap();
                }
                lost_guard = Instant::now();
            }
        } else {
            lost_guard = Instant::now();
        }
    }
    let e = t0.elapsed();
    debug_counters(&mut cm, flow);
    e
}

/// `CM_BENCH_DEBUG`: the run's macroflow's window and RTT (the daemon
/// keeps earlier runs' macroflows a while: the one with `flow`) and the IPC
/// counters.
fn debug_counters(cm: &mut Cm, flow: FlowId) {
    if std::env::var_os("CM_BENCH_DEBUG").is_some() {
        let st = cm.stat().unwrap();
        let mf = st
            .flows
            .iter()
            .find(|f| f.id == flow.to_u64())
            .unwrap()
            .macroflow;
        let m = st.macroflows.iter().find(|m| m.id == mf).unwrap();
        eprintln!(
            "    window {} srtt {}us rttvar {}us ipc (frames out, in, calls) {:?}",
            m.window,
            m.estimate.srtt_us,
            m.estimate.rttvar_us,
            cm.ipc_counters()
        );
    }
}

/// A CM variant: the API used, and embedded (`None`) or the daemon over a
/// transport.
type Variant = (Api, Option<libcm::Transport>);

/// Kernel TCP with the same acknowledged window (reference).
fn run_tcp(n: u64, size: usize) -> StdDuration {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let srv = std::thread::spawn(move || {
        pin_to(1);
        let (mut c, _) = l.accept().unwrap();
        c.set_nodelay(true).unwrap();
        let mut buf = vec![0u8; size];
        for _ in 0..n {
            if c.read_exact(&mut buf).is_err() {
                return;
            }
            let _ = c.write_all(&buf[..ACK]);
        }
    });
    let mut c = TcpStream::connect(addr).unwrap();
    c.set_nodelay(true).unwrap();
    let mut r = c.try_clone().unwrap();
    let mut buf = Vec::new();
    let mut ack = [0u8; ACK];
    let (mut next, mut acked) = (0u64, 0u64);
    let t0 = Instant::now();
    while acked < n {
        while next < n && next - acked < W {
            packet(next, size, &mut buf);
            c.write_all(&buf).unwrap();
            next += 1;
        }
        r.read_exact(&mut ack).unwrap();
        acked += 1;
    }
    let e = t0.elapsed();
    srv.join().unwrap();
    e
}

/// CPU time (user + system) of each thread of this process so far, by
/// thread id, and its context switches (for `CM_BENCH_DEBUG`: who pays for
/// a variant).
fn thread_cpu() -> std::collections::HashMap<u64, (StdDuration, u64)> {
    let mut out = std::collections::HashMap::new();
    for e in std::fs::read_dir("/proc/self/task")
        .into_iter()
        .flatten()
        .flatten()
    {
        let Ok(tid) = e.file_name().to_string_lossy().parse::<u64>() else {
            continue;
        };
        let sw = std::fs::read_to_string(e.path().join("status"))
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains("ctxt_switches"))
            .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
            .sum();
        out.insert(tid, (stat_cpu(&e.path().join("stat")), sw));
    }
    out
}

/// Idle time of each CPU so far (`/proc/stat`, idle + iowait), for
/// `CM_BENCH_DEBUG`: a variant slower than raw UDP with CPUs idle waits on
/// wake-ups, not on work.
fn cpu_idle() -> Vec<StdDuration> {
    std::fs::read_to_string("/proc/stat")
        .unwrap_or_default()
        .lines()
        .filter(|l| l.starts_with("cpu") && !l.starts_with("cpu "))
        .map(|l| {
            let f: Vec<u64> = l
                .split_whitespace()
                .skip(1)
                .filter_map(|x| x.parse().ok())
                .collect();
            StdDuration::from_millis(
                (f.get(3).copied().unwrap_or(0) + f.get(4).copied().unwrap_or(0)) * 10,
            )
        })
        .collect()
}

/// CPU time (user + system) of this whole process so far, all threads.
fn cpu_time() -> StdDuration {
    stat_cpu(std::path::Path::new("/proc/self/stat"))
}

/// User + system time from a `/proc/.../stat` file.
fn stat_cpu(path: &std::path::Path) -> StdDuration {
    let t = std::fs::read_to_string(path).unwrap_or_default();
    // Fields after the command name: utime is the 14th field, stime 15th.
    let rest = t.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<u64> = rest
        .split_whitespace()
        .filter_map(|x| x.parse().ok())
        .collect();
    let ticks = f.get(10).copied().unwrap_or(0) + f.get(11).copied().unwrap_or(0);
    StdDuration::from_millis(ticks * 10)
}

/// The median (upper of the middle two) of durations or ratios.
fn median<T: Copy + PartialOrd>(mut v: Vec<T>) -> T {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    v[v.len() / 2]
}

fn main() {
    // `cargo bench` passes --bench; nothing else to parse.
    let quick = std::env::var_os("CM_BENCH_QUICK").is_some();
    let only: Option<usize> = std::env::var("CM_BENCH_SIZE")
        .ok()
        .and_then(|v| v.parse().ok());
    let sizes: &[usize] = if let Some(s) = only.as_ref() {
        std::slice::from_ref(s)
    } else if quick {
        &[1200]
    } else {
        &[64, 200, 400, 800, 1200, 1400]
    };
    let n: u64 = if quick { 20_000 } else { 100_000 };
    let reps = if quick { 7 } else { 5 };
    let mut dcfg = cm_daemon::DaemonConfig::default();
    if let Some(us) = std::env::var("CM_BENCH_SPIN_US")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        dcfg.spin_us = us;
    }
    if std::env::var_os("CM_BENCH_NO_FOLLOW").is_some() {
        dcfg.follow_client_cpu = false;
    }
    let daemon = cm_daemon::TempDaemon::with_config(dcfg).expect("daemon starts");
    let debug = std::env::var_os("CM_BENCH_DEBUG").is_some();
    if debug {
        // The daemon's own log (moves, starvation) beside the runs.
        cm_daemon::log::set_quiet(false);
    }
    watchdog(StdDuration::from_secs(10));
    pin_to(0);
    // Daemon variants over the control socket (/dmn) and over the
    // shared-memory rings (/shm, cm_ipc::shm).
    let mut variants: Vec<(&str, Option<Variant>)> = vec![
        ("raw-udp", None),
        ("buffered/emb", Some((Api::Buffered, None))),
        ("alf/emb", Some((Api::Alf, None))),
        ("alf-bulk/emb", Some((Api::AlfBulk, None))),
        (
            "buffered/dmn",
            Some((Api::Buffered, Some(libcm::Transport::Socket))),
        ),
        ("alf/dmn", Some((Api::Alf, Some(libcm::Transport::Socket)))),
        (
            "alf-bulk/dmn",
            Some((Api::AlfBulk, Some(libcm::Transport::Socket))),
        ),
        (
            "buffered/shm",
            Some((Api::Buffered, Some(libcm::Transport::SharedMemory))),
        ),
        (
            "alf/shm",
            Some((Api::Alf, Some(libcm::Transport::SharedMemory))),
        ),
        (
            "alf-bulk/shm",
            Some((Api::AlfBulk, Some(libcm::Transport::SharedMemory))),
        ),
    ];
    // For profiling one variant: `CM_BENCH_ONLY=alf-bulk/dmn` (comma-separated
    // names, `kernel-tcp` included) keeps raw UDP, the baseline, and the
    // variants named.
    let mut tcp = true;
    if let Ok(only) = std::env::var("CM_BENCH_ONLY") {
        let keep: Vec<&str> = only.split(',').map(str::trim).collect();
        variants.retain(|(name, v)| v.is_none() || keep.contains(name));
        tcp = keep.contains(&"kernel-tcp");
    }
    println!(
        "cm-implementation-linux Fig 6 on loopback: µs per packet, median of {reps} runs \
         (throughput ÷ raw UDP: median of each run's ratio to a raw UDP run just before it), \
         {n} packets, window {W}"
    );
    print!("{:>6}", "size");
    for (name, _) in &variants {
        print!(" {name:>20}");
    }
    println!(" {:>20}", "kernel-tcp");
    let mut verdict = Vec::new();
    // One run of variant `i` (0: raw UDP; `variants.len()`: kernel TCP).
    let run = |i: usize, size: usize| -> StdDuration {
        let cpu0 = cpu_time();
        let (idle0, threads0) = if debug {
            (cpu_idle(), thread_cpu())
        } else {
            Default::default()
        };
        diag(0, i as u64);
        diag(1, u64::MAX - 1); // a new run counts as progress
        let t = match variants.get(i).map(|(_, v)| v) {
            None => run_tcp(n, size),
            Some(None) => run_raw(n, size),
            Some(Some((api, transport))) => {
                let cm = if let Some(t) = transport {
                    let mut cm = Cm::connect_with(daemon.socket(), *t).unwrap();
                    if let Some(us) = std::env::var("CM_BENCH_CLIENT_SPIN_US")
                        .ok()
                        .and_then(|v| v.parse().ok())
                    {
                        cm.set_spin(StdDuration::from_micros(us));
                    }
                    cm
                } else {
                    Cm::embedded(Config::default()).unwrap()
                };
                run_cm(cm, *api, n, size)
            }
        };
        let cpu = cpu_time().saturating_sub(cpu0);
        eprintln!(
            "  {size} B {:<14} {:>8.2} µs/packet, {:>6.2} µs CPU/packet (all threads)",
            variants.get(i).map_or("kernel-tcp", |v| v.0),
            t.as_secs_f64() * 1e6 / n as f64,
            cpu.as_secs_f64() * 1e6 / n as f64
        );
        if debug {
            // Threads that ran during this variant, busiest first
            // (the receiver thread has exited by now: it is the rest).
            let mut per: Vec<(u64, StdDuration, u64)> = thread_cpu()
                .into_iter()
                .map(|(tid, (c, sw))| {
                    let (c0, sw0) = threads0.get(&tid).copied().unwrap_or_default();
                    (tid, c.saturating_sub(c0), sw.saturating_sub(sw0))
                })
                .filter(|&(_, c, sw)| !c.is_zero() || sw > 10)
                .collect();
            per.sort_by_key(|&(_, c, _)| std::cmp::Reverse(c));
            let rest = cpu.saturating_sub(per.iter().map(|&(_, c, _)| c).sum());
            eprint!("    µs CPU/packet (context switches) by thread:");
            for (tid, c, sw) in per {
                eprint!(" {tid}: {:.2} ({sw})", c.as_secs_f64() * 1e6 / n as f64);
            }
            eprintln!(" exited: {:.2}", rest.as_secs_f64() * 1e6 / n as f64);
            let idle: Vec<String> = cpu_idle()
                .iter()
                .zip(&idle0)
                .map(|(b, a)| {
                    let share = b.saturating_sub(*a).as_secs_f64() / t.as_secs_f64();
                    format!("{:.0}%", 100.0 * share)
                })
                .collect();
            eprintln!("    idle by CPU: {}", idle.join(" "));
        }
        t
    };
    for &size in sizes {
        // Per variant: its times, and its throughput ratios to the raw UDP
        // run just before it (index 0: raw UDP's own times).
        let mut times: Vec<Vec<StdDuration>> = vec![Vec::new(); variants.len() + 1];
        let mut ratios: Vec<Vec<f64>> = vec![Vec::new(); variants.len() + 1];
        // Each variant runs right after a raw UDP run of its own (see the
        // module docs), interleaved over the reps.
        let last = if tcp {
            variants.len()
        } else {
            variants.len() - 1
        };
        for _ in 0..reps {
            for i in 1..=last {
                let base = run(0, size);
                let t = run(i, size);
                times[0].push(base);
                times[i].push(t);
                ratios[i].push(base.as_secs_f64() / t.as_secs_f64());
            }
        }
        print!("{size:>6}");
        for (i, ts) in times.into_iter().enumerate() {
            if ts.is_empty() {
                print!(" {:>20}", "-"); // not run (CM_BENCH_ONLY)
                continue;
            }
            let us = median(ts).as_secs_f64() * 1e6 / n as f64;
            let pairs = std::mem::take(&mut ratios[i]);
            let ratio = if i == 0 { 1.0 } else { median(pairs.clone()) };
            print!(" {:>11.2} ({:>5.2}x)", us, ratio);
            if size == 1200 && i > 0 && i < variants.len() {
                let lo = pairs.iter().copied().fold(f64::INFINITY, f64::min);
                let hi = pairs.iter().copied().fold(0.0, f64::max);
                verdict.push((variants[i].0, ratio, lo, hi));
            }
        }
        println!();
    }
    println!(
        "datagrams lost on loopback (all runs): {}",
        LOST.load(Ordering::Relaxed)
    );
    if !verdict.is_empty() {
        let best = |suffix: &str| {
            verdict
                .iter()
                .filter(|(n, ..)| n.ends_with(suffix))
                .map(|&(_, r, ..)| r)
                .fold(0.0f64, f64::max)
        };
        let (emb, dmn) = (best("/emb"), best("/dmn").max(best("/shm")));
        // The verdict needs every variant (not a CM_BENCH_ONLY run).
        if std::env::var_os("CM_BENCH_ONLY").is_none() {
            println!(
                "1200 B: best embedded {:.1}% of raw UDP packets/s (target >= 95%), \
             best daemon {:.1}% (target >= 85%)",
                emb * 100.0,
                dmn * 100.0
            );
        }
        // The median, and the spread of the pairs it is the median of.
        for (name, r, lo, hi) in &verdict {
            println!(
                "  {name:<14} {:.1}%  (pairs {:.2}-{:.2})",
                r * 100.0,
                lo,
                hi
            );
        }
    }
}
