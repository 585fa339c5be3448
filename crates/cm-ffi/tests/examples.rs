//! The C examples (examples/c), built with `cc` against cm.h and libcm, run
//! in embedded mode and against a daemon; their output is checked.

mod common;

use std::path::Path;
use std::time::Duration;

use common::{Daemon, DaemonProcess, Run, TempDir, build_example, run};

const LIMIT: Duration = Duration::from_secs(60);

/// Environment for a mode: embedded, or the daemon at `socket`.
fn env(socket: Option<&str>) -> Vec<(&str, &str)> {
    match socket {
        Some(s) => vec![("CM_EXAMPLE_MODE", "daemon"), ("CM_SOCKET", s)],
        // No daemon at $CM_SOCKET, so even the papers' default is embedded.
        None => vec![
            ("CM_EXAMPLE_MODE", "embedded"),
            ("CM_SOCKET", "/nonexistent/cm-ffi-test.sock"),
        ],
    }
}

fn mode(socket: Option<&str>) -> &'static str {
    if socket.is_some() {
        "daemon"
    } else {
        "embedded"
    }
}

fn check_ok(r: &Run) {
    assert!(r.ok, "example failed:\n{}\n{}", r.stdout, r.stderr);
    assert!(
        !r.stderr.contains("error"),
        "errors reported:\n{}",
        r.stderr
    );
}

fn alf(bin: &Path, socket: Option<&str>) {
    let r = run(bin, &["400"], &env(socket), LIMIT);
    check_ok(&r);
    let res = r.result("alf");
    assert_eq!(res["mode"], mode(socket));
    assert_eq!(r.num("alf", "acked"), 400.0, "every datagram acknowledged");
    assert_eq!(r.num("alf", "lost"), 0.0);
    assert_eq!(r.num("alf", "errors"), 0.0);
    // One cmapp_send per datagram sent (the last few may be declined).
    assert!(r.num("alf", "callbacks") >= 400.0);
    assert_eq!(r.num("alf", "bytes"), 400.0 * 1200.0);
    assert!(r.num("alf", "srtt_ms") > 0.0, "the CM learned the RTT");
    assert!(
        r.num("alf", "last_rate") > 0.0,
        "cm_query in the callback saw a rate"
    );
    assert!(
        r.stdout.contains("receiver: datagrams=400 bytes=480000"),
        "{}",
        r.stdout
    );
}

fn rate(bin: &Path, socket: Option<&str>) {
    let r = run(bin, &["1.5"], &env(socket), LIMIT);
    check_ok(&r);
    assert_eq!(r.result("rate")["mode"], mode(socket));
    let sent = r.num("rate", "sent");
    assert!(sent > 50.0, "sent only {sent}");
    assert!(r.num("rate", "acked") >= 0.9 * sent);
    assert!(r.num("rate", "updates") >= 1.0, "cmapp_update was called");
    assert!(
        r.num("rate", "layer_changes") >= 1.0,
        "the sender moved off its first encoding"
    );
    assert!(r.num("rate", "last_rate") > 0.0);
    assert_eq!(r.num("rate", "errors"), 0.0);
}

fn buffered(bin: &Path, socket: Option<&str>) {
    let r = run(bin, &["1500"], &env(socket), LIMIT);
    check_ok(&r);
    assert_eq!(r.result("buffered")["mode"], mode(socket));
    assert_eq!(r.num("buffered", "acked"), 1500.0);
    assert_eq!(r.num("buffered", "bytes_acked"), 1500.0 * 1200.0);
    assert_eq!(r.num("buffered", "errors"), 0.0);
    assert!(r.num("buffered", "srtt_ms") > 0.0);
    assert!(
        r.stdout.contains("receiver: datagrams=1500 bytes=1800000"),
        "{}",
        r.stdout
    );
}

#[test]
fn alf_sender_embedded() {
    let d = TempDir::new("alf");
    alf(&build_example("alf_sender", &d.0), None);
}

#[test]
fn rate_sender_embedded() {
    let d = TempDir::new("rate");
    rate(&build_example("rate_sender", &d.0), None);
}

#[test]
fn buffered_sender_embedded() {
    let d = TempDir::new("buf");
    buffered(&build_example("buffered_sender", &d.0), None);
}

#[test]
fn examples_against_daemon() {
    let d = TempDir::new("daemon-examples");
    let daemon = Daemon::start();
    let s = Some(daemon.socket());
    alf(&build_example("alf_sender", &d.0), s);
    rate(&build_example("rate_sender", &d.0), s);
    buffered(&build_example("buffered_sender", &d.0), s);
}

/// The same against the `cmd` binary in its own process (built by
/// `cargo test --workspace`, or `cargo build -p cm-daemon`).
#[test]
fn examples_against_cmd_binary() {
    let daemon = DaemonProcess::start();
    let d = TempDir::new("cmd-examples");
    let s = Some(daemon.socket());
    alf(&build_example("alf_sender", &d.0), s);
    rate(&build_example("rate_sender", &d.0), s);
    buffered(&build_example("buffered_sender", &d.0), s);
}

/// The papers' default: with a daemon at $CM_SOCKET and no explicit
/// choice, the implicit context uses it.
#[test]
fn default_context_finds_the_daemon() {
    let d = TempDir::new("default");
    let daemon = Daemon::start();
    let bin = build_example("alf_sender", &d.0);
    let r = run(&bin, &["50"], &[("CM_SOCKET", daemon.socket())], LIMIT);
    check_ok(&r);
    assert_eq!(r.result("alf")["mode"], "daemon");
}

/// libcm.a links too (static build of one example).
#[test]
fn static_library_links() {
    let d = TempDir::new("static");
    let out = d.0.join("alf_static");
    common::cc(
        &[common::crate_dir().join("examples/c/alf_sender.c")],
        &out,
        true,
    );
    let r = run(&out, &["100"], &env(None), LIMIT);
    check_ok(&r);
    assert_eq!(r.num("alf", "acked"), 100.0);
}
