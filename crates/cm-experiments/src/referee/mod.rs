//! ns-2 as referee of the simulated figures' baselines: each [`Case`] is the
//! NewReno (or CBR) half of one experiment's condition over several seeds;
//! [`judge`] runs every scenario in this simulator and in ns-2
//! ([`crate::ns2`]) and compares the figure's metric and the bottleneck's
//! drops, averaged over seeds, beside the paper's figure where it gives
//! one. `cm referee` and `scripts/ns2-referee.sh` are the front ends.
//!
//! Acceptance (issue 22): the metric within 10% of ns-2's and the drops
//! within 20%, per condition, means over seeds. The CM half of a figure has
//! no ns-2 counterpart (the authors' module was never released); a
//! relative case ([`Case::cm`]) checks the paper's claim "TCP/CM ≈ the
//! baseline" against ns-2's baseline instead, within 20%.

use std::collections::HashMap;
use std::fmt::Write as _;

use serde::Serialize;
use serde_json::{Value, json};

use crate::ns2::{self, Ns2Error};
use crate::progress::{Progress, par_map};
use crate::scenario::{Scenario, ScenarioError};
use crate::simulate;

pub mod cases;
pub mod t1;

pub use cases::{EXPERIMENTS, Select, cases};

/// Largest accepted |ours / ns-2 − 1| of the metric.
pub const METRIC_TOLERANCE: f64 = 0.10;
/// Largest accepted |ours / ns-2 − 1| of the bottleneck drops.
pub const DROPS_TOLERANCE: f64 = 0.20;
/// Largest accepted |TCP/CM / ns-2 baseline − 1| of a relative case.
pub const RELATIVE_TOLERANCE: f64 = 0.20;

/// What a case compares.
#[derive(Clone, Debug)]
pub enum Metric {
    /// Sum of the named flows' goodput, bit/s.
    Goodput(Vec<String>),
    /// Mean completion time of the named finite transfers, s.
    Completion(Vec<String>),
    /// Loss rate (dropped / sent) of the `smooth` flows over that of the
    /// `tcp` flows: how much less often DropTail hits smooth streams.
    LossRatio {
        /// The constant-rate flows.
        smooth: Vec<String>,
        /// The TCP flows.
        tcp: Vec<String>,
    },
}

impl Metric {
    /// Its name in tables and JSON.
    pub fn name(&self) -> &'static str {
        match self {
            Metric::Goodput(_) => "goodput_bps",
            Metric::Completion(_) => "completion_s",
            Metric::LossRatio { .. } => "smooth_loss_over_tcp_loss",
        }
    }
}

/// The paper's figure for a case's metric.
#[derive(Clone, Copy, Debug)]
pub struct Paper {
    /// In the metric's unit.
    pub value: f64,
    /// As the paper states it.
    pub text: &'static str,
}

/// One condition of one experiment: its baseline scenarios over seeds.
#[derive(Clone, Debug)]
pub struct Case {
    /// The experiment (`cm experiment` name).
    pub experiment: &'static str,
    /// The condition, for people.
    pub condition: String,
    /// One scenario per seed: what ns-2 runs, and what this simulator runs
    /// unless `cm` is given.
    pub runs: Vec<Scenario>,
    /// A relative check of the CM half: this simulator runs these instead
    /// (the figure's CM scenarios, seed for seed), and the paper's claim
    /// "TCP/CM ≈ the baseline" is checked against ns-2's baseline.
    pub cm: Option<Vec<Scenario>>,
    /// What ns-2 may stand in for CM flows of `runs` (ns-2's TFRC for
    /// TCP/CM on TFRC).
    pub ns2: ns2::tcl::Options,
    /// What is compared.
    pub metric: Metric,
    /// The paper's figure, if it gives one.
    pub paper: Option<Paper>,
}

/// Why the referee could not judge.
#[derive(Debug, thiserror::Error)]
pub enum RefereeError {
    /// Our simulator failed.
    #[error(transparent)]
    Ours(#[from] ScenarioError),
    /// ns-2 failed.
    #[error(transparent)]
    Ns2(#[from] Ns2Error),
    /// A case names a flow its scenario lacks.
    #[error("{0}")]
    Case(String),
}

/// One flow as one simulator saw it.
struct FlowView {
    name: String,
    goodput_bps: f64,
    completion_s: Option<f64>,
    /// Data packets sent.
    sent: u64,
    /// Of them, dropped at the bottleneck.
    drops: u64,
}

/// One simulator's view of one run: its flows and the bottleneck's drops.
struct View {
    flows: Vec<FlowView>,
    drops: u64,
}

impl View {
    fn ours(s: &Scenario) -> Result<View, RefereeError> {
        let r = simulate::run(s)?;
        let flows = r
            .flows
            .iter()
            .map(|f| FlowView {
                name: f.name.clone(),
                goodput_bps: f.goodput_bps,
                completion_s: f.completion_s,
                sent: f.sent_packets,
                drops: r
                    .bottleneck
                    .drops_by_flow
                    .get(&f.name)
                    .copied()
                    .unwrap_or(0),
            })
            .collect();
        Ok(View {
            flows,
            drops: r.bottleneck.drops,
        })
    }

    fn ns2(s: &Scenario, opt: ns2::tcl::Options) -> Result<View, RefereeError> {
        let r = ns2::run_with(s, opt)?;
        let flows = r
            .flows
            .into_iter()
            .map(|f| FlowView {
                name: f.name,
                goodput_bps: f.goodput_bps,
                completion_s: f.completion_s,
                sent: f.sent_packets,
                drops: f.drops,
            })
            .collect();
        Ok(View {
            flows,
            drops: r.drops,
        })
    }

    fn flow(&self, name: &str) -> Result<&FlowView, RefereeError> {
        self.flows
            .iter()
            .find(|f| f.name == name)
            .ok_or_else(|| RefereeError::Case(format!("no flow {name:?} in the scenario")))
    }

    fn metric(&self, m: &Metric) -> Result<f64, RefereeError> {
        Ok(match m {
            // The flows present: a relative case's ns-2 side may stand one
            // NewReno in for an ensemble.
            Metric::Goodput(n) => {
                let got: Vec<f64> = n
                    .iter()
                    .filter_map(|x| self.flow(x).ok().map(|f| f.goodput_bps))
                    .collect();
                if got.is_empty() {
                    return Err(RefereeError::Case(format!(
                        "none of the flows {n:?} in the scenario"
                    )));
                }
                got.iter().sum()
            }
            Metric::Completion(n) => {
                let t = n
                    .iter()
                    .map(|x| self.flow(x).map(|f| f.completion_s.unwrap_or(f64::NAN)))
                    .sum::<Result<f64, _>>()?;
                t / n.len().max(1) as f64
            }
            Metric::LossRatio { smooth, tcp } => {
                let loss = |n: &[String]| -> Result<f64, RefereeError> {
                    let (mut d, mut s) = (0u64, 0u64);
                    for x in n {
                        let f = self.flow(x)?;
                        d += f.drops;
                        s += f.sent;
                    }
                    Ok(d as f64 / s.max(1) as f64)
                };
                let t = loss(tcp)?;
                if t > 0.0 { loss(smooth)? / t } else { f64::NAN }
            }
        })
    }
}

/// A judged case: means over its seeds.
#[derive(Clone, Debug, Serialize)]
pub struct Verdict {
    /// The experiment.
    pub experiment: String,
    /// The condition.
    pub condition: String,
    /// The metric's name.
    pub metric: String,
    /// Seeds run.
    pub seeds: usize,
    /// Ours, mean over seeds.
    pub ours: f64,
    /// ns-2's, mean over seeds.
    pub ns2: f64,
    /// ours / ns-2 − 1.
    pub delta: f64,
    /// Bottleneck drops, ours, mean over seeds.
    pub ours_drops: f64,
    /// Bottleneck drops, ns-2, mean over seeds.
    pub ns2_drops: f64,
    /// ours / ns-2 − 1 of the drops.
    pub drops_delta: f64,
    /// The paper's figure (metric unit), if it gives one.
    pub paper: Option<f64>,
    /// As the paper states it.
    pub paper_text: Option<String>,
    /// A relative check: ours is the CM half, ns-2's the baseline.
    pub relative: bool,
    /// Whether the tolerance applies: false where the two simulators model
    /// the scheme differently and the rows only sit side by side
    /// (`scalability-t1`).
    pub judged: bool,
    /// Baseline: metric within [`METRIC_TOLERANCE`] and drops within
    /// [`DROPS_TOLERANCE`]. Relative: metric within [`RELATIVE_TOLERANCE`]
    /// (the papers' "≈"), drops not judged.
    pub pass: bool,
}

fn rel(a: f64, b: f64) -> f64 {
    if b == 0.0 {
        if a == 0.0 { 0.0 } else { f64::INFINITY }
    } else {
        a / b - 1.0
    }
}

/// The cases of `experiments` (all of [`EXPERIMENTS`] if empty), each
/// experiment's together.
pub fn cases_for(experiments: &[&str], sel: Select) -> Result<Vec<Case>, ScenarioError> {
    let names = if experiments.is_empty() {
        EXPERIMENTS
    } else {
        experiments
    };
    let mut all = Vec::new();
    for n in names {
        all.extend(cases(Some(n), sel)?);
    }
    Ok(all)
}

/// Every verdict for `experiments` (all of [`EXPERIMENTS`] if empty): the
/// cases of [`cases()`] through [`judge`], and `scalability-t1`'s rows
/// ([`t1::judge`]).
pub fn judge_experiments(
    experiments: &[&str],
    sel: Select,
    threads: usize,
    quiet: bool,
    tweak: impl Fn(&mut Case),
) -> Result<Vec<Verdict>, RefereeError> {
    let mut all = cases_for(experiments, sel)?;
    all.iter_mut().for_each(tweak);
    let mut v = judge(&all, threads, quiet)?;
    if experiments.is_empty() || experiments.contains(&"scalability-t1") {
        v.extend(t1::judge(sel.quick, threads, quiet)?);
    }
    Ok(v)
}

/// One simulation to run: a scenario in this simulator, or in ns-2 with
/// its stand-ins.
#[derive(Clone, Copy)]
enum Run<'a> {
    Ours(&'a Scenario),
    Ns2(&'a Scenario, ns2::tcl::Options),
}

impl Run<'_> {
    /// What makes two runs the same run.
    fn key(&self) -> Result<String, RefereeError> {
        let (tag, s) = match self {
            Run::Ours(s) => ("ours".to_string(), s),
            Run::Ns2(s, opt) => (format!("ns2 {opt:?}"), s),
        };
        let text = serde_json::to_string(s)
            .map_err(|e| RefereeError::Case(format!("scenario {:?}: {e}", s.name)))?;
        Ok(format!("{tag} {text}"))
    }
}

/// Runs every case's scenarios in both simulators on `threads` workers.
pub fn judge(cases: &[Case], threads: usize, quiet: bool) -> Result<Vec<Verdict>, RefereeError> {
    // Cases share runs (a baseline and the relative checks against it):
    // each distinct (simulator, scenario) runs once.
    let mut runs: Vec<Run<'_>> = Vec::new();
    let mut keys: HashMap<String, usize> = HashMap::new();
    let mut jobs: Vec<(usize, bool, usize)> = Vec::new();
    for (c, k) in cases.iter().enumerate() {
        for (r, base) in k.runs.iter().enumerate() {
            let ours = k.cm.as_ref().and_then(|v| v.get(r)).unwrap_or(base);
            for run in [Run::Ours(ours), Run::Ns2(base, k.ns2)] {
                let key = run.key()?;
                let next = runs.len();
                let i = *keys.entry(key).or_insert(next);
                if i == next {
                    runs.push(run);
                }
                jobs.push((c, matches!(run, Run::Ns2(..)), i));
            }
        }
    }
    let bar = Progress::new("referee", runs.len(), quiet);
    let views = par_map(&runs, threads, &bar, |run| match run {
        Run::Ours(s) => View::ours(s),
        Run::Ns2(s, opt) => View::ns2(s, *opt),
    });
    let views: Vec<View> = views.into_iter().collect::<Result<_, _>>()?;
    let mut acc: Vec<[(f64, f64); 2]> = vec![[(0.0, 0.0); 2]; cases.len()];
    for &(c, is_ns2, i) in &jobs {
        let v = &views[i];
        let m = v.metric(&cases[c].metric)?;
        let a = &mut acc[c][usize::from(is_ns2)];
        a.0 += m;
        a.1 += v.drops as f64;
    }
    Ok(cases
        .iter()
        .zip(acc)
        .map(|(k, [o, n])| {
            let runs = k.runs.len().max(1) as f64;
            let (ours, ns2) = (o.0 / runs, n.0 / runs);
            let (od, nd) = (o.1 / runs, n.1 / runs);
            let (delta, drops_delta) = (rel(ours, ns2), rel(od, nd));
            Verdict {
                experiment: k.experiment.to_string(),
                condition: k.condition.clone(),
                metric: k.metric.name().to_string(),
                seeds: k.runs.len(),
                ours,
                ns2,
                delta,
                ours_drops: od,
                ns2_drops: nd,
                drops_delta,
                paper: k.paper.map(|p| p.value),
                paper_text: k.paper.map(|p| p.text.to_string()),
                relative: k.cm.is_some(),
                judged: true,
                pass: if k.cm.is_some() {
                    delta.abs() <= RELATIVE_TOLERANCE
                } else {
                    delta.abs() <= METRIC_TOLERANCE && drops_delta.abs() <= DROPS_TOLERANCE
                },
            }
        })
        .collect())
}

fn fmt_metric(metric: &str, v: f64) -> String {
    match metric {
        "goodput_bps" => format!("{:.1} kbit/s", v / 1e3),
        "completion_s" => format!("{v:.3} s"),
        _ => format!("{v:.3}"),
    }
}

/// The verdicts as a markdown table: ours, ns-2's and the paper's figure
/// side by side, with the deltas.
pub fn table(verdicts: &[Verdict]) -> String {
    let mut s = String::from(
        "| experiment | condition | seeds | ours | ns-2 | Δ | drops ours | drops ns-2 | Δ drops | paper | within 10% / 20% |\n|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for v in verdicts {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {:+.1}% | {:.1} | {:.1} | {:+.1}% | {} | {} |",
            v.experiment,
            v.condition,
            v.seeds,
            fmt_metric(&v.metric, v.ours),
            fmt_metric(&v.metric, v.ns2),
            v.delta * 100.0,
            v.ours_drops,
            v.ns2_drops,
            v.drops_delta * 100.0,
            v.paper_text.as_deref().unwrap_or("—"),
            match (v.judged, v.pass) {
                (false, _) => "— (not judged)",
                (true, true) => "yes",
                (true, false) => "**no**",
            }
        );
    }
    s
}

/// The `referee` block of `experiment`'s JSON: its verdicts.
pub fn block(experiment: &str, verdicts: &[Verdict]) -> Value {
    let rows: Vec<&Verdict> = verdicts
        .iter()
        .filter(|v| v.experiment == experiment)
        .collect();
    json!({
        "experiment": experiment,
        "simulator": "ns-2.35 (Debian ns2)",
        "tolerance": {"metric": METRIC_TOLERANCE, "drops": DROPS_TOLERANCE,
                      "relative": RELATIVE_TOLERANCE},
        "conditions": rows,
    })
}
