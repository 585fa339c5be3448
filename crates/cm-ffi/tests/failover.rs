//! The daemon going away under a running client (issue: the daemon at host
//! scale and under faults): `cmd` is SIGKILLed in the middle of a transfer
//! and started again, by a libcm client here and a C client
//! (tests/c/failover_client.c). The clients keep sending, congestion
//! controlled by an embedded CM from their last-known window (never
//! unlimited), with no error and no hang, and rejoin the restarted daemon
//! within 2 s. A second test restarts the daemon 20 times during one run
//! and checks that nothing leaks.
//!
//! The transfer runs over a modelled bottleneck: a FIFO queue drained at
//! `LINK` bytes/s, dropping what would wait longer than `QUEUE`, with a
//! fixed propagation delay. Each grant is sent (notified) at once; its
//! fate comes back as `cm_update` when the model says it arrived (or was
//! dropped). A sender without congestion control would fill the queue at
//! whatever rate the loop runs.

#![allow(clippy::unwrap_used)]

mod common;

use std::collections::VecDeque;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use common::DaemonProcess;
use libcm::{Bytes, Cm, CmEvent, Feedback, FlowId, LossMode, Status};

/// The modelled bottleneck: 8 Mbit/s.
const LINK: f64 = 1_000_000.0;
/// Longest queueing delay before a drop.
const QUEUE: Duration = Duration::from_millis(40);
/// Round-trip propagation delay.
const PROP: Duration = Duration::from_millis(20);

/// A packet on its way: when its fate is known, its size, delivered or not.
struct InFlight {
    flow: FlowId,
    due: Instant,
    bytes: u64,
    delivered: bool,
    sent: Instant,
}

/// One client's transfer on the modelled path.
struct Transfer {
    cm: Cm,
    free_at: Instant,
    pipe: VecDeque<InFlight>,
    /// (time, bytes granted) of every grant.
    grants: Vec<(Instant, u64)>,
    /// (time, status) of every move.
    moves: Vec<(Instant, Status)>,
    errors: Vec<String>,
}

impl Transfer {
    fn new(socket: &str, flows: usize) -> Transfer {
        let mut cm = Cm::connect(socket).unwrap();
        let dst = "192.0.2.40:5000".parse().unwrap();
        let flows: Vec<FlowId> = (0..flows).map(|_| cm.open(None, dst).unwrap()).collect();
        for &f in &flows {
            cm.request(f).unwrap();
        }
        Transfer {
            cm,
            free_at: Instant::now(),
            pipe: VecDeque::new(),
            grants: Vec::new(),
            moves: Vec::new(),
            errors: Vec::new(),
        }
    }

    /// Run the loop until `until`.
    fn run_until(&mut self, until: Instant) {
        while Instant::now() < until {
            self.step();
        }
    }

    fn step(&mut self) {
        let now = Instant::now();
        // Feedback for packets whose fate is known.
        while self.pipe.front().is_some_and(|p| p.due <= now) {
            let p = self.pipe.pop_front().unwrap();
            let fb = Feedback {
                nsent: Bytes(p.bytes),
                nrecd: Bytes(if p.delivered { p.bytes } else { 0 }),
                loss: if p.delivered {
                    LossMode::None
                } else {
                    LossMode::Transient
                },
                rtt: p
                    .delivered
                    .then(|| cm_rtt(now.saturating_duration_since(p.sent))),
                lost_sent: None,
            };
            if let Err(e) = self.cm.update(p.flow, fb) {
                self.errors.push(format!("update: {e}"));
            }
        }
        loop {
            match self.cm.poll_event() {
                Ok(Some(CmEvent::Send { flow, bytes })) => self.send(flow, bytes.get()),
                Ok(Some(CmEvent::Status { status })) => self.moves.push((Instant::now(), status)),
                Ok(Some(CmEvent::GrantExpired { flow, .. })) => {
                    let _ = self.cm.request(flow);
                }
                Ok(Some(_)) => {}
                Ok(None) => break,
                Err(e) => {
                    self.errors.push(format!("poll_event: {e}"));
                    break;
                }
            }
        }
        let next = self
            .pipe
            .front()
            .map(|p| p.due.saturating_duration_since(Instant::now()));
        let limit = next
            .unwrap_or(Duration::from_millis(5))
            .min(Duration::from_millis(5));
        if let Err(e) = self.cm.wait(Some(limit)) {
            self.errors.push(format!("wait: {e}"));
        }
    }

    /// A grant: the packet enters the modelled queue (or is dropped).
    fn send(&mut self, flow: FlowId, bytes: u64) {
        let now = Instant::now();
        self.grants.push((now, bytes));
        if let Err(e) = self.cm.notify(flow, bytes) {
            self.errors.push(format!("notify: {e}"));
        }
        let start = self.free_at.max(now);
        let delivered = start.saturating_duration_since(now) <= QUEUE;
        let due = if delivered {
            self.free_at = start + Duration::from_secs_f64(bytes as f64 / LINK);
            self.free_at + PROP
        } else {
            // Its loss shows when later packets arrive: about an RTT later.
            start + PROP
        };
        let at = self.pipe.partition_point(|p| p.due <= due);
        self.pipe.insert(
            at,
            InFlight {
                flow,
                due,
                bytes,
                delivered,
                sent: now,
            },
        );
        if let Err(e) = self.cm.request(flow) {
            self.errors.push(format!("request: {e}"));
        }
    }

    /// Bytes granted per second in `[from, to)`.
    fn rate(&self, from: Instant, to: Instant) -> f64 {
        let b: u64 = self
            .grants
            .iter()
            .filter(|(t, _)| *t >= from && *t < to)
            .map(|(_, b)| b)
            .sum();
        b as f64 / to.saturating_duration_since(from).as_secs_f64()
    }

    /// The highest rate over any `w`-long window starting in `[from, to)`.
    fn peak_rate(&self, from: Instant, to: Instant, w: Duration) -> f64 {
        let mut t = from;
        let mut peak: f64 = 0.0;
        while t + w <= to {
            peak = peak.max(self.rate(t, t + w));
            t += Duration::from_millis(10);
        }
        peak
    }
}

/// The tests count this process's descriptors and threads: one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(PoisonError::into_inner)
}

fn cm_rtt(d: Duration) -> libcm::Duration {
    libcm::Duration::from_micros(u64::try_from(d.as_micros()).unwrap_or(u64::MAX).max(1))
}

/// Flows of all clients the daemon at `socket` lists.
fn daemon_flows(socket: &str) -> usize {
    let mut cm = Cm::connect(socket).unwrap();
    cm.stat().unwrap().flows.len()
}

#[test]
fn sigkilled_daemon_the_client_carries_on_and_rejoins() {
    let _serial = serial();
    let mut daemon = DaemonProcess::start();
    let socket = daemon.socket().to_owned();
    let mut x = Transfer::new(&socket, 2);
    let t0 = Instant::now();
    x.run_until(t0 + Duration::from_secs(3));
    let before = x.rate(t0 + Duration::from_secs(2), t0 + Duration::from_secs(3));
    eprintln!(
        "before the kill: {:.0} kB/s over a {:.0} kB/s link",
        before / 1e3,
        LINK / 1e3
    );
    assert!(
        before > 0.5 * LINK,
        "not yet at the link's rate: {before:.0} B/s"
    );
    assert_eq!(x.cm.status(), Status::Daemon);

    let killed = Instant::now();
    daemon.kill_now();
    x.run_until(killed + Duration::from_secs(2));
    let noticed = x
        .moves
        .iter()
        .find(|(_, s)| *s == Status::Fallback)
        .map(|(t, _)| t.saturating_duration_since(killed))
        .expect("the client never fell back");
    let after = x.rate(
        killed + Duration::from_millis(200),
        killed + Duration::from_secs(2),
    );
    let peak = x.peak_rate(
        killed,
        killed + Duration::from_secs(2),
        Duration::from_millis(200),
    );
    eprintln!(
        "fell back {:.0} ms after the kill; then {:.0} kB/s, peak over 200 ms {:.0} kB/s",
        noticed.as_secs_f64() * 1e3,
        after / 1e3,
        peak / 1e3
    );
    assert!(
        noticed < Duration::from_millis(500),
        "noticed after {noticed:?}"
    );
    assert!(after > 0.3 * LINK, "stopped sending: {after:.0} B/s");
    assert!(
        peak < 2.0 * LINK,
        "not congestion controlled: {peak:.0} B/s"
    );
    assert_eq!(x.cm.status(), Status::Fallback);

    let restarted = Instant::now();
    daemon.restart();
    x.run_until(restarted + Duration::from_secs(3));
    let rejoined = x
        .moves
        .iter()
        .find(|(t, s)| *s == Status::Daemon && *t >= restarted)
        .map(|(t, _)| t.saturating_duration_since(restarted))
        .expect("the client never rejoined");
    eprintln!(
        "rejoined {:.0} ms after the restart",
        rejoined.as_secs_f64() * 1e3
    );
    assert!(
        rejoined < Duration::from_secs(2),
        "rejoined after {rejoined:?}"
    );
    assert_eq!(x.cm.status(), Status::Daemon);
    assert_eq!(
        daemon_flows(&socket),
        2,
        "the daemon does not list the client's flows"
    );
    let end = x.rate(
        restarted + Duration::from_secs(2),
        restarted + Duration::from_secs(3),
    );
    assert!(end > 0.3 * LINK, "slow after rejoining: {end:.0} B/s");
    assert!(x.errors.is_empty(), "calls failed: {:?}", x.errors);
}

/// Open descriptors of this process.
fn fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

/// Threads of this process.
fn threads() -> usize {
    std::fs::read_dir("/proc/self/task").unwrap().count()
}

#[test]
fn twenty_restarts_during_one_run_leak_nothing() {
    let _serial = serial();
    let mut daemon = DaemonProcess::start();
    let socket = daemon.socket().to_owned();
    let (fds0, threads0) = (fds(), threads());
    let mut x = Transfer::new(&socket, 3);
    let fds1 = fds();
    for i in 0..20 {
        x.run_until(Instant::now() + Duration::from_millis(150));
        if i % 2 == 0 {
            daemon.kill_now();
        }
        daemon.restart();
    }
    // Back on the last daemon, settled.
    let deadline = Instant::now() + Duration::from_secs(3);
    while x.cm.status() != Status::Daemon && Instant::now() < deadline {
        x.step();
    }
    x.run_until(Instant::now() + Duration::from_millis(500));
    let moves = x.moves.len();
    eprintln!(
        "{moves} moves; fds {fds0} -> {fds1} (connected) -> {} (end); threads {threads0} -> {}",
        fds(),
        threads()
    );
    assert_eq!(x.cm.status(), Status::Daemon);
    assert!(moves >= 20, "only {moves} moves for 20 restarts");
    assert!(x.errors.is_empty(), "calls failed: {:?}", x.errors);
    assert_eq!(daemon_flows(&socket), 3);
    // The client holds what one connection needs, not one per restart.
    assert!(fds() <= fds1 + 2, "descriptors leak: {fds1} -> {}", fds());
    assert_eq!(threads(), threads0, "threads leak");
    let daemon_fds = std::fs::read_dir(format!("/proc/{}/fd", daemon.pid()))
        .unwrap()
        .count();
    eprintln!("the last daemon holds {daemon_fds} descriptors");
    drop(x);
    assert!(fds() <= fds0, "descriptors left after the client closed");
}

/// The same with a C client (tests/c/failover_client.c): killed at 2 s,
/// restarted at 4 s, the client runs 7 s without a failed call, falls
/// back, stays congestion controlled and rejoins within 2 s.
#[test]
fn a_c_client_carries_on_and_rejoins() {
    let _serial = serial();
    let dir = common::TempDir::new("failover-c");
    let bin = common::build_c_test("failover_client", &dir.0);
    let mut daemon = DaemonProcess::start();
    let start = Instant::now();
    let child = std::process::Command::new(&bin)
        .arg("7")
        .env("CM_SOCKET", daemon.socket())
        .env_remove("LD_LIBRARY_PATH")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(2).saturating_sub(start.elapsed()));
    let killed = start.elapsed().as_secs_f64();
    daemon.kill_now();
    std::thread::sleep(Duration::from_secs(4).saturating_sub(start.elapsed()));
    let restarted = start.elapsed().as_secs_f64();
    daemon.restart();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    eprintln!("{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{stdout}");
    assert!(stdout.contains("errors 0"), "{stdout}");
    let statuses: Vec<(f64, i32)> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("status "))
        .filter_map(|l| {
            let (t, s) = l.split_once(' ')?;
            Some((t.parse().ok()?, s.parse().ok()?))
        })
        .collect();
    let windows: Vec<(f64, f64, f64)> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("window "))
        .filter_map(|l| {
            let mut w = l.split(' ').map(|x| x.parse::<f64>().ok());
            Some((w.next()??, w.next()??, w.next()??))
        })
        .collect();
    eprintln!("statuses {statuses:?}; killed at {killed:.2} s, restarted at {restarted:.2} s");
    // CM_STATUS_DAEMON 2, CM_STATUS_FALLBACK 3.
    let fell = statuses.iter().find(|s| s.1 == 3).expect("never fell back");
    let back = statuses
        .iter()
        .find(|s| s.1 == 2 && s.0 > fell.0)
        .expect("never rejoined");
    assert!(
        back.0 - restarted < 2.0,
        "rejoined {:.2} s after the restart",
        back.0 - restarted
    );
    let rate = |from: f64, to: f64| {
        let w: Vec<f64> = windows
            .iter()
            .filter(|(t, _, _)| *t >= from && *t < to)
            .map(|(_, b, _)| *b * 10.0)
            .collect();
        let peak = w.iter().copied().fold(0.0, f64::max);
        (w.iter().sum::<f64>() / w.len().max(1) as f64, peak)
    };
    let (during, peak) = rate(fell.0 + 0.2, restarted);
    eprintln!(
        "in fallback: mean {:.0} kB/s, peak over 100 ms {:.0} kB/s",
        during / 1e3,
        peak / 1e3
    );
    assert!(
        during > 0.3 * LINK,
        "stopped sending in fallback: {during:.0} B/s"
    );
    assert!(
        peak < 2.0 * LINK,
        "not congestion controlled: {peak:.0} B/s"
    );
    // Sleeping in poll() on cm_fd(): a descriptor left readable by the dead
    // daemon would spin the loop (tens of thousands of turns per 100 ms);
    // a live one wakes it for grants and feedback (a few hundred).
    let busiest = windows.iter().map(|w| w.2).fold(0.0, f64::max);
    eprintln!("loop turns per 100 ms: at most {busiest:.0}");
    assert!(
        busiest < 5000.0,
        "the loop spins: {busiest:.0} turns in 100 ms"
    );
}

/// A client that starts while its daemon is down (the socket file is
/// there, nobody listens) runs on an embedded CM standing in, and joins
/// the daemon once it listens, with its flows.
#[test]
fn a_client_started_before_its_daemon_joins_it() {
    let _serial = serial();
    let mut daemon = DaemonProcess::start();
    let socket = daemon.socket().to_owned();
    daemon.kill_now();
    assert!(
        std::path::Path::new(&socket).exists(),
        "no stale socket file"
    );
    let mut cm = Cm::connect_or_stand_in(&socket).unwrap();
    assert_eq!(cm.status(), Status::Fallback);
    let f = cm.open(None, "192.0.2.42:7".parse().unwrap()).unwrap();
    cm.request(f).unwrap();
    let granted = (0..100).any(|_| {
        cm.wait(Some(Duration::from_millis(5))).unwrap();
        matches!(cm.poll_event(), Ok(Some(CmEvent::Send { .. })))
    });
    assert!(granted, "no grant from the stand-in");
    cm.notify(f, 1460).unwrap();
    let restarted = Instant::now();
    daemon.restart();
    while cm.status() != Status::Daemon {
        assert!(restarted.elapsed() < Duration::from_secs(3), "never joined");
        cm.wait(Some(Duration::from_millis(20))).unwrap();
        let _ = cm.poll_event().unwrap();
    }
    assert_eq!(daemon_flows(&socket), 1);
    cm.update(f, Feedback::acked(1460, libcm::Duration::from_millis(10)))
        .unwrap();
    assert!(cm.query(f).is_ok());
    cm.close(f).unwrap();
}
