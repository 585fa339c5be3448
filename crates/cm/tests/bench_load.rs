//! `cm bench load` end to end: the built `cm` starts its own `cmd` (the
//! binary beside it: `cargo build -p cm-daemon` first when testing this
//! crate alone), drives it with a few client threads for well under a
//! second, prints a table of sane positive numbers, and leaves no daemon
//! behind; a sweep writes its plot; bad options are refused with a clear
//! message and a non-zero status, never a panic.

#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Longest any one `cm bench load` of these tests may take.
const LIMIT: Duration = Duration::from_secs(120);

fn cm_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_cm"))
}

fn require_cmd() {
    let cmd = cm_bin().with_file_name("cmd");
    assert!(
        cmd.exists(),
        "no cmd binary at {} (cargo build -p cm-daemon in this profile, or test the workspace)",
        cmd.display()
    );
}

/// Run `cm` with `args`, killed if it outlives [`LIMIT`]; also returns
/// its pid.
fn cm(args: &[&str]) -> (Output, u32) {
    let mut child = Command::new(cm_bin())
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let end = Instant::now() + LIMIT;
    // Drain the pipes on threads so a chatty child cannot block.
    let mut so = child.stdout.take().unwrap();
    let mut se = child.stderr.take().unwrap();
    let to = std::thread::spawn(move || {
        let mut v = Vec::new();
        std::io::Read::read_to_end(&mut so, &mut v).ok();
        v
    });
    let te = std::thread::spawn(move || {
        let mut v = Vec::new();
        std::io::Read::read_to_end(&mut se, &mut v).ok();
        v
    });
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > end {
            let _ = child.kill();
            break child.wait().unwrap();
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let out = Output {
        status,
        stdout: to.join().unwrap(),
        stderr: te.join().unwrap(),
    };
    (out, pid)
}

/// The table's rows, each as column name -> value.
fn rows(stdout: &str) -> Vec<HashMap<String, String>> {
    let mut lines = stdout.lines();
    let header: Vec<&str> = lines
        .by_ref()
        .find(|l| l.trim_start().starts_with("clients "))
        .unwrap_or_else(|| panic!("no table header in:\n{stdout}"))
        .split_whitespace()
        .collect();
    lines
        .take_while(|l| !l.trim().is_empty())
        .map(|l| {
            let cells: Vec<&str> = l.split_whitespace().collect();
            assert_eq!(cells.len(), header.len(), "row {l:?}");
            header
                .iter()
                .zip(cells)
                .map(|(h, c)| ((*h).to_string(), c.to_string()))
                .collect()
        })
        .collect()
}

fn num(row: &HashMap<String, String>, key: &str) -> f64 {
    let v = &row[key];
    v.parse()
        .unwrap_or_else(|_| panic!("{key} = {v:?} is not a number in {row:?}"))
}

/// No process left whose command line names a daemon directory of the
/// `cm` with pid `pid`, and no such directory.
fn assert_no_daemon_of(pid: u32) {
    let tag = format!("cm-bench-load-{pid}-");
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(cmdline) = std::fs::read(e.path().join("cmdline")) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&cmdline);
        assert!(
            !cmdline.contains(&tag),
            "a daemon of cm {pid} is still running: {cmdline:?}"
        );
    }
    for e in std::fs::read_dir(std::env::temp_dir()).unwrap().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        assert!(!name.starts_with(&tag), "{name} was left behind");
    }
}

fn check_row(row: &HashMap<String, String>, clients: f64, flows: f64) {
    assert_eq!(num(row, "clients"), clients);
    assert_eq!(num(row, "flows"), flows);
    assert!(num(row, "hosts") >= 1.0);
    assert!(num(row, "ops/s") > 100.0, "{row:?}");
    for (p50, p99, p999) in [("q_p50", "q_p99", "q_p99.9"), ("g_p50", "g_p99", "g_p99.9")] {
        let (a, b, c) = (num(row, p50), num(row, p99), num(row, p999));
        assert!(a > 0.0 && a <= b && b <= c, "{row:?}");
        assert!(c < 10_000_000.0, "a latency over 10 s: {row:?}");
    }
    let cpu = num(row, "cpu/op");
    assert!(cpu.is_finite() && cpu >= 0.0, "{row:?}");
    assert!(num(row, "rss_MiB") > 0.0, "{row:?}");
    assert!(num(row, "fds") > 0.0, "{row:?}");
    assert!(
        num(row, "fds/client") >= 1.0,
        "each client holds a descriptor: {row:?}"
    );
}

#[test]
fn quick_run_prints_sane_numbers_and_leaves_no_daemon() {
    require_cmd();
    let (out, pid) = cm(&["bench", "load", "--quick", "--duration", "0.5"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let rows = rows(&stdout);
    assert_eq!(rows.len(), 1, "{stdout}");
    check_row(&rows[0], 4.0, 32.0);
    assert!(
        stdout.contains("daemon CPU"),
        "where the time goes: {stdout}"
    );
    assert!(stdout.contains("query p99"), "the targets: {stdout}");
    assert_no_daemon_of(pid);
}

#[test]
fn bulk_run_prints_sane_numbers() {
    require_cmd();
    let (out, pid) = cm(&["bench", "load", "--quick", "--bulk", "--duration", "0.5"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows = rows(&stdout);
    check_row(&rows[0], 4.0, 32.0);
    assert!(stdout.contains("bulk"), "{stdout}");
    assert_no_daemon_of(pid);
}

#[test]
fn quick_sweep_prints_a_row_per_client_count_and_a_plot() {
    require_cmd();
    let dir = std::env::temp_dir().join(format!("cm-bench-load-test-{}", std::process::id()));
    let dir_s = dir.to_str().unwrap();
    let (out, pid) = cm(&[
        "bench",
        "load",
        "--quick",
        "--sweep",
        "--duration",
        "0.3",
        "--out",
        dir_s,
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let svg = std::fs::read_to_string(Path::new(&dir).join("load.svg"));
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows = rows(&stdout);
    assert_eq!(rows.len(), 2, "N = 1 and 4: {stdout}");
    check_row(&rows[0], 1.0, 8.0);
    check_row(&rows[1], 4.0, 32.0);
    let svg = svg.unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("query p99") && svg.contains("RSS"));
    assert_no_daemon_of(pid);
}

#[test]
fn bad_options_are_refused_clearly() {
    let cases: &[(&[&str], &str)] = &[
        (&["--clients", "0"], "clients"),
        (&["--clients", "many"], "invalid value"),
        (&["--flows", "0"], "--flows"),
        (&["--duration=0"], "--duration"),
        (&["--rate=-5"], "--rate"),
        (&["--hosts", "200000"], "--hosts"),
        (&["--clients", "1000", "--flows", "5000"], "at most"),
        (&["--sweep", "--clients", "3"], "cannot be used"),
        (&["--cmd", "/nonexistent/cmd"], "no daemon binary"),
        // A "daemon" that exits at once: reported, its directory removed.
        (&["--cmd", "/bin/false"], "before listening"),
        (&["--no-such-option"], "unexpected argument"),
    ];
    for (args, says) in cases {
        let mut all = vec!["bench", "load", "--quick"];
        all.extend_from_slice(args);
        let (out, pid) = cm(&all);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} was accepted");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert_no_daemon_of(pid);
    }
}

#[test]
fn help_explains_every_option_with_units_and_defaults() {
    let (out, _) = cm(&["bench", "load", "--help"]);
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    for want in [
        "--clients",
        "--flows",
        "--hosts",
        "--rate",
        "--duration",
        "--bulk",
        "--sweep",
        "--sweep-clients",
        "--out",
        "--quick",
        "--transport",
        "--cmd",
        "default",
        "198.18.0.0/15",
        "Seconds",
    ] {
        assert!(help.contains(want), "--help lacks {want:?}:\n{help}");
    }
}
