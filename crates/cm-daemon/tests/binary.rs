//! The `cmd` binary: serves on its socket, exits cleanly on SIGTERM
//! (socket removed, status 0), refuses bad configuration with a clear error.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

struct Guard(Child, PathBuf);
impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
        let _ = std::fs::remove_dir_all(&self.1);
    }
}

fn temp_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("cmd-bin-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn sigterm_stops_the_daemon_and_removes_its_socket() {
    let dir = temp_dir("term");
    let sock = dir.join("cm.sock");
    let child = Command::new(env!("CARGO_BIN_EXE_cmd"))
        .args(["--socket", sock.to_str().unwrap(), "--quiet"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut g = Guard(child, dir);
    let deadline = Instant::now() + Duration::from_secs(5);
    while !sock.exists() {
        assert!(
            Instant::now() < deadline,
            "daemon did not create its socket"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    // It answers: a second daemon on the same live socket is refused.
    let out = Command::new(env!("CARGO_BIN_EXE_cmd"))
        .args(["--socket", sock.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("already listening"));
    let pid = rustix::process::Pid::from_raw(g.0.id() as i32).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    let status = loop {
        if let Some(s) = g.0.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "daemon ignored SIGTERM");
        std::thread::sleep(Duration::from_millis(10));
    };
    assert!(status.success(), "{status:?}");
    assert!(!sock.exists(), "socket left behind");
}

#[test]
fn bad_configuration_is_a_clear_error() {
    let dir = temp_dir("cfg");
    let sock = dir.join("cm.sock");
    let out = Command::new(env!("CARGO_BIN_EXE_cmd"))
        .args(["--socket", sock.to_str().unwrap(), "--aging", "sometimes"])
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("aging must be"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_bad_controller_spec_is_a_clear_error() {
    let dir = temp_dir("ctl");
    let sock = dir.join("cm.sock");
    let out = Command::new(env!("CARGO_BIN_EXE_cmd"))
        .args([
            "--socket",
            sock.to_str().unwrap(),
            "--controller",
            "iscc:l=0.5",
        ])
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("controller \"iscc:l=0.5\""), "{err}");
}
