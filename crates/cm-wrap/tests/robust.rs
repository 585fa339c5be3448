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
