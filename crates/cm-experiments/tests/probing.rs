//! The probe-driven CM on the simulator (sigcomm1999 §4.2–4.4): the hosts
//! of `cm_experiments::probe` and the acceptance lines of the
//! `probe-frequency`, `reordering` and `aging-probes` experiments (quick
//! variants).

#![allow(clippy::unwrap_used)]

use cm_experiments::experiments::probing::simulation::{ProbeParams, run};
use cm_experiments::experiments::{self, Opts, Output};
use cm_experiments::probe::{Inference, Mode};

const OPTS: Opts = Opts {
    quick: true,
    quiet: true,
    threads: 2,
};

fn experiment(name: &str) -> Output {
    experiments::run(name, &OPTS).expect("experiment runs")
}

fn f(o: &Output, key: &str) -> f64 {
    o.metrics[key].as_f64().unwrap_or(f64::NAN)
}

fn short(seed: u64) -> ProbeParams {
    ProbeParams {
        seconds: 10,
        ..ProbeParams::new(seed)
    }
}

#[test]
fn the_handshake_completes_and_probes_are_answered() {
    let r = run(short(1)).unwrap();
    assert!(r.sent_packets > 500, "{r:?}");
    assert!(r.responses > 100 && r.responses <= r.probes, "{r:?}");
    // The initial window goes bare while the SYN is out.
    assert!(r.bare_packets >= 1, "{r:?}");
    // No random loss: slow start overflows the 1-BDP queue once, and the
    // receiver CM declares exactly the packets the queue dropped.
    assert!(r.dropped_packets > 0, "{r:?}");
    assert_eq!(r.declared_lost, r.dropped_packets, "{r:?}");
    assert_eq!(r.estimated_loss, Some(r.true_loss));
    assert!(r.goodput_bps > 5_000_000.0, "{r:?}");
}

#[test]
fn headerless_senders_without_reordering_decrease_only_on_real_loss() {
    for inf in [Inference::Undo, Inference::Naive] {
        let p = ProbeParams {
            mode: Mode::Headerless(inf),
            ..short(1)
        };
        let r = run(p).unwrap();
        assert_eq!(r.bare_packets, 0, "waits for the handshake: {r:?}");
        assert!(r.responses > 100, "{r:?}");
        // Slow start's overflow is the only loss: a couple of decreases
        // (one per round trip), never undone, and no count above the sent.
        assert!(r.dropped_packets > 0, "{r:?}");
        assert!((1..=3).contains(&r.decreases), "{r:?}");
        assert_eq!((r.undone, r.forged), (0, 0), "{r:?}");
    }
}

#[test]
fn runs_are_deterministic() {
    let p = ProbeParams {
        loss: 0.01,
        reorder: 0.03,
        reorder_delay_ms: 50,
        duplicate: 0.01,
        ..short(3)
    };
    let (a, b) = (run(p).unwrap(), run(p).unwrap());
    assert_eq!(
        (
            a.sent_packets,
            a.dropped_packets,
            a.declared_lost,
            a.responses
        ),
        (
            b.sent_packets,
            b.dropped_packets,
            b.declared_lost,
            b.responses
        )
    );
}

#[test]
fn probe_frequency_loss_estimate_within_10pct_at_2_probes_per_rtt() {
    let o = experiment("probe-frequency");
    let e = f(&o, "rel_error_at_2");
    assert!(e <= 0.10, "relative error {e}");
}

/// TCP-friendliness at the paper's 2 probes per RTT, with the window's
/// allowance for batched feedback (see the experiment's notes).
#[test]
fn probe_frequency_tcp_friendly_at_2_probes_per_rtt() {
    let o = experiment("probe-frequency");
    let m = f(&o, "friendliness_at_2");
    assert!((0.8..=1.25).contains(&m), "friendliness {m}");
}

#[test]
fn probe_frequency_friendliness_grows_with_the_probe_rate() {
    // What holds instead: more probes, less time in flight per byte, and
    // 0.5 per RTT leaves the CM in open loop (aging) between responses.
    let o = experiment("probe-frequency");
    let by: Vec<f64> = o.metrics["by_probes_per_rtt"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["friendliness"].as_f64().unwrap())
        .collect();
    assert!(by[0] < by[1] && by[1] < by[2] && by[2] < by[3], "{by:?}");
    assert!(by[0] < 0.4, "0.5 probes per RTT: {by:?}");
    assert!(by[2] >= 0.65, "2 probes per RTT: {by:?}");
    assert!(f(&o, "aging_steps_at_half") > 100.0 && f(&o, "aging_steps_at_2") == 0.0);
}

#[test]
fn reordering_header_throughput_at_3pct_within_10pct_of_none() {
    let o = experiment("reordering");
    let r = f(&o, "header_at_3pct_vs_none");
    assert!(
        (0.9..=1.1).contains(&r),
        "header at 3% reordering: {r} of none"
    );
}

#[test]
fn reordering_header_sees_every_real_loss() {
    // declared ≥ dropped at every point, up to losses still settling when
    // the runs end (a handful over all the seeds).
    let o = experiment("reordering");
    let (missed, dropped) = (f(&o, "header_missed"), f(&o, "header_dropped"));
    assert!(dropped > 1000.0, "{dropped}");
    assert!(
        missed <= 0.01 * dropped,
        "{missed} of {dropped} real losses unreported"
    );
}

#[test]
fn reordering_undo_beats_the_naive_count() {
    let o = experiment("reordering");
    let (u, n) = (f(&o, "undo_at_3pct_bps"), f(&o, "naive_at_3pct_bps"));
    assert!(u > 1.5 * n, "undo {u} naive {n}");
}

#[test]
fn aging_probes_reports_both_counts_and_says_whether_the_claim_holds() {
    let o = experiment("aging-probes");
    let (m, s) = (f(&o, "lost_minrtt"), f(&o, "lost_srtt"));
    assert!(m > 0.0 && s > 0.0, "{m} {s}");
    let verdict = &o.notes[1];
    assert!(verdict.starts_with("The claim "), "{verdict}");
    assert_eq!(o.checks[0].pass, m < 0.8 * s);
    assert_eq!(
        o.checks[0].pass,
        verdict.starts_with("The claim holds here")
    );
}
