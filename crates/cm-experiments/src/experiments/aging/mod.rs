//! `aging` — exponential aging's half-life: minimum RTT vs smoothed RTT
//! (sigcomm1999 §4.4, Fig 12).
//!
//! An always-backlogged ALF sender whose receiver reports only every few
//! round trips, so the CM spends most of its time in open loop, halving its
//! rate every half-life (§4.4). Half-way through, CBR cross traffic takes
//! half of the bottleneck: queues build, the smoothed RTT inflates, and a
//! half-life of srtt decays the open-loop rate more slowly than one of the
//! minimum RTT. The paper's claim: the minimum-RTT half-life loses
//! substantially fewer packets. Both modes run the identical scenario.
//!
//! The simulation of one run is in [`simulation`]; this module sweeps it
//! and reports the experiment.

pub mod probes;
pub mod simulation;

use std::fmt::Write as _;

use cm_core::Aging;
use serde_json::json;

use super::{ExperimentError, Opts, Output, check, progress};
use crate::plot::{Plot, Series, Style};
use crate::progress::par_map;
use simulation::{AgingRun, run as run_one, sweep, totals};

/// Run the sweep in both aging modes.
pub fn run(opts: &Opts) -> Result<Output, ExperimentError> {
    let jobs: Vec<_> = sweep(opts.quick)
        .into_iter()
        .flat_map(|p| [(p, Aging::MinRtt), (p, Aging::Srtt)])
        .collect();
    let bar = progress("aging", jobs.len(), opts);
    let runs: Vec<AgingRun> = par_map(&jobs, opts.threads, &bar, |&(p, m)| run_one(p, m))
        .into_iter()
        .collect::<Result<_, _>>()
        .map_err(|e| ExperimentError::Setup(e.to_string()))?;
    let (lost_minrtt, lost_srtt) = totals(&runs);
    let mut csv = String::from(
        "mode,report_ms,queue_bdps,seed,sent_packets,lost_packets,goodput_bps,cross_lost\n",
    );
    for r in &runs {
        let p = &r.params;
        let _ = writeln!(
            csv,
            "{},{},{},{},{},{},{:.0},{}",
            r.mode,
            p.report_ms,
            p.queue_bdps,
            p.seed,
            r.sent_packets,
            r.lost_packets,
            r.goodput_bps,
            r.cross_lost
        );
    }
    // Losses per condition, summed over seeds, one series per mode.
    let mut conds: Vec<(u64, u64)> = runs
        .iter()
        .map(|r| (r.params.report_ms, r.params.queue_bdps))
        .collect();
    conds.sort_unstable();
    conds.dedup();
    let per = |mode: &str| -> Vec<(f64, f64)> {
        conds
            .iter()
            .enumerate()
            .map(|(i, &(rep, q))| {
                let lost: u64 = runs
                    .iter()
                    .filter(|r| {
                        r.mode == mode && r.params.report_ms == rep && r.params.queue_bdps == q
                    })
                    .map(|r| r.lost_packets)
                    .sum();
                (i as f64 + 1.0, lost as f64)
            })
            .collect()
    };
    let (by_minrtt, by_srtt) = (per("minrtt"), per("srtt"));
    let mut summary: Vec<String> = conds
        .iter()
        .zip(by_minrtt.iter().zip(&by_srtt))
        .map(|(&(rep, q), (a, b))| {
            format!(
                "report {rep} ms, queue {q} BDP: lost minrtt {}, srtt {}",
                a.1, b.1
            )
        })
        .collect();
    // The rarest feedback with the deepest queue (the last condition in
    // sorted order) is where the two half-lives differ most.
    let rarest = match (conds.last(), by_minrtt.last(), by_srtt.last()) {
        (Some(&(rep, q)), Some(a), Some(b)) => format!(
            "{rep} ms reports with a {q}-BDP queue: {} vs {} lost over the seeds",
            a.1, b.1
        ),
        _ => "no runs".to_string(),
    };
    summary.push(format!("lost_minrtt {lost_minrtt}, lost_srtt {lost_srtt}"));
    Ok(Output {
        name: "aging".into(),
        csv,
        plot: Plot {
            title: "Exponential aging: losses by half-life (sigcomm1999 Fig 12)".into(),
            x_label: "condition (report interval x queue depth, see CSV)".into(),
            y_label: "packets lost (sum over seeds)".into(),
            series: vec![
                Series { label: "half-life = min RTT".into(), points: by_minrtt, style: Style::Line },
                Series { label: "half-life = srtt".into(), points: by_srtt, style: Style::Line },
            ],
        },
        metrics: json!({"lost_minrtt": lost_minrtt, "lost_srtt": lost_srtt, "runs": runs.len()}),
        paper: json!({"claim": "aging with the minimum RTT as half-life loses substantially fewer packets than with the smoothed RTT"}),
        checks: vec![check(
            "lost_minrtt < lost_srtt",
            lost_minrtt as f64,
            "substantially fewer than srtt",
            &format!("< lost_srtt ({lost_srtt})"),
            lost_minrtt < lost_srtt,
        )],
        notes: vec![
            "An always-backlogged ALF sender on the CM; the receiver reports cumulative bytes every 250/500/1000 ms (about 2, 4, 8 RTTs), so the CM runs open-loop between reports. 1 Mbit/s, 60 ms one way, queue 1 or 4 BDP; CBR cross traffic of 0.5 Mbit/s during the middle third.".into(),
            format!("At 250 ms reports only one aging step happens between reports and both half-lives behave identically; the difference appears with rarer feedback ({rarest}). Over the whole sweep the minimum-RTT advantage is a few percent, while the srtt mode also sends (and delivers) more."),
            "No ns-2 referee: both halves of this figure are the CM (an ALF sender aged by minimum RTT or by srtt), which has no ns-2 counterpart, and the only other traffic is CBR. What the paper's \"substantially fewer\" depends on is shown by the sweep itself: the two half-lives differ only when srtt grows well above the minimum RTT (a queue of several BDPs) and the sender runs open-loop for several RTTs (reports every 1000 ms), the mechanism §4.4 describes; with a 1-BDP queue or frequent reports they lose the same. The paper states neither its queue nor its probe interval for Fig 12, so the gap over the whole sweep (a few percent) is attributed to those settings, not closed.".into(),
        ],
        summary,
    })
}
