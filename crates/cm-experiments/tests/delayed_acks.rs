#![allow(clippy::unwrap_used)]
//! Delayed ACKs (RFC 5681 §4.2, Linux's 40 ms) at every TCP receiver:
//! `Scenario::set_delayed_acks` reaches the receivers, and the full
//! `tcp-friendly` (sigcomm1999 Fig 6) and `web4` (Fig 14) grids still pass
//! the checks they pass by default. The CM's AIMD counts acknowledged
//! bytes (RFC 3465), so an ACK of two segments grows its window as two
//! ACKs would.
//!
//! The numbers beside the default runs':
//! `cargo run --release -p cm-experiments --example delayed_acks`.

use cm_experiments::experiments::{
    ExperimentError, LINUX_DELAYED_ACK_MS, Opts, Output, tcp_friendly, web4,
};
use cm_experiments::scenario::{Bottleneck, FlowSpec, Scenario, Transport};
use cm_experiments::simulate::run_traced;

/// The experiments' default (full) grids, as `cm experiment NAME` runs them.
const FULL: Opts = Opts {
    quick: false,
    quiet: true,
    threads: 2,
};

type RunWith = fn(&Opts, Option<u64>) -> Result<Output, ExperimentError>;

fn metric(o: &Output, name: &str) -> f64 {
    o.metrics[name].as_f64().unwrap_or(f64::NAN)
}

fn check_names(o: &Output) -> Vec<&str> {
    o.checks.iter().map(|c| c.metric.as_str()).collect()
}

/// A 1 Mbit/s, 60 ms dumbbell whose queue holds what the receive windows
/// (16 segments) let in flight, so nothing is lost: a TCP/CM and a NewReno
/// bulk flow (traced), a web source and a CBR source.
fn scenario() -> Scenario {
    let mut s = Scenario {
        name: "delayed-acks".into(),
        duration: 10.0,
        seed: 1,
        mss: 1460,
        cm_initial_window: None,
        cm_controller: None,
        rcv_wnd: Some(16 * 1460),
        start_jitter_ms: 0.0,
        bottleneck: Bottleneck {
            rate_bps: 1_000_000,
            delay_ms: 60.0,
            queue_packets: Some(100),
            ..Bottleneck::default()
        },
        access: Default::default(),
        topology: None,
        flows: Vec::new(),
    };
    for (name, t) in [
        ("cm", Transport::Tcpcm),
        ("nr", Transport::Newreno),
        ("web", Transport::Web),
        ("cbr", Transport::Cbr),
    ] {
        let mut f = FlowSpec::new(name, t);
        f.trace = matches!(t, Transport::Tcpcm | Transport::Newreno);
        f.rate_bps = (t == Transport::Cbr).then_some(50_000);
        s.flows.push(f);
    }
    s
}

/// ACKs the sender received per data segment it sent, per traced flow.
fn acks_per_segment(s: &Scenario) -> Vec<(String, f64)> {
    let (r, traces) = run_traced(s).unwrap();
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    traces
        .iter()
        .map(|t| {
            let c = &t.conns[0];
            assert!(c.seq.len() > 100, "{}: {} segments", t.name, c.seq.len());
            (t.name.clone(), c.acked.len() as f64 / c.seq.len() as f64)
        })
        .collect()
}

#[test]
fn set_delayed_acks_reaches_every_tcp_receiver() {
    let plain = scenario();
    let mut delayed = scenario();
    delayed.set_delayed_acks(Some(LINUX_DELAYED_ACK_MS));
    for f in &delayed.flows {
        let tcp = f.transport != "cbr";
        assert_eq!(f.delayed_ack, tcp, "{}", f.name);
        assert_eq!(
            f.delayed_ack_ms,
            tcp.then_some(LINUX_DELAYED_ACK_MS),
            "{}",
            f.name
        );
    }
    let mut none = scenario();
    none.set_delayed_acks(None);
    assert!(none.flows.iter().all(|f| !f.delayed_ack));
    for (name, r) in acks_per_segment(&plain) {
        eprintln!("{name}: {r:.3} ACKs per segment");
        assert!(
            r > 0.9,
            "{name}: {r:.3} ACKs per segment, every segment ACKed"
        );
    }
    for (name, r) in acks_per_segment(&delayed) {
        eprintln!("{name}: {r:.3} ACKs per segment, delayed");
        assert!(
            (0.45..=0.6).contains(&r),
            "{name}: {r:.3} ACKs per segment with delayed ACKs"
        );
    }
}

#[test]
fn tcp_friendly_checks_pass_with_delayed_acks() {
    let o = tcp_friendly::run_with(&FULL, Some(LINUX_DELAYED_ACK_MS)).unwrap();
    assert_eq!(o.name, "tcp-friendly-delayed-ack");
    assert_eq!(check_names(&o), ["median_ratio"]);
    assert!(o.notes.iter().any(|n| n.contains("Delayed ACKs")));
    // The experiment's check (tcp_friendly.rs) and tests/experiments.rs's.
    let m = metric(&o, "median_ratio");
    assert!((0.8..=1.25).contains(&m), "median_ratio {m}");
    assert!(o.pass(), "{:?}", o.checks);
    assert_eq!(o.metrics["runs"], 280, "the full grid");
    for c in o.metrics["conditions"].as_array().unwrap() {
        eprintln!("{c}");
    }
}

#[test]
fn web4_checks_pass_with_delayed_acks() {
    let o = web4::run_with(&FULL, Some(LINUX_DELAYED_ACK_MS)).unwrap();
    assert_eq!(o.name, "web4-delayed-ack");
    assert_eq!(check_names(&o), ["jain_cm", "jain_cm - jain_newreno"]);
    // The experiment's checks (web4.rs) and tests/experiments.rs's.
    let (c, n) = (metric(&o, "jain_cm"), metric(&o, "jain_newreno"));
    assert!(c >= 0.99 && c > n, "jain_cm {c} jain_newreno {n}");
    assert!(o.pass(), "{:?}", o.checks);
    for l in &o.summary {
        eprintln!("{l}");
    }
}

#[test]
fn without_delayed_acks_the_runs_are_the_experiments() {
    let quick = Opts {
        quick: true,
        ..FULL
    };
    let runs: [(&str, RunWith); 2] = [
        ("tcp-friendly", tcp_friendly::run_with),
        ("web4", web4::run_with),
    ];
    for (name, run) in runs {
        let plain = run(&quick, None).unwrap();
        let default = cm_experiments::experiments::run(name, &quick).unwrap();
        assert_eq!(plain.name, name);
        assert_eq!(plain.json(), default.json(), "{name}");
        assert_eq!(plain.csv, default.csv, "{name}");
        let delayed = run(&quick, Some(LINUX_DELAYED_ACK_MS)).unwrap();
        assert_ne!(
            delayed.csv, plain.csv,
            "{name}: delayed ACKs change the runs"
        );
    }
}
