//! The `--quick` experiments reproduce the papers' properties; their
//! rounded summaries are snapshot-tested (regenerate with
//! `UPDATE_SNAPSHOTS=1 cargo test --release -p cm-experiments --test experiments`).

use cm_experiments::experiments::{self, EXPERIMENTS, Opts, Output};

const OPTS: Opts = Opts {
    quick: true,
    quiet: true,
    threads: 2,
};

fn metric(o: &Output, name: &str) -> f64 {
    o.metrics[name].as_f64().unwrap_or(f64::NAN)
}

fn run(name: &str) -> Output {
    experiments::run(name, &OPTS).expect("experiment runs")
}

#[test]
fn tcp_friendly_ratio_is_near_one() {
    let o = run("tcp-friendly");
    let m = metric(&o, "median_ratio");
    assert!((0.8..=1.25).contains(&m), "median_ratio {m}");
}

#[test]
fn sharing_later_requests_are_faster() {
    let o = run("sharing");
    let m = metric(&o, "later_improvement");
    assert!(m >= 0.30, "later_improvement {m}");
}

#[test]
fn web4_cm_is_fairer() {
    let o = run("web4");
    let (c, n) = (metric(&o, "jain_cm"), metric(&o, "jain_newreno"));
    assert!(c >= 0.99 && c > n, "jain_cm {c} jain_newreno {n}");
}

#[test]
fn seq_trace_produces_both_traces() {
    let o = run("seq-trace");
    assert!(o.csv.contains("Tcpcm,") && o.csv.contains("Newreno,"));
    assert_eq!(o.plot.series.len(), 2);
    assert!(o.plot.series.iter().all(|s| s.points.len() > 100));
    // sigcomm1999 Fig 5: TCP/CM behaves like NewReno (mean over 10 seeds).
    let ratio = o.json()["metrics"]["goodput_ratio"]
        .as_f64()
        .unwrap_or(f64::NAN);
    assert!((0.8..=1.25).contains(&ratio), "goodput ratio {ratio}");
}

#[test]
fn scalability_ideal_reproduces_fig3() {
    // iscc §V-B: AIMD₁ ≈ n^1.91, AIMD₂ ≈ n^1.27; IIAD scales worst (the
    // paper's n^2.67 disagrees with its own eq. 31, see the notes); ISCC
    // stays flat (§V-C).
    let o = run("scalability-ideal");
    let m = &o.metrics;
    let e = |s: &str| m[s]["exponent"].as_f64().unwrap_or(f64::NAN);
    assert!((e("AIMD1") - 1.91).abs() <= 0.3, "AIMD1 n^{}", e("AIMD1"));
    assert!((e("AIMD2") - 1.27).abs() <= 0.3, "AIMD2 n^{}", e("AIMD2"));
    assert!(e("IIAD") > e("AIMD1") + 0.5, "IIAD n^{}", e("IIAD"));
    assert!(
        (e("IIAD") - 3.0).abs() <= 0.3,
        "IIAD vs eq. 32: n^{}",
        e("IIAD")
    );
    let iscc = m["ISCC(2)"]["s_max"].as_f64().unwrap_or(f64::NAN);
    assert!(iscc > 0.0 && iscc < 3.0, "ISCC s_max {iscc}");
}

#[test]
fn bw_estimate_samples_sit_at_the_capacity() {
    // iscc Fig 5: nearly all packet-bunch samples at the IP-level rate with
    // 2 flows, and most within 7% with 32; flows agree on the estimate.
    let o = run("bw-estimate");
    let m = &o.metrics;
    let w2 = m["flows_2"]["within_2pct"].as_f64().unwrap_or(f64::NAN);
    let w7 = m["flows_32"]["within_7pct"].as_f64().unwrap_or(f64::NAN);
    assert!(w2 >= 0.95, "2 flows: {w2} within 2%");
    assert!(w7 >= 0.90, "32 flows: {w7} within 7%");
    assert_eq!(
        m["flows_32"]["estimates"].as_u64(),
        Some(32),
        "every flow has an estimate"
    );
    let spread = m["flows_32"]["estimate_spread"]
        .as_f64()
        .unwrap_or(f64::NAN);
    assert!(spread <= 0.02, "estimates disagree by {spread}");
}

#[test]
fn tfrc_is_tcp_friendly() {
    let o = run("tfrc-friendly");
    let m = metric(&o, "median_ratio");
    assert!((0.8..=1.25).contains(&m), "median_ratio {m}");
}

#[test]
fn scalability_t1_iiad_is_worst_with_every_scheme_calibrated() {
    // iscc Fig 6: IIAD's loss is the worst at the largest n of the quick
    // sweep, with every scheme calibrated to the paper's p_2 band first.
    // The figure's other claim, ISCC(2) below AIMD and TFRC, is a check of
    // the experiment that this simulator does not reproduce once the
    // senders' timers wait for a receiver that reports once per RTT
    // (docs/experiments.md, scalability-t1); it is not asserted here.
    let o = run("scalability-t1");
    let p = |s: &str| o.metrics[s]["p_max"].as_f64().unwrap_or(f64::NAN);
    let (aimd, iiad, tfrc, iscc) = (p("AIMD"), p("IIAD"), p("TFRC"), p("ISCC(2)"));
    assert!(
        iiad > aimd && iiad > tfrc && iiad > iscc,
        "{aimd} {iiad} {tfrc} {iscc}"
    );
    for s in ["AIMD", "IIAD", "ISCC(2)"] {
        let c = o.metrics[s]["calibration_loss"]
            .as_f64()
            .unwrap_or(f64::NAN);
        assert!((0.003..=0.006).contains(&c), "{s} calibrated to p_2 {c}");
    }
}

#[test]
fn quick_summaries_match_snapshot() {
    let mut text = String::new();
    for (name, _, _) in EXPERIMENTS {
        let o = run(name);
        text.push_str(&format!("## {name}\n"));
        for l in &o.summary {
            text.push_str(l);
            text.push('\n');
        }
        // The JSON document has the agreed shape.
        let j = o.json();
        assert_eq!(j["experiment"], *name);
        assert!(j["metrics"].is_object() && j["paper"].is_object());
    }
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/snapshots/quick.txt");
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
        std::fs::create_dir_all(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/snapshots"))
            .expect("mkdir");
        std::fs::write(path, &text).expect("write snapshot");
    }
    let want =
        std::fs::read_to_string(path).expect("snapshot exists (run with UPDATE_SNAPSHOTS=1)");
    assert_eq!(
        text, want,
        "summaries changed; regenerate with UPDATE_SNAPSHOTS=1 if intended"
    );
}

#[test]
fn unknown_experiment_is_an_error() {
    assert!(experiments::run("nope", &OPTS).is_err());
}
