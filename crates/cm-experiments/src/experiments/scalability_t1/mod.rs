//! `scalability-t1` — iscc §VI-C, Fig 6: packet loss `p_n` and the
//! packet-loss increase factor `s_n = p_n / p_2` of AIMD(1,½), IIAD(½,2),
//! TFRC and ISCC(2) as `n` = 2…50 NACK-based streaming flows of one scheme
//! share a T1 (1,544 kbit/s), RTTs spread over 50–200 ms.
//!
//! Each flow is a CM host running the scheme as its macroflow's controller
//! (cm-core's rate-based `OpenLoop`, or TFRC), sending 1,500-byte packets
//! in bunches of 3 paced at the controller's rate; its receiver reports
//! once per RTT (NACK-style: what arrived and what did not) and returns its
//! packet-bunch capacity samples, which the sender's CM filters into the
//! macroflow's capacity estimate for ISCC (iscc §VI-B). Flows start 1.5 s
//! apart; loss is counted at the bottleneck from 5 s after the last flow
//! left slow start until the flows end.

pub mod simulation;

use std::fmt::Write as _;

use serde_json::json;

use super::{ExperimentError, Opts, Output, check, progress};
use crate::plot::{Plot, Series, Style};
use crate::progress::par_map;
use simulation::{Scheme, T1Params, T1Run};

/// The paper's p_2 and p_50 (iscc §VI-C).
const PAPER: [(Scheme, f64, f64); 4] = [
    (Scheme::Aimd, 0.0038, 0.22),
    (Scheme::Iiad, 0.0029, 0.45),
    (Scheme::Tfrc, 0.0026, 0.20),
    (Scheme::Iscc, 0.0057, 0.031),
];

/// Bottleneck queue in packets: a Cisco serial interface's default output
/// hold queue (40 packets).
pub const QUEUE_PACKETS: u32 = 40;

/// The runs of a sweep.
pub fn jobs(quick: bool) -> Vec<T1Params> {
    let (ns, after): (Vec<usize>, f64) = if quick {
        (vec![2, 8, 32], 90.0)
    } else {
        (vec![2, 4, 8, 16, 32, 50], 400.0)
    };
    let mut v = Vec::new();
    for (scheme, _, _) in PAPER {
        for &n in &ns {
            v.push(T1Params {
                scheme,
                n,
                stagger_s: 1.5,
                after_last_s: after,
                queue_packets: QUEUE_PACKETS,
                seed: 1,
            });
        }
    }
    v
}

/// Runs the sweep.
pub fn run(opts: &Opts) -> Result<Output, ExperimentError> {
    let jobs = jobs(opts.quick);
    let bar = progress("scalability-t1", jobs.len(), opts);
    let results = par_map(&jobs, opts.threads, &bar, simulation::run);
    let runs: Vec<T1Run> = results
        .into_iter()
        .collect::<Result<_, _>>()
        .map_err(|e| ExperimentError::Setup(e.to_string()))?;
    let mut csv = String::from(
        "scheme,n,loss,s_n,from_s,to_s,packets,utilization,min_rate_bps,max_rate_bps\n",
    );
    let mut series = Vec::new();
    let mut summary = Vec::new();
    let mut metrics = serde_json::Map::new();
    let n_max = runs.iter().map(|r| r.params.n).max().unwrap_or(0);
    let mut p_max = Vec::new();
    for (scheme, paper_p2, paper_p50) in PAPER {
        let mine: Vec<&T1Run> = runs.iter().filter(|r| r.params.scheme == scheme).collect();
        let p2 = mine
            .iter()
            .find(|r| r.params.n == 2)
            .map_or(0.0, |r| r.loss);
        let mut pts = Vec::new();
        for r in &mine {
            let sn = if p2 > 0.0 { r.loss / p2 } else { 0.0 };
            let lo = r.rates_bps.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = r.rates_bps.iter().copied().fold(0.0, f64::max);
            let _ = writeln!(
                csv,
                "{},{},{:.6},{:.3},{},{},{},{:.4},{:.0},{:.0}",
                scheme.label(),
                r.params.n,
                r.loss,
                sn,
                r.from_s,
                r.to_s,
                r.packets,
                r.utilization,
                lo,
                hi
            );
            pts.push((r.params.n as f64, sn, r.loss));
        }
        let last = mine
            .iter()
            .find(|r| r.params.n == n_max)
            .map_or(0.0, |r| r.loss);
        let s_worst = pts.iter().map(|p| p.1).fold(0.0, f64::max);
        summary.push(format!(
            "{:<8} p_2 {:.4}  p_{} {:.4}  s_{} {:.1}  (paper p_2 {:.4}, p_50 {:.3})",
            scheme.label(),
            p2,
            n_max,
            last,
            n_max,
            if p2 > 0.0 { last / p2 } else { 0.0 },
            paper_p2,
            paper_p50
        ));
        metrics.insert(
            scheme.label().to_string(),
            json!({"p_2": p2, "p_max": last, "n_max": n_max, "s_max": s_worst,
                   "points": pts.iter().map(|p| json!({"n": p.0, "s_n": p.1, "loss": p.2})).collect::<Vec<_>>()}),
        );
        p_max.push((scheme, last, s_worst, paper_p50));
        series.push(Series {
            label: scheme.label().into(),
            points: pts.iter().map(|p| (p.0, p.1)).collect(),
            style: Style::Line,
        });
    }
    let get = |s: Scheme| {
        p_max
            .iter()
            .find(|p| p.0 == s)
            .copied()
            .unwrap_or((s, 0.0, 0.0, 0.0))
    };
    let (_, aimd, _, _) = get(Scheme::Aimd);
    let (_, iiad, _, _) = get(Scheme::Iiad);
    let (_, tfrc, _, _) = get(Scheme::Tfrc);
    let (_, iscc, iscc_s, _) = get(Scheme::Iscc);
    let mut checks = vec![
        check(
            "ISCC p_max / min(AIMD, TFRC)",
            if aimd.min(tfrc) > 0.0 {
                iscc / aimd.min(tfrc)
            } else {
                f64::NAN
            },
            "3.1% vs 22%, 20%",
            "< 0.25",
            iscc < 0.25 * aimd.min(tfrc),
        ),
        check(
            "IIAD p_max is the worst",
            iiad,
            "45%",
            "> AIMD, TFRC, ISCC",
            iiad > aimd && iiad > tfrc && iiad > iscc,
        ),
        check(
            "ISCC s_max",
            iscc_s,
            "n^0.47 (5.4 at 50)",
            "<= 3",
            iscc_s <= 3.0,
        ),
    ];
    if !opts.quick {
        for (s, ours, _, paper) in &p_max {
            let ok = *ours > 0.0 && ours / paper <= 2.0 && paper / ours <= 2.0;
            checks.push(check(
                &format!("{} p_50", s.label()),
                *ours,
                &format!("{paper}"),
                "within 2x",
                ok,
            ));
        }
    }
    Ok(Output {
        name: "scalability-t1".into(),
        csv,
        plot: Plot {
            title: "Packet-loss increase factor s_n = p_n / p_2 on a T1 (iscc Fig 6)".into(),
            x_label: "flows n".into(),
            y_label: "s_n".into(),
            series,
        },
        metrics: serde_json::Value::Object(metrics),
        paper: json!({"AIMD": {"p_2": 0.0038, "p_50": 0.22}, "IIAD": {"p_2": 0.0029, "p_50": 0.45},
                      "TFRC": {"p_2": 0.0026, "p_50": 0.20}, "ISCC(2)": {"p_2": 0.0057, "p_50": 0.031},
                      "ISCC_fit": "n^0.47"}),
        checks,
        notes: vec![
            "Status: this simulation does not reproduce Fig 6 yet. Its losses are far above the paper's at every n (AIMD p_2 ≈ 5% against 0.38%), TFRC with 180-byte packets in its equation nearly never overflows the 40-packet queue, and ISCC's loss grows with n. Which part of the setup (queue size, report timing, the persistent-congestion restarts after CC-UDP's retransmission timeout, burst pacing, or the capacity estimate reaching ISCC) makes the difference is not established; the checks below stay failing until it is.".into(),
            "The paper's run is a Cisco testbed (two T1 routers, WRED and WFQ off); here a simulated dumbbell: a 1,544 kbit/s bottleneck with a 40-packet DropTail queue (a Cisco serial interface's default output hold queue), 100 Mbit/s access links, flow RTTs drawn uniformly from 50–200 ms, every flow from its own CM host.".into(),
            "Parameters as in iscc §VI-C: AIMD(1,½) with MTU/RTT fixed at 30 kbit/s, IIAD (k=1, l=0) with (α, β) = (½, 2) and MTU/RTT 50 kbit/s, TFRC with 180-byte packets in its equation while sending 1,500-byte packets, ISCC(2) with m_D = 2, m_I = 20 and C from packet bunches (3-packet bursts, the receiver's samples filtered per macroflow by cm-core's CapacityFilter); ISCC runs its AIMD fallback until the first estimate.".into(),
            "Loss is dropped/arrived packets at the bottleneck from 5 s after the last flow left slow start (as its CM reports) until the flows end; flows start 1.5 s apart (iscc §VI-C footnote 10).".into(),
        ],
        summary,
    })
}
