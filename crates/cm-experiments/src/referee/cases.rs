//! The baseline half of each simulated figure, as the experiments build it:
//! every case takes its scenarios from the experiment's own builder, so the
//! referee runs exactly what the figure runs.

use super::{Case, Metric, Paper};
use crate::experiments::{seq_trace, sharing, tcp_friendly, web4};
use crate::ns2::tcl::Options;
use crate::scenario::{Scenario, ScenarioError, Transport};

/// The scenario behind the layered-audio DropTail finding (no CM: two
/// NewReno, a 150 kbit/s CBR and an 80 kbit/s stream of 1000-byte
/// datagrams on the layered-audio path).
const DROPTAIL_BIAS: &str = include_str!("../../../../experiments/scenarios/droptail-bias.toml");

/// The same with ns's defaults: a queue of 7 packets, 1000-byte TCP packets.
const DROPTAIL_BIAS_PACKETS: &str =
    include_str!("../../../../experiments/scenarios/droptail-bias-packets.toml");

/// Which cases to build.
#[derive(Clone, Copy, Debug)]
pub struct Select {
    /// Short scenarios, fewer conditions (the tests' variant).
    pub quick: bool,
    /// Seeds per condition (1..=seeds).
    pub seeds: u64,
    /// Run each TCP case with SACK too (ns-2's `Sack1` against ours).
    pub sack: bool,
}

impl Select {
    /// `quick` or full cases, `seeds` per condition (default 10, 2 when
    /// quick), with SACK cases too if `sack`.
    pub fn new(quick: bool, seeds: Option<u64>, sack: bool) -> Self {
        Select {
            quick,
            seeds: seeds.unwrap_or(if quick { 2 } else { 10 }),
            sack,
        }
    }
}

/// The experiments with a referee.
pub const EXPERIMENTS: &[&str] = &[
    "tcp-friendly",
    "seq-trace",
    "web4",
    "sharing",
    "layered-audio",
    "tfrc-friendly",
    "scalability-t1",
];

/// Turns SACK on for every TCP flow of `s`.
fn with_sack(mut s: Scenario) -> Scenario {
    for f in &mut s.flows {
        if matches!(f.transport(), Ok(Transport::Newreno | Transport::Web)) {
            f.sack = true;
        }
    }
    s
}

/// The `tcp-friendly` grid: rates, one-way delays and seconds per run
/// (quick: one condition, as the tests run it).
fn grid(quick: bool) -> (Vec<u64>, Vec<f64>, f64) {
    if quick {
        (vec![1_000_000], vec![60.0], 10.0)
    } else {
        (tcp_friendly::RATES.to_vec(), vec![60.0, 35.0], 20.0)
    }
}

fn names(prefix: &str, n: usize) -> Vec<String> {
    (1..=n).map(|k| format!("{prefix}{k}")).collect()
}

/// The cases of `experiment` (or of every one in [`EXPERIMENTS`]).
pub fn cases(experiment: Option<&str>, sel: Select) -> Result<Vec<Case>, ScenarioError> {
    let mut out = Vec::new();
    let want = |e: &str| experiment.is_none_or(|x| x == e);
    let seeds: Vec<u64> = (1..=sel.seeds.max(1)).collect();
    let sacks: &[bool] = if sel.sack { &[false, true] } else { &[false] };
    for &sack in sacks {
        let tag = if sack { ", SACK" } else { "" };
        let build = |f: &dyn Fn(u64) -> Scenario| -> Vec<Scenario> {
            seeds
                .iter()
                .map(|&s| if sack { with_sack(f(s)) } else { f(s) })
                .collect()
        };
        if want("tcp-friendly") {
            let (rates, delays, secs) = grid(sel.quick);
            for &r in &rates {
                for &d in &delays {
                    out.push(Case {
                        experiment: "tcp-friendly",
                        condition: format!("{} kbit/s, {d} ms{tag}", r / 1000),
                        runs: build(&|s| {
                            tcp_friendly::default_run(r, d, s, Transport::Newreno, secs)
                        }),
                        metric: Metric::Goodput(vec!["test".into()]),
                        paper: None,
                        cm: None,
                        ns2: Options::default(),
                    });
                }
            }
        }
        if want("seq-trace") {
            out.push(Case {
                experiment: "seq-trace",
                condition: format!("1 Mbit/s, 60 ms, web background{tag}"),
                runs: build(&|s| seq_trace::scenario(Transport::Newreno, seq_trace::SECS, s)),
                metric: Metric::Goodput(vec!["test".into()]),
                paper: None,
                cm: None,
                ns2: Options::default(),
            });
        }
        if want("web4") {
            let secs = if sel.quick { 15.0 } else { web4::SECS };
            out.push(Case {
                experiment: "web4",
                condition: format!("4 NewReno connections, aggregate{tag}"),
                runs: build(&|s| web4::scenario(Transport::Newreno, s, secs, None)),
                metric: Metric::Goodput(names("conn", 4)),
                paper: Some(Paper {
                    value: 785_000.0,
                    text: "785 kbit/s (Fig 14)",
                }),
                cm: None,
                ns2: Options::default(),
            });
        }
        if want("sharing") {
            // Deterministic in both simulators (no random source): one run.
            let s = sharing::scenario(Transport::Newreno);
            out.push(Case {
                experiment: "sharing",
                condition: format!("9 x 128 KB NewReno fetches, mean time{tag}"),
                runs: vec![if sack { with_sack(s) } else { s }],
                metric: Metric::Completion(names("get", 9)),
                paper: None,
                cm: None,
                ns2: Options::default(),
            });
        }
        if want("layered-audio") && !sack {
            // The scenario file already runs its TCPs with SACK.
            for (file, what) in [
                (DROPTAIL_BIAS, "7500-byte queue"),
                (DROPTAIL_BIAS_PACKETS, "7-packet queue, 1000-byte packets"),
            ] {
                let base = Scenario::from_toml(file)?;
                let secs = if sel.quick { 20.0 } else { base.duration };
                out.push(Case {
                    experiment: "layered-audio",
                    condition: format!("smooth streams' loss / TCP's loss, no CM, {what}"),
                    runs: seeds
                        .iter()
                        .map(|&seed| {
                            let mut s = base.clone();
                            s.seed = seed;
                            s.duration = secs;
                            s
                        })
                        .collect(),
                    metric: Metric::LossRatio {
                        smooth: vec!["cbr".into(), "audio".into()],
                        tcp: vec!["tcp1".into(), "tcp2".into()],
                    },
                    paper: None,
                    cm: None,
                    ns2: Options::default(),
                });
            }
        }
    }
    relative(&mut out, experiment, sel);
    Ok(out)
}

/// The CM half against ns-2's baseline (without SACK, as the papers ran
/// NewReno): `tcp-friendly` per condition, `seq-trace`, and `web4`, where
/// one NewReno stands in for the four-connection macroflow (the claim of
/// sigcomm1999 §4.1: an ensemble on the CM competes as one TCP).
fn relative(out: &mut Vec<Case>, experiment: Option<&str>, sel: Select) {
    let want = |e: &str| experiment.is_none_or(|x| x == e);
    let seeds: Vec<u64> = (1..=sel.seeds.max(1)).collect();
    let pair = |f: &dyn Fn(u64, Transport) -> Scenario| {
        let base: Vec<Scenario> = seeds.iter().map(|&s| f(s, Transport::Newreno)).collect();
        let cm: Vec<Scenario> = seeds.iter().map(|&s| f(s, Transport::Tcpcm)).collect();
        (base, Some(cm))
    };
    if want("tcp-friendly") {
        let (rates, delays, secs) = grid(sel.quick);
        for &r in &rates {
            for &d in &delays {
                let (runs, cm) = pair(&|s, t| tcp_friendly::default_run(r, d, s, t, secs));
                out.push(Case {
                    experiment: "tcp-friendly",
                    condition: format!("TCP/CM vs ns-2's NewReno, {} kbit/s, {d} ms", r / 1000),
                    runs,
                    metric: Metric::Goodput(vec!["test".into()]),
                    paper: None,
                    cm,
                    ns2: Options::default(),
                });
            }
        }
    }
    if want("tfrc-friendly") {
        // TCP/CM on TFRC against ns-2's NewReno (the claim: TFRC is
        // TCP-friendly) and against ns-2's own TFRC sender in its place.
        let (rates, delays, secs) = grid(sel.quick);
        let tfrc = |mut s: Scenario| {
            s.cm_controller = Some("tfrc".into());
            s
        };
        for &r in &rates {
            for &d in &delays {
                let base: Vec<Scenario> = seeds
                    .iter()
                    .map(|&s| tcp_friendly::default_run(r, d, s, Transport::Newreno, secs))
                    .collect();
                let cm: Vec<Scenario> = seeds
                    .iter()
                    .map(|&s| tfrc(tcp_friendly::default_run(r, d, s, Transport::Tcpcm, secs)))
                    .collect();
                out.push(Case {
                    experiment: "tfrc-friendly",
                    condition: format!(
                        "TCP/CM on TFRC vs ns-2's NewReno, {} kbit/s, {d} ms",
                        r / 1000
                    ),
                    runs: base,
                    metric: Metric::Goodput(vec!["test".into()]),
                    paper: None,
                    cm: Some(cm.clone()),
                    ns2: Options::default(),
                });
                out.push(Case {
                    experiment: "tfrc-friendly",
                    condition: format!(
                        "TCP/CM on TFRC vs ns-2's Agent/TFRC, {} kbit/s, {d} ms",
                        r / 1000
                    ),
                    runs: cm.clone(),
                    metric: Metric::Goodput(vec!["test".into()]),
                    paper: None,
                    cm: Some(cm),
                    ns2: Options { tfrc_for_cm: true },
                });
            }
        }
    }
    if want("seq-trace") {
        let (runs, cm) = pair(&|s, t| seq_trace::scenario(t, seq_trace::SECS, s));
        out.push(Case {
            experiment: "seq-trace",
            condition: "TCP/CM vs ns-2's NewReno, 1 Mbit/s, 60 ms, web background".into(),
            runs,
            metric: Metric::Goodput(vec!["test".into()]),
            paper: None,
            cm,
            ns2: Options::default(),
        });
    }
    if want("web4") {
        let secs = if sel.quick { 15.0 } else { web4::SECS };
        let (mut runs, cm) = pair(&|s, t| web4::scenario(t, s, secs, None));
        for s in &mut runs {
            s.flows
                .retain(|f| !matches!(f.name.as_str(), "conn2" | "conn3" | "conn4"));
        }
        out.push(Case {
            experiment: "web4",
            condition: "4 TCP/CM connections vs one ns-2 NewReno in their place".into(),
            runs,
            metric: Metric::Goodput(names("conn", 4)),
            paper: Some(Paper {
                value: 680_000.0,
                text: "TCP/CM 680 kbit/s (Fig 14)",
            }),
            cm,
            ns2: Options::default(),
        });
    }
}
