//! tests/c/misuse_test.c: the C API under misuse (a grant for a closed
//! flow, arguments refused alike in both modes, a linear bulk query,
//! SIGIO without a handler, a stopped daemon), in embedded mode and
//! against the `cmd` binary.

#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::{DaemonProcess, TempDir, crate_dir, run};

fn check(r: &common::Run, mode: &str) {
    common::check_summary(r, "misuse_test", mode, 40);
    eprintln!("{}", r.stdout);
}

#[test]
fn misuse_embedded() {
    let d = TempDir::new("misuse");
    let bin = common::build_c_test("misuse_test", &d.0);
    let r = run(
        &bin,
        &["embedded"],
        &[("CM_SOCKET", "/nonexistent/cm-ffi-test.sock")],
        Duration::from_secs(60),
    );
    check(&r, "embedded");
}

#[test]
fn misuse_daemon_including_a_stopped_daemon() {
    let daemon = DaemonProcess::start();
    let d = TempDir::new("misuse-daemon");
    let bin = common::build_c_test("misuse_test", &d.0);
    let pid = daemon.pid().to_string();
    let r = run(
        &bin,
        &["daemon"],
        &[("CM_SOCKET", daemon.socket()), ("CM_TEST_DAEMON_PID", &pid)],
        Duration::from_secs(60),
    );
    check(&r, "daemon");
    assert!(r.stdout.contains("stopped daemon:"), "{}", r.stdout);
}

/// Code written with the papers' names compiles through cm_compat.h and
/// runs in both modes.
#[test]
fn papers_names_through_cm_compat_h() {
    let d = TempDir::new("compat");
    let bin = common::build_c_test("compat_test", &d.0);
    let r = run(
        &bin,
        &["embedded"],
        &[("CM_SOCKET", "/nonexistent/cm-ffi-test.sock")],
        Duration::from_secs(30),
    );
    common::check_summary(&r, "compat_test", "embedded", 10);
    let daemon = DaemonProcess::start();
    let r = run(
        &bin,
        &["daemon"],
        &[("CM_SOCKET", daemon.socket())],
        Duration::from_secs(30),
    );
    common::check_summary(&r, "compat_test", "daemon", 10);
}

/// `CM_LOST_FEEDBACK` (a near miss of both RFC names, which a compiler's
/// spelling hint turned into the transient mode) stops the compilation
/// with the right names; cm_compat.h compiles as strict C99 and C++.
#[test]
fn near_miss_names_fail_with_the_right_names() {
    let d = TempDir::new("poison");
    let src = d.0.join("p.c");
    std::fs::write(
        &src,
        "#include \"cm.h\"\nint main(void) { return cm_update(0, 1, 0, CM_LOST_FEEDBACK, 0); }\n",
    )
    .unwrap_or_else(|e| panic!("write: {e}"));
    let inc = crate_dir().join("include");
    let o = std::process::Command::new("cc")
        .args(["-std=c11", "-fsyntax-only", "-I"])
        .arg(&inc)
        .arg(&src)
        .output()
        .unwrap_or_else(|e| panic!("run cc: {e}"));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "compiled: {err}");
    assert!(
        err.contains("CM_NO_FEEDBACK") && err.contains("CM_PERSISTENT"),
        "{err}"
    );
    let ok = d.0.join("ok.c");
    std::fs::write(
        &ok,
        "#include \"cm_compat.h\"\nint main(void) { double r, s; cmid_t f = 0; \
         return cm_query(f, &r, &s) + cm_query(f, &r, &s, 0) + cm_query(f, &r, &s, 0, 0) \
         + CM_PERSISTENT + CM_TRANSIENT + CM_ECN; }\n",
    )
    .unwrap_or_else(|e| panic!("write: {e}"));
    for lang in [&["-std=c99"][..], &["-x", "c++", "-std=c++11"][..]] {
        let o = std::process::Command::new(if lang.len() > 1 { "c++" } else { "cc" })
            .args(lang)
            .args([
                "-Wall",
                "-Wextra",
                "-Wpedantic",
                "-Werror",
                "-fsyntax-only",
                "-I",
            ])
            .arg(&inc)
            .arg(&ok)
            .output()
            .unwrap_or_else(|e| panic!("run compiler: {e}"));
        assert!(
            o.status.success(),
            "{lang:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
}
