//! `scheduler` — flows of one macroflow that start at different times
//! converge to equal shares, or to their weights (sigcomm1999 §4.6, Fig 13).
//!
//! Three always-backlogged ALF flows on one CM host to one receiver start
//! `stagger` apart. The CM's scheduler apportions the macroflow's rate among
//! them; every report gives the receiver's byte count, so each flow's rate
//! is measured per one-second bin at the receiver.
//!
//! The simulation of one run is in [`simulation`]; this module sweeps it
//! and reports the experiment.

pub mod simulation;

use std::fmt::Write as _;

use serde_json::json;

use super::{ExperimentError, Opts, Output, check, progress};
use crate::plot::{Plot, Series, Style};
use crate::progress::par_map;
use simulation::{SchedRun, run as run_one, scenarios};

/// Equal weights and 1:2:4, flows starting staggered.
pub fn run(opts: &Opts) -> Result<Output, ExperimentError> {
    let jobs = scenarios(opts.quick);
    let bar = progress("scheduler", jobs.len(), opts);
    let runs: Vec<SchedRun> = par_map(&jobs, opts.threads, &bar, run_one)
        .into_iter()
        .collect::<Result<_, _>>()
        .map_err(|e| ExperimentError::Setup(e.to_string()))?;
    let mut csv = String::from("weights,flow,second,rate_bps\n");
    let mut series = Vec::new();
    let mut summary = Vec::new();
    for r in &runs {
        let w = r
            .params
            .weights
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(":");
        for (i, rates) in r.rates_bps.iter().enumerate() {
            for (s, x) in rates.iter().enumerate() {
                let _ = writeln!(csv, "{w},{i},{s},{x:.0}");
            }
            series.push(Series {
                label: format!("{w} flow {} (w={})", i + 1, r.params.weights[i]),
                points: rates
                    .iter()
                    .enumerate()
                    .map(|(s, x)| (s as f64 + 0.5, x / 1e3))
                    .collect(),
                style: Style::Line,
            });
        }
        summary.push(format!(
            "weights {w}: shares {}, share_error {:.3}, convergence {} s",
            r.shares
                .iter()
                .map(|s| format!("{s:.3}"))
                .collect::<Vec<_>>()
                .join("/"),
            r.share_error,
            r.convergence_s
                .map_or("never".into(), |c| format!("{c:.0}"))
        ));
    }
    let share_error = runs.iter().map(|r| r.share_error).fold(0.0, f64::max);
    let convergence = runs
        .iter()
        .map(|r| r.convergence_s.unwrap_or(f64::INFINITY))
        .fold(0.0, f64::max);
    Ok(Output {
        name: "scheduler".into(),
        csv,
        plot: Plot {
            title: "Staggered flows on one macroflow (sigcomm1999 Fig 13)".into(),
            x_label: "time (s)".into(),
            y_label: "received rate (kbit/s)".into(),
            series,
        },
        metrics: json!({"share_error": share_error, "convergence_s": convergence,
                        "runs": runs.iter().map(|r| json!({"weights": r.params.weights, "shares": r.shares,
                            "share_error": r.share_error, "convergence_s": r.convergence_s})).collect::<Vec<_>>()}),
        paper: json!({"claim": "flows starting at different times converge to the same rate; weights apportion bandwidth"}),
        checks: vec![check("share_error", share_error, "shares equal / as weighted", "<= 0.05", share_error <= 0.05)],
        notes: vec![
            "Three always-backlogged ALF flows on one CM host to one receiver, 1 Mbit/s, 60 ms one way, starting 10 s apart (3 s in --quick); the weighted (deficit round robin) scheduler; rates per 1 s bin at the receiver. share_error: largest relative deviation of a share from its target over the second half after the last start; convergence: seconds after the last start until every later bin is within 10% of the targets.".into(),
        ],
        summary,
    })
}
