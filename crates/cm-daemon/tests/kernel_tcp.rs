//! `cmd --kernel-tcp`: the `cm` TCP congestion control registers, leaves
//! no trace on exit however the daemon ends (SIGTERM, SIGKILL, a failed
//! start) and registers again; loopback connections that select it join
//! one macroflow, and their transfers complete when the daemon is killed
//! in the middle (Reno fallback on stale allowances).
//!
//! Needs root, BTF (`/sys/kernel/btf/vmlinux`) and clang at build time;
//! elsewhere each test prints "skipped: needs …" and passes.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// One `cm` registration exists at a time: the tests take turns.
static KERNEL: Mutex<()> = Mutex::new(());

struct Daemon {
    child: Child,
    dir: PathBuf,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
        wait_unregistered();
    }
}

fn registered() -> bool {
    std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control")
        .is_ok_and(|s| s.split_whitespace().any(|n| n == "cm"))
}

/// The kernel releases a struct_ops link's registration shortly after its
/// last descriptor closes.
fn wait_unregistered() -> bool {
    let deadline = Instant::now() + Duration::from_secs(5);
    while registered() {
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}

/// Why this machine cannot run the test, if it cannot.
fn unsupported() -> Option<&'static str> {
    if !rustix::process::geteuid().is_root() {
        return Some("root");
    }
    if !std::path::Path::new("/sys/kernel/btf/vmlinux").exists() {
        return Some("a kernel with BTF");
    }
    if registered() {
        return Some("no other `cm` congestion control registered");
    }
    None
}

fn start(tag: &str) -> Result<Daemon, String> {
    let dir = std::env::temp_dir().join(format!("cmd-kernel-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let sock = dir.join("cm.sock");
    let mut child = Command::new(env!("CARGO_BIN_EXE_cmd"))
        .args(["--kernel-tcp", "--socket", sock.to_str().unwrap()])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !(sock.exists() && registered()) {
        if let Some(status) = child.try_wait().unwrap() {
            let mut err = String::new();
            child
                .stderr
                .take()
                .unwrap()
                .read_to_string(&mut err)
                .unwrap();
            let _ = std::fs::remove_dir_all(&dir);
            return Err(format!("cmd --kernel-tcp exited ({status}): {err}"));
        }
        assert!(
            Instant::now() < deadline,
            "cmd --kernel-tcp did not come up"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    Ok(Daemon { child, dir })
}

/// Start, or say why the test is skipped.
fn start_or_skip(tag: &str) -> Option<Daemon> {
    if let Some(need) = unsupported() {
        eprintln!("skipped: needs {need}");
        return None;
    }
    match start(tag) {
        Ok(d) => Some(d),
        Err(e) if e.contains("was not built") => {
            eprintln!("skipped: needs clang when building cm-kernel ({e})");
            None
        }
        Err(e) => panic!("{e}"),
    }
}

fn signal(d: &Daemon, sig: rustix::process::Signal) {
    let pid = rustix::process::Pid::from_raw(d.child.id() as i32).unwrap();
    rustix::process::kill_process(pid, sig).unwrap();
}

fn wait_exit(d: &mut Daemon) -> std::process::ExitStatus {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        if let Some(s) = d.child.try_wait().unwrap() {
            return s;
        }
        assert!(Instant::now() < deadline, "cmd did not exit");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn cm_registers_and_leaves_no_trace_however_the_daemon_ends() {
    let _turn = KERNEL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(mut d) = start_or_skip("cycle") else {
        return;
    };
    let allowed =
        std::fs::read_to_string("/proc/sys/net/ipv4/tcp_allowed_congestion_control").unwrap();
    assert!(
        allowed.split_whitespace().any(|n| n == "cm"),
        "unprivileged sockets may choose cm: {allowed}"
    );
    // A second daemon (another socket) cannot register a second `cm`: a
    // failed start, which leaves no socket and the first daemon alone.
    match start("second") {
        Ok(_) => panic!("a second cmd --kernel-tcp started"),
        Err(e) => assert!(e.contains("registered already"), "{e}"),
    }
    let second = std::env::temp_dir().join(format!("cmd-kernel-second-{}", std::process::id()));
    assert!(
        !second.join("cm.sock").exists(),
        "the failed start left its socket"
    );
    assert!(
        registered(),
        "the failed start unregistered the first daemon's cm"
    );
    // SIGTERM: a clean exit, nothing left.
    signal(&d, rustix::process::Signal::TERM);
    assert!(wait_exit(&mut d).success());
    assert!(wait_unregistered(), "cm left registered after SIGTERM");
    drop(d);
    // It registers again, and SIGKILL leaves nothing either.
    let Some(mut d) = start_or_skip("again") else {
        return;
    };
    signal(&d, rustix::process::Signal::KILL);
    wait_exit(&mut d);
    assert!(wait_unregistered(), "cm left registered after SIGKILL");
    drop(d);
    let d = start_or_skip("third").expect("registers a third time");
    drop(d);
}

/// Send for `secs` seconds on a connection using `cm`; the bytes sent.
fn send_for(addr: std::net::SocketAddr, secs: f64) -> u64 {
    let s = TcpStream::connect(addr).unwrap();
    rustix::net::sockopt::set_tcp_congestion(&s, "cm").unwrap();
    let mut s = s;
    let buf = vec![7u8; 64 * 1024];
    let (t0, mut n) = (Instant::now(), 0u64);
    while t0.elapsed().as_secs_f64() < secs {
        s.write_all(&buf).unwrap();
        n += buf.len() as u64;
    }
    s.shutdown(std::net::Shutdown::Write).unwrap();
    n
}

#[test]
fn connections_share_a_macroflow_and_finish_after_the_daemon_is_killed() {
    let _turn = KERNEL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(mut d) = start_or_skip("transfer") else {
        return;
    };
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let sink = std::thread::spawn(move || {
        let mut got = Vec::new();
        let mut readers = Vec::new();
        for _ in 0..3 {
            let (mut c, _) = listener.accept().unwrap();
            c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
            readers.push(std::thread::spawn(move || {
                let mut buf = vec![0u8; 1 << 16];
                let mut n = 0u64;
                loop {
                    match c.read(&mut buf) {
                        Ok(0) => return n,
                        Ok(k) => n += k as u64,
                        Err(e) => panic!("receiver stalled after {n} bytes: {e}"),
                    }
                }
            }));
        }
        for r in readers {
            got.push(r.join().unwrap());
        }
        got
    });
    let senders: Vec<_> = (0..3)
        .map(|_| std::thread::spawn(move || send_for(addr, 2.5)))
        .collect();
    std::thread::sleep(Duration::from_millis(800));
    signal(&d, rustix::process::Signal::KILL);
    wait_exit(&mut d);
    let mut sent: Vec<u64> = senders.into_iter().map(|s| s.join().unwrap()).collect();
    let mut got = sink.join().unwrap();
    sent.sort_unstable();
    got.sort_unstable();
    assert_eq!(sent, got, "every byte arrives after the daemon is gone");
    // The daemon's log: three connections joined, all in one macroflow.
    let log = BufReader::new(d.child.stderr.take().unwrap());
    let macroflows: Vec<String> = log
        .lines()
        .map_while(Result::ok)
        .filter(|l| l.contains("kernel connection joined"))
        .filter_map(|l| l.split("macroflow=").nth(1).map(str::to_owned))
        .collect();
    assert_eq!(macroflows.len(), 3, "{macroflows:?}");
    assert!(
        macroflows.iter().all(|m| *m == macroflows[0]),
        "{macroflows:?}"
    );
    assert!(wait_unregistered());
}
