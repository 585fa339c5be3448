//! `cm demo` end to end over real loopback UDP: the CM fills each emulated
//! bottleneck, and flows sharing a macroflow share it equally
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

#[test]
fn bad_arguments_are_clear_errors() {
    let out = Command::new(env!("CARGO_BIN_EXE_cm"))
        .args(["demo", "--duration", "0"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--duration"));
}
