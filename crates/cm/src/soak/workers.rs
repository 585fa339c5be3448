//! The clients of `cm soak`: well-behaved ones whose service is measured,
//! and the misbehaving mix (churners, killed children, non-readers,
//! garbage writers, a limit exceeder, a second user).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use libcm::{Cm, CmError, CmEvent, Feedback, FlowId};

/// Counters shared by the workers and the monitor.
#[derive(Debug, Default)]
pub(crate) struct Tally {
    /// Calls made by well-behaved clients.
    pub good_ops: AtomicU64,
    /// Flows opened and closed by churners.
    pub churn_ops: AtomicU64,
    /// Children killed with SIGKILL in the middle of their calls.
    pub kills: AtomicU64,
    /// Garbage frames written to the socket.
    pub garbage: AtomicU64,
    /// Times the flow limit was hit (with the right error).
    pub limit_hits: AtomicU64,
    /// Sessions of clients that never read their grants.
    pub deaf: AtomicU64,
    /// Second-user sessions (0 when not root).
    pub other_user: AtomicU64,
    /// The slowest well-behaved turn in the current second, in µs.
    pub worst_turn_us: AtomicU64,
    /// Turns of each well-behaved client (progress).
    pub turns: Mutex<Vec<u64>>,
    /// Killed children: pid and when.
    pub killed: Mutex<Vec<(u32, Instant)>>,
    /// Violations found by the workers themselves.
    pub violations: Mutex<Vec<String>>,
}

impl Tally {
    pub(crate) fn note_violation(&self, v: String) {
        self.violations
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(v);
    }
}

/// A destination host of `i` (198.18.0.0/15, never sent to).
fn host(i: usize) -> std::net::SocketAddr {
    let i = u32::try_from(i % 60_000).unwrap_or(0);
    std::net::SocketAddr::from(([198, 18, (i >> 8) as u8, i as u8], 9))
}

/// Start every worker thread.
pub(crate) fn start_all(
    socket: &Path,
    clients: usize,
    flow_limit: usize,
    latency: Duration,
    stop: &Arc<AtomicBool>,
    tally: &Arc<Tally>,
) -> Result<Vec<JoinHandle<()>>> {
    *tally.turns.lock().unwrap_or_else(PoisonError::into_inner) = vec![0; clients];
    let mut out = Vec::new();
    let spawn = |name: String, f: Box<dyn FnOnce() + Send>| {
        std::thread::Builder::new()
            .name(name)
            .spawn(f)
            .context("start a worker thread")
    };
    for i in 0..clients {
        let (s, stop, t) = (socket.to_path_buf(), stop.clone(), tally.clone());
        out.push(spawn(
            format!("good{i}"),
            Box::new(move || well_behaved(i, &s, latency, &stop, &t)),
        )?);
    }
    type Worker = fn(&Path, usize, &AtomicBool, &Tally);
    let mix: [(&str, Worker); 6] = [
        ("churn", churner),
        ("churn", churner),
        ("kill", killer),
        ("deaf", deaf),
        ("garbage", garbage),
        ("limit", limit_exceeder),
    ];
    for (name, f) in mix {
        let (s, stop, t) = (socket.to_path_buf(), stop.clone(), tally.clone());
        out.push(spawn(
            name.to_owned(),
            Box::new(move || f(&s, flow_limit, &stop, &t)),
        )?);
    }
    if rustix::process::geteuid().is_root() {
        let (s, stop, t) = (socket.to_path_buf(), stop.clone(), tally.clone());
        out.push(spawn(
            "other-user".to_owned(),
            Box::new(move || other_user(&s, &stop, &t)),
        )?);
    }
    Ok(out)
}

/// A well-behaved client: per turn a request, its grant, notify, update
/// and a query; the turn's duration is what the monitor bounds.
fn well_behaved(i: usize, socket: &Path, latency: Duration, stop: &AtomicBool, t: &Tally) {
    let Ok(mut cm) = Cm::connect(socket) else {
        t.note_violation(format!("well-behaved client {i} could not connect"));
        return;
    };
    let flows: Vec<FlowId> = (0..4)
        .filter_map(|k| cm.open(None, host(i * 4 + k)).ok())
        .collect();
    if flows.len() < 4 {
        t.note_violation(format!("well-behaved client {i} could not open its flows"));
        return;
    }
    let mut k = 0;
    while !stop.load(Ordering::Relaxed) {
        let f = flows[k % flows.len()];
        k += 1;
        let start = Instant::now();
        let r = turn(&mut cm, f, latency.max(Duration::from_secs(2)));
        let us = u64::try_from(start.elapsed().as_micros()).unwrap_or(u64::MAX);
        t.worst_turn_us.fetch_max(us, Ordering::Relaxed);
        match r {
            Ok(()) => {
                t.good_ops.fetch_add(5, Ordering::Relaxed);
                if let Some(n) = t
                    .turns
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .get_mut(i)
                {
                    *n += 1;
                }
            }
            Err(e) => t.note_violation(format!("well-behaved client {i}: {e}")),
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

fn turn(cm: &mut Cm, f: FlowId, limit: Duration) -> Result<()> {
    cm.request(f)?;
    let end = Instant::now() + limit;
    loop {
        match cm.poll_event()? {
            Some(CmEvent::Send { flow, bytes }) => {
                cm.notify(flow, bytes.get())?;
                if flow == f {
                    let rtt = libcm::Duration::from_millis(10);
                    cm.update(flow, Feedback::acked(bytes.get(), rtt))?;
                    break;
                }
            }
            Some(_) => {}
            None if Instant::now() > end => anyhow::bail!("no grant within {limit:?}"),
            None => cm.wait(Some(Duration::from_millis(5)))?,
        }
    }
    cm.query(f)?;
    Ok(())
}

/// Open and close flows as fast as the daemon lets it.
fn churner(socket: &Path, _limit: usize, stop: &AtomicBool, t: &Tally) {
    let mut n = 0usize;
    while !stop.load(Ordering::Relaxed) {
        let Ok(mut cm) = Cm::connect(socket) else {
            std::thread::sleep(Duration::from_millis(10));
            continue;
        };
        for _ in 0..500 {
            n += 1;
            match cm.open(None, host(1000 + n % 97)) {
                Ok(f) => {
                    let _ = cm.request(f);
                    let _ = cm.close(f);
                    t.churn_ops.fetch_add(2, Ordering::Relaxed);
                }
                // Rate limiting is the daemon protecting others.
                Err(e) if e.code() == -11 => std::thread::sleep(Duration::from_millis(1)),
                Err(e) => {
                    t.note_violation(format!("churner: open failed: {e}"));
                    return;
                }
            }
            if stop.load(Ordering::Relaxed) {
                return;
            }
        }
    }
}

/// Start children that make calls and kill them (SIGKILL) mid-call.
fn killer(socket: &Path, _limit: usize, stop: &AtomicBool, t: &Tally) {
    let Ok(exe) = std::env::current_exe() else {
        t.note_violation("killer: no executable path".to_owned());
        return;
    };
    let mut k: u64 = 0;
    while !stop.load(Ordering::Relaxed) {
        k += 1;
        let child = Command::new(&exe)
            .args(["soak", "--child", "busy", "--socket"])
            .arg(socket)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
        let Ok(mut child) = child else {
            t.note_violation("killer: could not start a child".to_owned());
            return;
        };
        // Somewhere between 50 and 300 ms into its calls.
        std::thread::sleep(Duration::from_millis(50 + (k * 37) % 250));
        let pid = child.id();
        let _ = child.kill();
        let _ = child.wait();
        t.kills.fetch_add(1, Ordering::Relaxed);
        t.killed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((pid, Instant::now()));
    }
}

/// A client that asks for grants and never reads them, for 2 s at a time.
fn deaf(socket: &Path, _limit: usize, stop: &AtomicBool, t: &Tally) {
    while !stop.load(Ordering::Relaxed) {
        if let Ok(mut cm) = Cm::connect(socket) {
            let flows: Vec<FlowId> = (0..8)
                .filter_map(|i| cm.open(None, host(2000 + i)).ok())
                .collect();
            for _ in 0..20 {
                for &f in &flows {
                    let _ = cm.request_mtus(f, 64);
                }
                let _ = cm.flush();
                std::thread::sleep(Duration::from_millis(100));
                if stop.load(Ordering::Relaxed) {
                    break;
                }
            }
            t.deaf.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Raw connections that say Hello and then write garbage frames.
fn garbage(socket: &Path, _limit: usize, stop: &AtomicBool, t: &Tally) {
    use rustix::net::{
        AddressFamily, SendFlags, SocketAddrUnix, SocketFlags, SocketType, connect, send,
        socket_with,
    };
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    while !stop.load(Ordering::Relaxed) {
        let Ok(fd) = socket_with(
            AddressFamily::UNIX,
            SocketType::SEQPACKET,
            SocketFlags::CLOEXEC,
            None,
        ) else {
            return;
        };
        let Ok(addr) = SocketAddrUnix::new(socket) else {
            return;
        };
        if connect(&fd, &addr).is_err() {
            std::thread::sleep(Duration::from_millis(20));
            continue;
        }
        let mut frame = cm_ipc::Frame::new();
        frame.push(&cm_ipc::ToDaemon::Hello {
            version: cm_ipc::VERSION,
        });
        let _ = send(&fd, frame.bytes(), SendFlags::NOSIGNAL);
        for _ in 0..20 {
            // xorshift: reproducible garbage of 1..=256 bytes.
            let mut buf = Vec::new();
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            for _ in 0..=(x % 256) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                buf.push(x as u8);
            }
            if send(&fd, &buf, SendFlags::NOSIGNAL | SendFlags::DONTWAIT).is_err() {
                break; // dropped by the daemon: as it should
            }
            t.garbage.fetch_add(1, Ordering::Relaxed);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Open flows past the limit: the offender gets the limit's error, at the
/// limit exactly.
fn limit_exceeder(socket: &Path, limit: usize, stop: &AtomicBool, t: &Tally) {
    while !stop.load(Ordering::Relaxed) {
        let Ok(mut cm) = Cm::connect(socket) else {
            std::thread::sleep(Duration::from_millis(50));
            continue;
        };
        let mut opened = 0usize;
        let err = loop {
            match cm.open(None, host(3000 + opened % 7)) {
                Ok(_) => opened += 1,
                Err(e) => break e,
            }
            if opened > limit + 1 {
                break CmError::Invalid("limit not enforced");
            }
        };
        match (&err, opened == limit) {
            // EMFILE: a limit reached (named in the refusal).
            (e, true) if e.code() == -24 => {
                t.limit_hits.fetch_add(1, Ordering::Relaxed);
            }
            (CmError::Daemon(libcm::ErrorCode::RateLimited), _) => {}
            _ => t.note_violation(format!("flow limit {limit}: opened {opened}, then {err}")),
        }
        drop(cm);
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// A second user's clients (root only): a child that drops to `nobody`
/// and makes calls for a second.
fn other_user(socket: &Path, stop: &AtomicBool, t: &Tally) {
    let Ok(exe) = std::env::current_exe() else {
        return;
    };
    while !stop.load(Ordering::Relaxed) {
        let status = Command::new(&exe)
            .args(["soak", "--child", "nobody", "--socket"])
            .arg(socket)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        if matches!(status, Ok(s) if s.success()) {
            t.other_user.fetch_add(1, Ordering::Relaxed);
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// A child client (`cm soak --child ROLE`): `busy` opens flows and calls
/// until killed; `nobody` becomes uid 65534 and makes calls for a second.
pub(crate) fn child_main(role: &str, socket: &Path) -> Result<()> {
    let socket: PathBuf = socket.to_path_buf();
    let secs = match role {
        "busy" => 3600.0,
        "nobody" => {
            let nobody = rustix::process::Uid::from_raw(65534);
            let gid = rustix::process::Gid::from_raw(65534);
            rustix::thread::set_thread_gid(gid).context("setgid")?;
            rustix::thread::set_thread_uid(nobody).context("setuid")?;
            1.0
        }
        other => anyhow::bail!("unknown child role {other}"),
    };
    let mut cm = Cm::connect(&socket)?;
    let flows: Vec<FlowId> = (0..8)
        .filter_map(|i| cm.open(None, host(4000 + i)).ok())
        .collect();
    let end = Instant::now() + Duration::from_secs_f64(secs);
    while Instant::now() < end {
        for &f in &flows {
            cm.request(f)?;
            cm.query(f)?;
        }
        while let Some(ev) = cm.poll_event()? {
            if let CmEvent::Send { flow, bytes } = ev {
                cm.notify(flow, bytes.get())?;
            }
        }
    }
    Ok(())
}
