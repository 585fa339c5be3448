//! Robustness and trust (issue 4 item 7; cm-implementation-linux §5,
//! RFC 3124 §6): crashed clients are reclaimed, users are kept apart,
//! hostile bytes and floods get errors while everyone else is served.
//!
//! Child processes are this test binary re-run on one `#[ignore]`d test,
//! `child_main`, told what to do through the environment.

#![allow(clippy::unwrap_used)]

mod common;

use std::io::{BufRead, BufReader};

use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration as StdDuration, Instant};

use common::{TestDaemon, next_event};
use libcm::{Cm, CmError, CmEvent, Duration, ErrorCode, Feedback, FlowId, MacroflowId};

fn dst() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 7000))
}

/// Kills the child on every exit path.
struct ChildGuard(Child);
impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn_child(socket: &std::path::Path, role: &str, env: &[(&str, String)]) -> ChildGuard {
    let mut c = Command::new(std::env::current_exe().expect("test binary"));
    c.args([
        "--exact",
        "child_main",
        "--ignored",
        "--nocapture",
        "--test-threads=1",
    ])
    .env("CM_TEST_CHILD_SOCKET", socket)
    .env("CM_TEST_CHILD_ROLE", role)
    .stdout(Stdio::piped())
    .stderr(Stdio::inherit());
    for (k, v) in env {
        c.env(k, v);
    }
    ChildGuard(c.spawn().expect("spawn child"))
}

/// Read the child's stdout until a line containing `marker` (libtest
/// prints the child's output on its "test child_main ..." line), for at
/// most 20 s.
fn wait_line(child: &mut ChildGuard, marker: &str) {
    let out = child.0.stdout.take().expect("child stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        // Drain to EOF even after the marker: a closed pipe would make the
        // child's later output fail (EPIPE) and its exit status with it.
        for line in BufReader::new(out).lines() {
            let Ok(line) = line else { break };
            let _ = tx.send(line);
        }
    });
    let deadline = Instant::now() + StdDuration::from_secs(20);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) if line.contains(marker) => return,
            Ok(_) => {}
            Err(_) => panic!("child did not print {marker}"),
        }
    }
}

/// The child side of the multi-process tests.
#[test]
#[ignore = "run only as a child process by the tests below"]
fn child_main() {
    let Some(socket) = std::env::var_os("CM_TEST_CHILD_SOCKET") else {
        return;
    };
    let role = std::env::var("CM_TEST_CHILD_ROLE").unwrap_or_default();
    match role.as_str() {
        // Open three flows, take grants and never answer them, then hang.
        "hold" => {
            let mut cm = Cm::connect(&socket).unwrap();
            for _ in 0..3 {
                let f = cm.open(None, dst()).unwrap();
                cm.request_mtus(f, 8).unwrap();
            }
            let _ = next_event(&mut cm);
            println!("READY");
            loop {
                std::thread::sleep(StdDuration::from_secs(1));
            }
        }
        // Become another user, then try to touch the parent's flow.
        "intruder" => {
            become_nobody();
            let theirs =
                FlowId::from_u64(std::env::var("CM_VICTIM_FLOW").unwrap().parse().unwrap());
            let their_mf =
                MacroflowId::from_u64(std::env::var("CM_VICTIM_MF").unwrap().parse().unwrap());
            let mut cm = Cm::connect(&socket).unwrap();
            assert_ne!(cm.uid(), 0, "the daemon must see the new uid");
            assert!(matches!(
                cm.query(theirs),
                Err(CmError::Daemon(ErrorCode::UnknownFlow))
            ));
            assert!(matches!(
                cm.macroflow_of(theirs),
                Err(CmError::Daemon(ErrorCode::UnknownFlow))
            ));
            // libcm refuses it at the call (it is not a flow of this
            // handle), as an embedded CM would ...
            assert!(matches!(
                cm.close(theirs),
                Err(CmError::Core(cm_core::Error::UnknownFlow(f))) if f == theirs
            ));
            // ... and the daemon refuses it too when the call gets there.
            daemon_refuses_a_raw_close(&socket, theirs);
            let mine = cm.open(None, dst()).unwrap();
            assert_ne!(
                cm.macroflow_of(mine).unwrap(),
                their_mf,
                "users must not share"
            );
            assert!(matches!(
                cm.set_macroflow(mine, Some(their_mf)),
                Err(CmError::Daemon(ErrorCode::UnknownMacroflow))
            ));
            let s = cm.stat().unwrap();
            assert!(
                s.flows.iter().all(|f| f.id != theirs.to_u64()),
                "stat leaks"
            );
            println!("INTRUDER-DONE");
        }
        other => panic!("unknown role {other}"),
    }
}

#[allow(unsafe_code)]
fn become_nobody() {
    // SAFETY: plain system calls with integer arguments in a
    // single-threaded child before any other work.
    unsafe {
        assert_eq!(libc::setgid(65534), 0, "setgid");
        assert_eq!(libc::setuid(65534), 0, "setuid");
    }
}

fn flows_in(cm: &mut Cm, mf: MacroflowId) -> u32 {
    cm.stat()
        .unwrap()
        .macroflows
        .iter()
        .find(|m| m.id == mf.to_u64())
        .map_or(0, |m| m.flows)
}

#[test]
fn killed_client_has_its_flows_reclaimed_and_others_go_on() {
    let d = TestDaemon::start();
    let mut cm = d.client();
    let mine = cm.open(None, dst()).unwrap();
    let mf = cm.macroflow_of(mine).unwrap();
    let mut child = spawn_child(&d.path, "hold", &[]);
    wait_line(&mut child, "READY");
    assert_eq!(
        flows_in(&mut cm, mf),
        4,
        "the child's flows share our macroflow"
    );
    child.0.kill().unwrap();
    child.0.wait().unwrap();
    let deadline = Instant::now() + StdDuration::from_secs(2);
    while flows_in(&mut cm, mf) != 1 {
        assert!(Instant::now() < deadline, "flows not reclaimed");
        std::thread::sleep(StdDuration::from_millis(10));
    }
    // The window the dead client held is free again: our flow moves data.
    let mut sent = 0u64;
    while sent < 200 * 1460 {
        cm.request(mine).unwrap();
        let CmEvent::Send { bytes, .. } = next_event(&mut cm) else {
            panic!("expected a grant");
        };
        cm.notify(mine, bytes.get()).unwrap();
        cm.update(mine, Feedback::acked(bytes.get(), Duration::from_millis(1)))
            .unwrap();
        sent += bytes.get();
    }
}

#[test]
fn another_user_cannot_see_or_steer_our_flows() {
    if rustix::process::getuid().as_raw() != 0 {
        eprintln!("skipped: needs root to run a client as another uid");
        return;
    }
    let d = TestDaemon::start();
    let mut cm = d.client();
    let mine = cm.open(None, dst()).unwrap();
    let mf = cm.macroflow_of(mine).unwrap();
    let mut child = spawn_child(
        &d.path,
        "intruder",
        &[
            ("CM_VICTIM_FLOW", mine.to_u64().to_string()),
            ("CM_VICTIM_MF", mf.to_u64().to_string()),
        ],
    );
    wait_line(&mut child, "INTRUDER-DONE");
    let status = child.0.wait().unwrap();
    assert!(status.success(), "the intruder's assertions failed");
    // Our flow is untouched.
    assert_eq!(cm.macroflow_of(mine).unwrap(), mf);
    cm.request(mine).unwrap();
    assert!(matches!(next_event(&mut cm), CmEvent::Send { .. }));
}

#[test]
fn hostile_bytes_get_errors_and_everyone_else_is_served() {
    use cm_ipc::{Frame, ToClient, ToDaemon};
    let d = TestDaemon::start();
    let mut good = d.client();
    let f = good.open(None, dst()).unwrap();
    let fd = common::raw::connect_raw(&d.path);
    let malformed = |r: &[ToClient]| {
        matches!(
            r,
            [ToClient::Error {
                code: ErrorCode::Malformed,
                ..
            }]
        )
    };
    // Garbage, a wrong magic, a truncated frame, a lying count.
    assert!(malformed(&common::raw::roundtrip(&fd, b"\xff\x00garbage")));
    assert!(malformed(&common::raw::roundtrip(
        &fd,
        &[0x43, 0x4d, cm_ipc::VERSION, 0, 5, 0, 1]
    )));
    let mut fr = Frame::new();
    fr.push(&ToDaemon::Ping { seq: 1 });
    let mut bytes = fr.finish();
    bytes.truncate(bytes.len() - 1);
    assert!(malformed(&common::raw::roundtrip(&fd, &bytes)));
    // Calls before Hello are refused.
    fr.push(&ToDaemon::Ping { seq: 2 });
    let r = common::raw::roundtrip(&fd, &fr.finish());
    assert!(matches!(
        r[..],
        [ToClient::Error {
            seq: 2,
            code: ErrorCode::NotIntroduced,
            ..
        }]
    ));
    // A wrong protocol version is refused.
    fr.push(&ToDaemon::Hello { version: 99 });
    let r = common::raw::roundtrip(&fd, &fr.finish());
    assert!(matches!(
        r[..],
        [ToClient::Error {
            code: ErrorCode::UnsupportedVersion,
            ..
        }]
    ));
    // Introduced properly, guessing flow ids gets nothing.
    fr.push(&ToDaemon::Hello {
        version: cm_ipc::VERSION,
    });
    fr.push(&ToDaemon::Query {
        seq: 3,
        flow: f.to_u64(),
    });
    let r = common::raw::roundtrip(&fd, &fr.finish());
    assert!(matches!(r[0], ToClient::Welcome { .. }));
    assert!(r.iter().any(|m| matches!(
        m,
        ToClient::Error {
            seq: 3,
            code: ErrorCode::UnknownFlow,
            ..
        }
    )));
    // The well-behaved client never noticed.
    good.request(f).unwrap();
    assert!(matches!(next_event(&mut good), CmEvent::Send { .. }));
}

#[test]
fn floods_are_rate_limited_per_client() {
    let d = TestDaemon::with_config(cm_daemon::DaemonConfig {
        max_messages_per_sec: 100,
        ..Default::default()
    });
    let mut flood = d.client();
    let mut calm = d.client();
    let f = flood.open(None, dst()).unwrap();
    let g = calm
        .open(None, SocketAddr::from(([127, 0, 0, 3], 1)))
        .unwrap();
    let reqs: Vec<(FlowId, u32)> = (0..500).map(|_| (f, 1)).collect();
    flood.bulk_request(&reqs).unwrap();
    let deadline = Instant::now() + StdDuration::from_secs(2);
    let mut limited = 0;
    while Instant::now() < deadline && limited == 0 {
        if let Some(CmEvent::Error {
            code: ErrorCode::RateLimited,
            ..
        }) = flood.poll_event().unwrap()
        {
            limited += 1;
        } else {
            flood.wait(Some(StdDuration::from_millis(10))).unwrap();
        }
    }
    assert!(
        limited > 0,
        "a flood of 500 calls at 100/s must be refused in part"
    );
    calm.request(g).unwrap();
    assert!(matches!(next_event(&mut calm), CmEvent::Send { .. }));
}

#[test]
fn per_client_flow_limit() {
    let d = TestDaemon::with_config(cm_daemon::DaemonConfig {
        max_flows_per_client: 3,
        ..Default::default()
    });
    let mut cm = d.client();
    for _ in 0..3 {
        cm.open(None, dst()).unwrap();
    }
    // The refusal names the limit, and keeps the limit's code (EMFILE).
    assert_refused(cm.open(None, dst()), "max_flows_per_client = 3");
}

/// `r` is a refusal that names `limit` (a `cmd.toml` key and its value)
/// with the limit's code, EMFILE in C.
fn assert_refused<T: std::fmt::Debug>(r: Result<T, CmError>, limit: &str) {
    match r {
        Err(
            e @ CmError::Refused {
                code: ErrorCode::LimitReached,
                ..
            },
        ) => {
            assert_eq!(e.to_string(), format!("refused: limit {limit} reached"));
            assert_eq!(e.code(), -24);
        }
        other => panic!("expected a refusal naming {limit}: {other:?}"),
    }
}

/// Over its memory budget the daemon refuses new flows and new clients,
/// naming the limit, and keeps serving the flows it has. (The daemon here
/// is a thread of the test process, whose resident set is far above 1 MiB.)
#[test]
fn over_its_memory_budget_the_daemon_refuses_new_flows_and_clients_only() {
    let d = TestDaemon::with_config(cm_daemon::DaemonConfig {
        max_memory_mib: 1,
        ..Default::default()
    });
    let mut cm = d.client();
    let f = cm.open(None, dst()).unwrap();
    // The budget is read once a second.
    std::thread::sleep(StdDuration::from_millis(1300));
    assert_refused(cm.open(None, dst()), "max_memory_mib = 1");
    assert_refused(Cm::connect(&d.path), "max_memory_mib = 1");
    cm.request(f).unwrap();
    assert!(matches!(next_event(&mut cm), CmEvent::Send { .. }));
    assert!(cm.query(f).is_ok());
}

/// One user cannot hold more than `max_clients_per_user` connections (each
/// costs the daemon a shared region); a closed one frees its place.
#[test]
fn per_user_client_limit() {
    let d = TestDaemon::with_config(cm_daemon::DaemonConfig {
        max_clients_per_user: 2,
        ..Default::default()
    });
    let a = d.client();
    let _b = d.client();
    // A third client of the same user is refused, told which limit.
    assert_refused(Cm::connect(&d.path), "max_clients_per_user = 2");
    drop(a);
    let deadline = Instant::now() + StdDuration::from_secs(2);
    loop {
        match Cm::connect(&d.path) {
            Ok(_) => break,
            Err(e) => {
                assert!(Instant::now() < deadline, "place not freed: {e}");
                std::thread::sleep(StdDuration::from_millis(5));
            }
        }
    }
}

/// The daemon holds at most `max_clients` connections of all users; the
/// next one is told which limit it met.
#[test]
fn client_limit_is_named_to_the_refused_client() {
    let d = TestDaemon::with_config(cm_daemon::DaemonConfig {
        max_clients: 2,
        ..Default::default()
    });
    let mut a = d.client();
    let _b = d.client();
    assert_refused(Cm::connect(&d.path), "max_clients = 2");
    // The clients already there are not affected.
    assert!(a.open(None, dst()).is_ok());
}

#[test]
fn stale_socket_is_replaced_but_a_live_one_is_not() {
    let d = TestDaemon::start();
    let err = cm_daemon::Daemon::bind(cm_daemon::DaemonConfig::default(), &d.path);
    assert!(err.is_err(), "must refuse to steal a live daemon's socket");
    let stale = d.path.with_file_name("stale.sock");
    drop(std::os::unix::net::UnixListener::bind(&stale).unwrap());
    assert!(stale.exists());
    let d2 = cm_daemon::Daemon::bind(cm_daemon::DaemonConfig::default(), &stale);
    assert!(d2.is_ok(), "a stale socket file is replaced");
}

/// A client that breaks the layout of its shared-memory ring (cm_ipc::shm)
/// is disconnected; the daemon never faults on its memory, and the other
/// clients are served throughout.
#[test]
fn a_client_that_corrupts_its_shared_ring_is_dropped_and_others_go_on() {
    use cm_ipc::shm::{Doorbell, Region, Side, recv_with_fds};
    use cm_ipc::{Frame, ToClient, ToDaemon};
    use std::os::fd::AsFd;
    let d = TestDaemon::start();
    let mut good = d.client();
    let f = good.open(None, dst()).unwrap();
    // A hand-made client: Hello and Attach, then the region and doorbells.
    let fd = common::raw::connect_raw(&d.path);
    let mut fr = Frame::new();
    fr.push(&ToDaemon::Hello {
        version: cm_ipc::VERSION,
    });
    fr.push(&ToDaemon::Attach { seq: 1 });
    rustix::net::send(&fd, &fr.finish(), rustix::net::SendFlags::empty()).unwrap();
    let mut fds = Vec::new();
    let mut buf = vec![0u8; 65536];
    let deadline = Instant::now() + StdDuration::from_secs(5);
    while fds.is_empty() {
        assert!(Instant::now() < deadline, "no Attached");
        if let Some((n, got)) = recv_with_fds(fd.as_fd(), &mut buf).unwrap() {
            let msgs: Vec<ToClient> = cm_ipc::decode_frame(&buf[..n]).unwrap();
            if msgs
                .iter()
                .any(|m| matches!(m, ToClient::Attached { seq: 1, .. }))
            {
                fds = got;
            }
        } else {
            std::thread::sleep(StdDuration::from_millis(1));
        }
    }
    assert_eq!(fds.len(), cm_ipc::shm::ATTACH_FDS);
    let mut it = fds.into_iter();
    let region_fd = it.next().unwrap();
    let daemon_bell = Doorbell::from_fd(it.next().unwrap());
    let mut region = Region::open(region_fd.try_clone().unwrap(), Side::Client).unwrap();
    // Through the ring, the daemon answers.
    let mut ping = Frame::new();
    ping.push(&ToDaemon::Ping { seq: 2 });
    assert!(region.push(&ping.finish()).unwrap());
    daemon_bell.ring().unwrap();
    let mut out = Vec::new();
    let deadline = Instant::now() + StdDuration::from_secs(5);
    while !region.pop(&mut out).unwrap() {
        assert!(Instant::now() < deadline, "no Pong through the ring");
        std::thread::sleep(StdDuration::from_millis(1));
    }
    let msgs: Vec<ToClient> = cm_ipc::decode_frame(&out).unwrap();
    assert_eq!(msgs, vec![ToClient::Pong { seq: 2 }]);
    // Now claim a record far larger than what was published.
    corrupt_tail(&region_fd);
    daemon_bell.ring().unwrap();
    // The daemon hangs up on us...
    let mut b = [0u8; 64];
    let deadline = Instant::now() + StdDuration::from_secs(5);
    loop {
        match rustix::net::recv(&fd, &mut b, rustix::net::RecvFlags::DONTWAIT) {
            Ok((0, _)) | Err(rustix::io::Errno::CONNRESET) => break,
            _ => {
                assert!(Instant::now() < deadline, "corrupt client still connected");
                std::thread::sleep(StdDuration::from_millis(2));
            }
        }
    }
    // ...and serves the good client as before.
    good.request(f).unwrap();
    assert!(matches!(next_event(&mut good), CmEvent::Send { .. }));
}

/// Write a "to daemon" producer position beyond the ring's size (offset 0
/// of the region), through the memfd as the client process could.
fn corrupt_tail(fd: &std::os::fd::OwnedFd) {
    rustix::io::pwrite(fd, &(u64::MAX / 2).to_le_bytes(), 0).unwrap();
}

/// The daemon's own refusal of a fire-and-forget call on another user's
/// flow, past libcm's local check: a raw connection says Hello and
/// Close(theirs) and must get an asynchronous UnknownFlow error back.
fn daemon_refuses_a_raw_close(socket: &std::ffi::OsStr, theirs: FlowId) {
    use cm_ipc::{ToClient, ToDaemon};
    let fd = common::raw::connect_raw(std::path::Path::new(socket));
    let mut frame = cm_ipc::Frame::new();
    frame.push(&ToDaemon::Hello {
        version: cm_ipc::VERSION,
    });
    frame.push(&ToDaemon::Close {
        flow: theirs.to_u64(),
    });
    // Answered after the close: everything before it has come back.
    frame.push(&ToDaemon::Ping { seq: 7 });
    let mut got = common::raw::roundtrip(&fd, frame.bytes());
    while !got.iter().any(|m| matches!(m, ToClient::Pong { .. })) {
        got.extend(common::raw::recv_frame(&fd));
    }
    assert!(
        got.iter()
            .any(|m| matches!(m, ToClient::Error { flow, code, .. }
            if *flow == theirs.to_u64() && *code == ErrorCode::UnknownFlow)),
        "{got:?}"
    );
}
