//! `cm soak` end to end: the built `cm` starts its own `cmd` and runs the
//! misbehaving mix against it while checking the invariants. The full
//! two-minute run is the acceptance run; a short run with an
//! impossible latency bound shows that violations are caught and fail the
//! command. Needs the `cmd` binary of the same profile (`cargo test
//! --workspace` builds it).

#![allow(clippy::unwrap_used)]

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn cm_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_cm"))
}

/// Run `cm soak ARGS`, killed if it outlives `limit`.
fn soak(args: &[&str], limit: Duration) -> Output {
    let cmd = cm_bin().with_file_name("cmd");
    assert!(
        cmd.exists(),
        "no cmd binary at {} (cargo build -p cm-daemon in this profile, or test the workspace)",
        cmd.display()
    );
    let mut child = Command::new(cm_bin())
        .arg("soak")
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let end = Instant::now() + limit;
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > end {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let o = child.wait_with_output().unwrap();
    eprintln!(
        "{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    o
}

fn count(out: &str, what: &str) -> u64 {
    out.split(", ")
        .flat_map(|p| p.split(": "))
        .find(|p| p.ends_with(what))
        .and_then(|p| p.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

#[test]
fn two_minutes_of_misbehaving_clients_break_no_invariant() {
    let o = soak(&["--minutes", "2"], Duration::from_secs(240));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{out}");
    assert!(out.contains(" 0 violations"), "{out}");
    for fault in [
        "clients killed mid-call",
        "garbage frames",
        "flow-limit hits",
        "sessions that never read",
    ] {
        assert!(count(&out, fault) > 0, "no {fault}: {out}");
    }
    let checks: u64 = out
        .lines()
        .find_map(|l| l.trim().strip_prefix("invariant checks: "))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap();
    assert!(checks > 500, "only {checks} checks");
}

#[test]
fn a_violation_fails_the_run() {
    // No turn can take 0 ms: every second's check fails.
    let o = soak(
        &["--minutes", "0.1", "--latency-ms", "0"],
        Duration::from_secs(60),
    );
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(out.contains("violation: a well-behaved turn took"), "{out}");
}

#[test]
fn bad_arguments_are_refused_clearly() {
    for (args, want) in [
        (&["--minutes", "0"][..], "--minutes must be"),
        (&["--minutes", "nan"][..], "--minutes must be"),
        (&["--clients", "0"][..], "at least 1"),
        (&["--daemon", "/nonexistent/cmd"][..], "no daemon binary"),
    ] {
        let o = soak(args, Duration::from_secs(30));
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
}
