//! `probe-frequency` — how often the sender CM must probe (sigcomm1999
//! §4.2.1: "every one-half RTT", chosen after "simple experiments that
//! measured loss rate as a function of feedback frequency").
//!
//! A probe-driven CM flow (always-backlogged ALF sender, no application
//! feedback, the CM header on its data) alone on a dumbbell with random
//! loss on the forward bottleneck, probing 0.5, 1, 2, 4 or 8 times per
//! smoothed RTT. Per point: the prober's loss estimate against the true
//! loss of its data (the link's drops), and its throughput against one
//! TCP NewReno flow alone in the same conditions (same dumbbell, queue,
//! random loss and seed), as `tcp-friendly` compares TCP/CM.

use std::fmt::Write as _;

use cm_report::stats::median;
use serde_json::json;

use super::simulation::{ProbeParams, ProbeRun, RenoRun, newreno, run as run_one};
use crate::experiments::{ExperimentError, Opts, Output, check, progress};
use crate::plot::{Plot, Series, Style};
use crate::progress::par_map;

/// Probes per RTT swept.
pub const PROBES_PER_RTT: [f64; 5] = [0.5, 1.0, 2.0, 4.0, 8.0];

/// `(bottleneck bit/s, random loss)` conditions.
fn conditions(quick: bool) -> Vec<(u64, f64)> {
    if quick {
        vec![(10_000_000, 0.01)]
    } else {
        let mut v = Vec::new();
        for bps in [1_500_000, 10_000_000] {
            for loss in [0.005, 0.01, 0.02] {
                v.push((bps, loss));
            }
        }
        v
    }
}

fn params(bps: u64, loss: f64, seed: u64, ppr: f64, secs: u64) -> ProbeParams {
    ProbeParams {
        bottleneck_bps: bps,
        loss,
        probes_per_rtt: ppr,
        seconds: secs,
        ..ProbeParams::new(seed)
    }
}

/// `|estimate - truth| / truth` (0 when both are 0).
fn rel_error(r: &ProbeRun) -> f64 {
    let est = r.estimated_loss.unwrap_or(0.0);
    if r.true_loss > 0.0 {
        (est - r.true_loss).abs() / r.true_loss
    } else if est > 0.0 {
        1.0
    } else {
        0.0
    }
}

/// Runs the sweep.
pub fn run(opts: &Opts) -> Result<Output, ExperimentError> {
    let (seeds, secs) = if opts.quick { (4, 30) } else { (8, 60) };
    let conds = conditions(opts.quick);
    let mut cm_jobs = Vec::new();
    let mut reno_jobs = Vec::new();
    for &(bps, loss) in &conds {
        for seed in 1..=seeds {
            reno_jobs.push(params(bps, loss, seed, 2.0, secs));
            for ppr in PROBES_PER_RTT {
                cm_jobs.push(params(bps, loss, seed, ppr, secs));
            }
        }
    }
    let bar = progress("probe-frequency", cm_jobs.len() + reno_jobs.len(), opts);
    let cm: Vec<ProbeRun> = par_map(&cm_jobs, opts.threads, &bar, |p| run_one(*p))
        .into_iter()
        .collect::<Result<_, _>>()
        .map_err(|e| ExperimentError::Setup(e.to_string()))?;
    let reno: Vec<RenoRun> = par_map(&reno_jobs, opts.threads, &bar, newreno)
        .into_iter()
        .collect::<Result<_, _>>()?;
    let reno_of = |p: &ProbeParams| {
        reno_jobs
            .iter()
            .position(|q| {
                q.bottleneck_bps == p.bottleneck_bps && q.loss == p.loss && q.seed == p.seed
            })
            .map(|i| reno[i])
    };
    let mut csv = String::from(
        "bottleneck_bps,loss,seed,probes_per_rtt,cm_bps,newreno_bps,friendliness,true_loss,estimated_loss,rel_error,newreno_loss,probes,responses,aging_steps,congestion_reports\n",
    );
    for r in &cm {
        let p = &r.params;
        let n = reno_of(p);
        let nb = n.map_or(0.0, |n| n.goodput_bps);
        let _ = writeln!(
            csv,
            "{},{},{},{},{:.0},{:.0},{:.4},{:.5},{:.5},{:.4},{:.5},{},{},{},{}",
            p.bottleneck_bps,
            p.loss,
            p.seed,
            p.probes_per_rtt,
            r.goodput_bps,
            nb,
            if nb > 0.0 { r.goodput_bps / nb } else { 0.0 },
            r.true_loss,
            r.estimated_loss.unwrap_or(0.0),
            rel_error(r),
            n.map_or(0.0, |n| n.loss_rate),
            r.probes,
            r.responses,
            r.aging_steps,
            r.congestion_reports,
        );
    }
    // Medians over seeds per (condition, ppr), and over every condition.
    let stats = |sel: &dyn Fn(&ProbeParams) -> bool| {
        let (mut ratio, mut err, mut cmb, mut nrb) = (vec![], vec![], vec![], vec![]);
        for r in cm.iter().filter(|r| sel(&r.params)) {
            if let Some(n) = reno_of(&r.params).filter(|n| n.goodput_bps > 0.0) {
                ratio.push(r.goodput_bps / n.goodput_bps);
                nrb.push(n.goodput_bps);
            }
            err.push(rel_error(r));
            cmb.push(r.goodput_bps);
        }
        (median(&ratio), median(&err), median(&cmb), median(&nrb))
    };
    let mut summary = Vec::new();
    let mut per_point = Vec::new();
    let mut series = Vec::new();
    for &(bps, loss) in &conds {
        let mut pts = Vec::new();
        for ppr in PROBES_PER_RTT {
            let (ratio, err, cmb, nrb) = stats(&|p: &ProbeParams| {
                p.bottleneck_bps == bps && p.loss == loss && p.probes_per_rtt == ppr
            });
            summary.push(format!(
                "{:>4.1} Mbit/s loss {:.1}% ppr {ppr:>3}: cm {cmb:>8.0} newreno {nrb:>8.0} bit/s friendliness {ratio:.2} | loss rel error {err:.3}",
                bps as f64 / 1e6,
                loss * 100.0
            ));
            per_point.push(
                json!({"bottleneck_bps": bps, "loss": loss, "probes_per_rtt": ppr,
                "friendliness": ratio, "rel_error": err, "cm_bps": cmb, "newreno_bps": nrb}),
            );
            pts.push((ppr, ratio));
        }
        series.push(Series {
            label: format!("{:.1} Mbit/s, {:.1}% loss", bps as f64 / 1e6, loss * 100.0),
            points: pts,
            style: Style::Line,
        });
    }
    let mut by_ppr = Vec::new();
    for ppr in PROBES_PER_RTT {
        let (ratio, err, _, _) = stats(&|p: &ProbeParams| p.probes_per_rtt == ppr);
        by_ppr.push(json!({"probes_per_rtt": ppr, "friendliness": ratio, "rel_error": err}));
        summary.push(format!(
            "all conditions ppr {ppr:>3}: friendliness {ratio:.2}, loss rel error {err:.3}"
        ));
    }
    let (f2, e2, _, _) = stats(&|p: &ProbeParams| p.probes_per_rtt == 2.0);
    series.push(Series {
        label: "loss estimate |rel. error| (all)".into(),
        points: PROBES_PER_RTT
            .iter()
            .map(|&ppr| (ppr, stats(&|p: &ProbeParams| p.probes_per_rtt == ppr).1))
            .collect(),
        style: Style::Scatter,
    });
    let aging_2: u64 = cm
        .iter()
        .filter(|r| r.params.probes_per_rtt == 2.0)
        .map(|r| r.aging_steps)
        .sum();
    let aging_half: u64 = cm
        .iter()
        .filter(|r| r.params.probes_per_rtt == 0.5)
        .map(|r| r.aging_steps)
        .sum();
    let f4 = stats(&|p: &ProbeParams| p.probes_per_rtt == 4.0).0;
    let conds_text = conds
        .iter()
        .map(|&(b, l)| format!("{} Mbit/s with {}% loss", b as f64 / 1e6, l * 100.0))
        .collect::<Vec<_>>()
        .join(", ");
    Ok(Output {
        name: "probe-frequency".into(),
        csv,
        plot: Plot {
            title: "Probe-driven CM: TCP-friendliness and loss-estimate error vs probes per RTT".into(),
            x_label: "probes per smoothed RTT".into(),
            y_label: "CM / NewReno throughput (lines); |rel. error| (dots)".into(),
            series,
        },
        metrics: json!({"friendliness_at_2": f2, "rel_error_at_2": e2, "by_probes_per_rtt": by_ppr,
            "points": per_point, "aging_steps_at_2": aging_2, "aging_steps_at_half": aging_half,
            "runs": cm.len() + reno.len()}),
        paper: json!({"claim": "two probes per RTT suffice (sigcomm1999 §4.2.1); with the CM header the receiver detects losses, which reduces the sensitivity to probe frequency (§4.3)",
            "probes_per_rtt": 2}),
        checks: vec![
            check("rel_error_at_2", e2, "(loss detected from the header's sequence numbers, §4.3)", "≤ 0.10", e2 <= 0.10),
            check("friendliness_at_2", f2, "TCP-friendly (§4.1)", "[0.8, 1.25]", (0.8..=1.25).contains(&f2)),
        ],
        notes: vec![
            format!("One probe-driven CM flow (cm-proto's prober and responder, the CM header on every datagram after the handshake, AIMD with a 2-MSS initial window) alone on the sigcomm1999 dumbbell, 50 ms one way (100 ms RTT), 1-BDP DropTail queue, random loss on the forward bottleneck; conditions: {conds_text}; {seeds} seeds of {secs} s. The application gives no feedback: the CM hears only responses to probes."),
            "Loss estimate: the prober's loss_estimate() (packets the receiver CM declared lost over headed packets sent) against the link's truth for the same packets (dropped / sent of the headed data's flow tag). The receiver declares a gap lost after three later packets and one settling probe interval, so the estimate matches the truth at every probe rate except for losses still settling when the run ends.".into(),
            "TCP-friendliness: the CM flow's distinct delivered payload ×8 / run length, over the goodput of one TCP NewReno flow alone in the same dumbbell, queue, random loss and seed (the scenario runner's NewReno, 1 MB receive window); median of the per-seed ratios. The random loss is the same process, not the same packets: each run draws its own.".into(),
            format!("Batched feedback: a byte is resolved only by the response to the first probe after it, on average half a probe interval later than an ACK would resolve it (a quarter RTT at 2 probes per RTT). Without an allowance a window-limited AIMD flow would get only 1/(1 + 1/2n) of its window per RTT at n probes per RTT. The CM's window check allows for the lag (`CongestionManager::set_feedback_lag`, set from the prober to 500/n thousandths of an RTT, at most one window), so the flow runs at window / RTT as an ACK-clocked one does. What remains below NewReno: loss-recovery episodes last until the bytes sent before the reduction are resolved, again about 1.25 RTT instead of one. More probes shorten the lag (median {f4:.2} at 4 per RTT); fewer leave gaps longer than an RTT between responses, which the CM treats as open loop and ages (§4.4: {aging_half} aging steps over the 0.5-probes runs, {aging_2} at 2)."),
            "A response that resolves nothing new for a flow (no data sent between two probes, which a window-limited flow does when a response frees its window just after a probe left) still reaches `cm_update`, as a zero-byte report: a response closes the open loop whatever it resolves (§4.4 ages only when no response arrives), and its interval carries bytes that arrived late, which the header-less inference counts.".into(),
        ],
        summary,
    })
}
