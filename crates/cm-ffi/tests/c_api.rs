//! tests/c/api_test.c: every function of cm.h, with its error paths, from
//! C, in embedded mode and against a daemon.

mod common;

use std::time::Duration;

use common::{Daemon, DaemonProcess, TempDir, run};

fn check(r: &common::Run, mode: &str) {
    common::check_summary(r, "api_test", mode, 251);
}

#[test]
fn every_function_embedded() {
    let d = TempDir::new("api");
    let bin = common::build_c_test("api_test", &d.0);
    let r = run(
        &bin,
        &["embedded"],
        &[("CM_SOCKET", "/nonexistent/cm-ffi-test.sock")],
        Duration::from_secs(60),
    );
    check(&r, "embedded");
}

/// Build api_test.c in a fresh directory and run it against the daemon
/// listening at `socket`, with `env` added.
fn against_daemon(tmp: &str, socket: &str, env: &[(&str, &str)]) {
    let d = TempDir::new(tmp);
    let bin = common::build_c_test("api_test", &d.0);
    let mut all = vec![("CM_SOCKET", socket)];
    all.extend_from_slice(env);
    let r = run(&bin, &["daemon"], &all, Duration::from_secs(60));
    check(&r, "daemon");
}

#[test]
fn every_function_daemon() {
    let daemon = Daemon::start();
    against_daemon("api-daemon", daemon.socket(), &[]);
}

/// The same, with libcm keeping its frames on the control socket instead
/// of the shared-memory rings (`CM_TRANSPORT=socket`).
#[test]
fn every_function_daemon_over_the_socket() {
    let daemon = Daemon::start();
    against_daemon(
        "api-daemon-socket",
        daemon.socket(),
        &[("CM_TRANSPORT", "socket")],
    );
}

#[test]
fn every_function_cmd_binary() {
    let daemon = DaemonProcess::start();
    against_daemon("api-cmd", daemon.socket(), &[]);
}
