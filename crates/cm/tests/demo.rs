//! `cm demo` end to end over real UDP: on loopback (user-space bottleneck
//! per receiver) the CM fills each bottleneck; on the emulated path (root:
//! namespaces, kernel tbf, delay box) two macroflows share one bottleneck
//! about equally. Either way flows sharing a macroflow share it equally
//! (sigcomm1999 §2: an ensemble behaves like one flow; §4.6 scheduler).

#![allow(clippy::unwrap_used)]

use std::process::Command;

fn demo(args: &[&str]) -> serde_json::Value {
    let out = Command::new(env!("CARGO_BIN_EXE_cm"))
        .arg("demo")
        .args(args)
        .arg("--json")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "cm demo failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn flows_fill_the_path_and_share_it_fairly() {
    let rate_mbit = 8.0;
    let v = demo(&[
        "--loopback",
        "--duration",
        "5",
        "--stagger",
        "0.5",
        "--rate-mbit",
        "8",
        "--interval",
        "1",
    ]);
    let mfs = v["macroflows"].as_array().unwrap();
    assert_eq!(mfs.len(), 2, "one macroflow per destination: {v}");
    for m in mfs {
        let agg = m["aggregate_bps"].as_f64().unwrap() / 1e6;
        // Payload goodput: headers (28 of 1460 bytes) and the queue's
        // sawtooth cost a little; an unpaced or stalled CM would be far off.
        assert!(
            agg > 0.75 * rate_mbit && agg < 1.02 * rate_mbit,
            "aggregate {agg} Mbit/s: {m}"
        );
    }
    let shared = mfs.iter().find(|m| m["dst"] == "127.0.0.1").unwrap();
    assert_eq!(shared["flows"], 3);
    let jain = shared["jain"].as_f64().unwrap();
    assert!(
        jain > 0.98,
        "flows sharing a macroflow get equal shares: {jain}"
    );
}

/// As root the demo runs on a real emulated path: both destinations sit
/// behind one 8 Mbit/s tbf bottleneck, so the two macroflows (3 flows and
/// 1 flow) each get about half of it — the 3-flow ensemble is no more
/// aggressive than the single flow.
#[test]
fn on_the_emulated_path_two_macroflows_split_one_bottleneck() {
    if !rustix::process::geteuid().is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let rate_mbit = 8.0;
    // Two AIMD macroflows drift apart for seconds at a time (a loss that
    // hits one and not the other); 8 s runs split 0.29/0.71 now and then,
    // 20 s runs stayed within 0.46-0.54 in repeated runs. The claim is the
    // long-run split, so the run is long enough to average the sawtooth.
    let v = demo(&[
        "--duration",
        "20",
        "--stagger",
        "0.5",
        "--rate-mbit",
        "8",
        "--interval",
        "1",
    ]);
    let mfs = v["macroflows"].as_array().unwrap();
    assert_eq!(mfs.len(), 2, "one macroflow per destination: {v}");
    let aggs: Vec<f64> = mfs
        .iter()
        .map(|m| m["aggregate_bps"].as_f64().unwrap() / 1e6)
        .collect();
    let total: f64 = aggs.iter().sum();
    assert!(
        total > 0.75 * rate_mbit && total < 1.02 * rate_mbit,
        "together {total} Mbit/s through one {rate_mbit} Mbit/s bottleneck: {v}"
    );
    for a in &aggs {
        assert!(
            *a > 0.3 * total && *a < 0.7 * total,
            "each macroflow about half: {aggs:?}"
        );
    }
    let shared = mfs.iter().find(|m| m["flows"] == 3).unwrap();
    assert!(
        shared["dst"].as_str().unwrap().starts_with("10."),
        "{shared}"
    );
    let jain = shared["jain"].as_f64().unwrap();
    assert!(
        jain > 0.98,
        "flows sharing a macroflow get equal shares: {jain}"
    );
}

#[test]
fn bad_arguments_are_clear_errors() {
    let out = Command::new(env!("CARGO_BIN_EXE_cm"))
        .args(["demo", "--duration", "0"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--duration"));
}

/// SIGTERM in the middle of a run on the emulated path deletes the run's
/// namespaces before the demo exits (with 128 + 15, as a shell reports a
/// process killed by the signal).
#[test]
fn sigterm_mid_run_deletes_the_namespaces() {
    if !rustix::process::geteuid().is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let child = Command::new(env!("CARGO_BIN_EXE_cm"))
        .args(["demo", "--duration", "30", "--json"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let prefix = format!("cmn{}x", child.id());
    let ours = || -> Vec<String> {
        std::fs::read_dir("/run/netns")
            .map(|d| {
                d.flatten()
                    .filter_map(|e| e.file_name().into_string().ok())
                    .filter(|n| n.starts_with(&prefix))
                    .collect()
            })
            .unwrap_or_default()
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while ours().len() < 3 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_eq!(ours().len(), 3, "the demo built no path in 20 s");
    // Into the run proper, past the path's build.
    std::thread::sleep(std::time::Duration::from_secs(2));
    let pid = rustix::process::Pid::from_child(&child);
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(143), "{stderr}");
    assert!(stderr.contains("SIGTERM"), "{stderr}");
    assert!(ours().is_empty(), "namespaces left: {:?}", ours());
}
