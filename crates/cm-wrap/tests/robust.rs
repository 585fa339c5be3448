//! An unmodified program (the system's Python) under `LD_PRELOAD` of this
//! library: it floods faster than anything can carry, sends with
//! `sendto`, `sendmsg`, `send` and `write`, closes a socket with datagrams
//! queued, and forks a child that sends too. It must finish promptly,
//! with no crash or deadlock, bounded memory, and its datagrams held back
//! by the CM (no receiver CM answers on loopback, so the CM hears nothing
//! back and lets only a trickle through).
#![allow(clippy::unwrap_used)]

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

fn library() -> PathBuf {
    // target/release/deps/robust-* → target/release/libcm_wrap.so
    let exe = std::env::current_exe().unwrap();
    let lib = exe
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .join("libcm_wrap.so");
    assert!(
        lib.is_file(),
        "{} missing: cargo build --release -p cm-wrap",
        lib.display()
    );
    lib
}

fn python() -> Option<&'static str> {
    Command::new("python3")
        .arg("-c")
        .arg("pass")
        .status()
        .ok()?
        .success()
        .then_some("python3")
}

#[test]
fn a_flooding_closing_forking_program_keeps_working_with_bounded_memory() {
    let Some(py) = python() else {
        eprintln!("skipped: needs python3");
        return;
    };
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/robust.py");
    let report = std::env::temp_dir().join(format!("cm-wrap-robust-{}.json", std::process::id()));
    let t0 = Instant::now();
    let mut child = Command::new(py)
        .arg(script)
        .arg("200000")
        .env("LD_PRELOAD", library())
        .env("CM_WRAP_LOOPBACK", "1")
        .env("CM_WRAP_REPORT", &report)
        // No daemon: the CM is embedded in the program.
        .env("CM_SOCKET", "/nonexistent/cm.sock")
        .env("XDG_RUNTIME_DIR", "/nonexistent")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Bounded: kill it if it hangs.
    let limit = Duration::from_secs(120);
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        if t0.elapsed() > limit {
            let _ = child.kill();
            panic!("the wrapped program hung for {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "wrapped program failed: {:?}",
        out.status
    );
    let line = String::from_utf8_lossy(&out.stdout);
    let v: serde_json::Value = serde_json::from_str(line.trim()).unwrap();
    eprintln!("{v}");
    assert_eq!(v["child_status"], 0, "the forked child failed");
    let (early, late) = (
        v["rss_early_kb"].as_f64().unwrap(),
        v["rss_late_kb"].as_f64().unwrap(),
    );
    // 200,000 more datagrams of 1000 B passed between the two readings:
    // growing with them would be 200 MB. The inbox and the queues are
    // bounded (4096 + MAXQ datagrams).
    assert!(
        late - early < 16_000.0,
        "memory grew from {early} kB to {late} kB"
    );
    // Held back: without feedback the CM lets only a trickle through.
    let sent = v["sent_by_program"].as_f64().unwrap();
    let received = v["received"].as_f64().unwrap();
    assert!(
        received < sent * 0.01,
        "{received} of {sent} datagrams got through unchecked"
    );
    // The library's report: the queue dropped what could not go.
    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    let _ = std::fs::remove_file(&report);
    let flows = r["flows"].as_array().unwrap();
    let dropped: u64 = flows.iter().map(|f| f["dropped"].as_u64().unwrap()).sum();
    let offered: u64 = flows.iter().map(|f| f["offered"].as_u64().unwrap()).sum();
    assert!(
        flows.len() >= 2,
        "the closed socket's and the new socket's flows: {r}"
    );
    assert!(
        dropped > offered / 2,
        "offered {offered}, dropped {dropped}"
    );
    assert!(
        r["silent_intervals"].as_u64().unwrap() > 0,
        "no receiver CM: silence must be reported"
    );
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .map(|l| l.split_whitespace().nth(1) == Some("0"))
        })
        .unwrap_or(false)
}

/// With a receiver CM answering (on loopback, where nothing limits the
/// rate), a wrapped constant-rate sender well below any limit gets through
/// almost whole: the CM learns from the counts that nothing is lost.
#[test]
fn with_a_receiver_cm_a_modest_sender_goes_through() {
    let Some(py) = python() else {
        eprintln!("skipped: needs python3");
        return;
    };
    if !is_root() {
        eprintln!("skipped: needs root (the receiver CM counts on a raw socket)");
        return;
    }
    let mut receiver = cm_force::Receiver::bind(0).unwrap();
    let port = receiver.port();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stop2 = std::sync::Arc::clone(&stop);
    let rx = std::thread::spawn(move || {
        receiver
            .run(&stop2, Some(Instant::now() + Duration::from_secs(60)))
            .unwrap();
        receiver.stats()
    });
    let sink = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    sink.set_read_timeout(Some(Duration::from_millis(1500)))
        .unwrap();
    let dst = sink.local_addr().unwrap();
    // Read as they come (a socket buffer holds only about 100 of them).
    let reader = std::thread::spawn(move || {
        let mut got = 0;
        let mut buf = [0u8; 2048];
        while sink.recv(&mut buf).is_ok() {
            got += 1;
        }
        got
    });
    let report = std::env::temp_dir().join(format!("cm-wrap-rx-{}.json", std::process::id()));
    // 2 Mbit/s of 1000-byte datagrams for 3 s: 750 datagrams.
    let code = format!(
        "import socket,time\ns=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\nt0=time.monotonic()\nfor n in range(750):\n    s.sendto(b'x'*1000,('127.0.0.1',{}))\n    d=t0+(n+1)*0.004-time.monotonic()\n    time.sleep(max(d,0))\n",
        dst.port()
    );
    let status = Command::new(py)
        .arg("-c")
        .arg(code)
        .env("LD_PRELOAD", library())
        .env("CM_WRAP_LOOPBACK", "1")
        .env("CM_WRAP_PORT", port.to_string())
        .env("CM_WRAP_REPORT", &report)
        .env("CM_SOCKET", "/nonexistent/cm.sock")
        .env("XDG_RUNTIME_DIR", "/nonexistent")
        .status()
        .unwrap();
    assert!(status.success());
    let got = reader.join().unwrap();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let rs = rx.join().unwrap();
    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    let _ = std::fs::remove_file(&report);
    eprintln!("received {got}; receiver CM {rs:?}; wrapper {r}");
    assert!(got >= 700, "only {got} of 750 datagrams arrived");
    assert!(r["responses"].as_u64().unwrap() > 10, "{r}");
    assert_eq!(r["silent_intervals"], 0, "{r}");
    assert!(rs.datagrams >= got, "{rs:?}");
}

/// With a daemon running, a wrapped program's flow lives in the daemon's
/// CM: it shares its destination's macroflow with every other CM flow on
/// the host, and `cm stat` (here the same query) shows it with its pid.
#[test]
fn a_wrapped_program_joins_the_daemons_macroflows() {
    let Some(py) = python() else {
        eprintln!("skipped: needs python3");
        return;
    };
    let d = cm_daemon::TempDaemon::start().unwrap();
    let sink = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = sink.local_addr().unwrap().port();
    // Another program's CM flow to the same host, opened first.
    let mut other = libcm::Cm::connect(d.socket()).unwrap();
    let mine = other.open(None, sink.local_addr().unwrap()).unwrap();
    let code = format!(
        "import socket,time\ns=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\nfor n in range(300):\n    s.sendto(b'x'*500,('127.0.0.1',{port}))\n    time.sleep(0.01)\n"
    );
    let mut child = Command::new(py)
        .arg("-c")
        .arg(code)
        .env("LD_PRELOAD", library())
        .env("CM_WRAP_LOOPBACK", "1")
        .env("CM_SOCKET", d.socket())
        .spawn()
        .unwrap();
    let pid = child.id();
    let t0 = Instant::now();
    let mut seen = None;
    while t0.elapsed() < Duration::from_secs(10) && seen.is_none() {
        std::thread::sleep(Duration::from_millis(200));
        let stat = other.stat().unwrap();
        let mine_mf = stat
            .flows
            .iter()
            .find(|f| f.id == mine.to_u64())
            .map(|f| f.macroflow);
        if let Some(w) = stat.flows.iter().find(|f| f.pid == pid) {
            let n = stat
                .flows
                .iter()
                .filter(|f| f.macroflow == w.macroflow)
                .count();
            seen = Some((n, mine_mf == Some(w.macroflow)));
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    let (flows, with_mine) = seen.expect("the wrapped program's flow never showed in the daemon");
    assert!(
        with_mine && flows >= 2,
        "not in the other flow's macroflow ({flows} flows)"
    );
}
