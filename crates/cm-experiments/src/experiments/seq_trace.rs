//! `seq-trace` — sigcomm1999 §4.1, Fig 5: the sequence trace (sequence
//! number of each data segment against its send time) of a TCP/CM transfer
//! and of a NewReno transfer, each with web-like background traffic. The
//! paper's point: the two traces look alike (slow start, then additive
//! increase with halvings on loss).

use std::fmt::Write as _;

use serde_json::json;

use super::{ExperimentError, Opts, Output, base, check, progress};
use crate::plot::{Plot, Series, Style};
use crate::progress::par_map;
use crate::run::run_traced;
use crate::scenario::{FlowSpec, Transport};

/// A sequence trace, goodput (bit/s) and retransmit count.
type TraceRun = (Vec<(f64, f64)>, f64, u64);

fn one(t: Transport, secs: f64) -> Result<TraceRun, ExperimentError> {
    let mut s = base("seq-trace", 1_000_000, 60.0, secs, 1);
    let mut f = FlowSpec::new("test", t);
    f.host = Some("sender".into());
    f.trace = true;
    s.flows.push(f);
    let mut w = FlowSpec::new("web", Transport::Web);
    w.host = Some("websrv".into());
    w.dst = Some("webclient".into());
    w.think_s = Some(0.4);
    s.flows.push(w);
    let (r, traces) = run_traced(&s)?;
    let pts = traces
        .first()
        .and_then(|t| t.conns.first())
        .map(|c| c.seq.iter().map(|p| (p.t, p.v)).collect())
        .unwrap_or_default();
    Ok((pts, r.flows[0].goodput_bps, r.flows[0].retransmits))
}

/// Runs both transfers.
pub fn run(opts: &Opts) -> Result<Output, ExperimentError> {
    let secs = if opts.quick { 5.0 } else { 10.0 };
    let jobs = [Transport::Tcpcm, Transport::Newreno];
    let bar = progress("seq-trace", jobs.len(), opts);
    let res = par_map(&jobs, opts.threads, &bar, |&t| one(t, secs));
    let mut csv = String::from("transport,time_s,seq_bytes\n");
    let mut series = Vec::new();
    let mut goodput = Vec::new();
    let mut summary = Vec::new();
    for (&t, r) in jobs.iter().zip(res) {
        let (pts, g, rx) = r?;
        for (x, y) in &pts {
            let _ = writeln!(csv, "{t:?},{x:.6},{y:.0}");
        }
        summary.push(format!(
            "{t:?}: {} segments sent, goodput {:.0} kbit/s, {rx} retransmits",
            pts.len(),
            g / 1e3
        ));
        goodput.push(g);
        series.push(Series {
            label: if t == Transport::Tcpcm {
                "TCP/CM".into()
            } else {
                "NewReno".into()
            },
            points: pts,
            style: Style::Scatter,
        });
    }
    let ratio = goodput
        .first()
        .zip(goodput.get(1))
        .map_or(f64::NAN, |(a, b)| a / b);
    summary.push(format!("goodput ratio tcpcm/newreno {ratio:.2}"));
    Ok(Output {
        name: "seq-trace".into(),
        csv,
        plot: Plot {
            title: "Sequence traces with web background (sigcomm1999 Fig 5)".into(),
            x_label: "time (s)".into(),
            y_label: "sequence number (bytes)".into(),
            series,
        },
        metrics: json!({"tcpcm_goodput_bps": goodput.first(), "newreno_goodput_bps": goodput.get(1),
                        "goodput_ratio": ratio}),
        paper: json!({"claim": "TCP/CM and TCP NewReno sequence traces are similar (Fig 5)"}),
        checks: vec![check(
            "goodput_ratio",
            ratio,
            "≈ 1 (traces alike)",
            "[0.8, 1.25]",
            (0.8..=1.25).contains(&ratio),
        )],
        notes: vec![
            "CM macroflows start from a 2 MSS initial window, like NewReno (cm-core defaults to 10 MSS; see Scenario::cm_initial_window); the CM also paces its sends (shaper) where NewReno sends ACK-clocked bursts.".into(),format!(
            "1 Mbit/s, 60 ms one-way, queue = BDP, {secs} s, one web-like source (12 KB mean, 0.4 s think) from another host; each transfer runs alone with the background, seed 1."
        )],
        summary,
    })
}
