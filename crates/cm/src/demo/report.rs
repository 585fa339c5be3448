//! Status lines while the demo runs, and the closing summary.

use std::time::Duration as StdDuration;

use anyhow::Result;
use cm_report::fmt;
use cm_report::stats::jain;
use serde::Serialize;

use super::sender::{App, Sender};

pub fn header(json: bool) {
    let line = format!(
        "{:>6}  {:<16} {:>5} {:>9} {:>13} {:>9} {:>9} {:>6} {:>10}",
        "time", "macroflow", "flows", "window", "rate", "srtt", "rttvar", "loss", "in-flight"
    );
    if json {
        eprintln!("{line}")
    } else {
        println!("{line}")
    }
}

/// One line per macroflow with its window, rate, srtt, loss and in-flight
/// bytes (`cm_stat` of the embedded CM).
pub fn status(s: &mut Sender, now: StdDuration, json: bool) {
    let Ok(stat) = s.cm.stat() else {
        return;
    };
    let mut mfs = stat.macroflows;
    mfs.sort_by_key(|m| m.id);
    for m in mfs {
        let dst = m.dst.map_or_else(|| m.id.to_string(), |d| d.to_string());
        let e = m.estimate;
        let line = format!(
            "{:>5.1}s  {:<16} {:>5} {:>9} {:>13} {:>9} {:>9} {:>6} {:>10}",
            now.as_secs_f64(),
            dst,
            m.flows,
            fmt::bytes(m.window),
            if e.rate < 0 {
                "-".into()
            } else {
                fmt::byte_rate(e.rate as f64)
            },
            u64::try_from(e.srtt_us).map_or_else(|_| "-".into(), fmt::micros),
            u64::try_from(e.rttvar_us).map_or_else(|_| "-".into(), fmt::micros),
            fmt::percent(e.loss.max(0.0)),
            fmt::bytes(m.in_flight),
        );
        if json {
            eprintln!("{line}")
        } else {
            println!("{line}")
        }
    }
}

#[derive(Serialize)]
struct FlowOut {
    flow: usize,
    dst: String,
    /// Goodput over the whole run since the flow started, bit/s.
    goodput_bps: f64,
    /// Goodput over the measurement window (second half), bit/s.
    window_goodput_bps: f64,
    acked_bytes: u64,
    lost_bytes: u64,
}

#[derive(Serialize)]
struct MacroflowOut {
    dst: String,
    flows: usize,
    aggregate_bps: f64,
    jain: f64,
}

#[derive(Serialize)]
struct Summary {
    measured_seconds: f64,
    bottleneck_drops: u64,
    flows: Vec<FlowOut>,
    macroflows: Vec<MacroflowOut>,
}

/// Per-flow goodput and fairness among the flows that share a macroflow,
/// over the measurement window.
pub fn summary(
    apps: &[App],
    elapsed: StdDuration,
    measured: StdDuration,
    drops: u64,
    json: bool,
) -> Result<()> {
    let end = elapsed.as_secs_f64();
    let secs = measured.as_secs_f64().max(1e-6);
    let flows: Vec<FlowOut> = {
        apps.iter()
            .enumerate()
            .map(|(i, a)| {
                let active = (end - a.start.as_secs_f64()).max(1e-6);
                FlowOut {
                    flow: i,
                    dst: a.dst.ip().to_string(),
                    goodput_bps: a.acked as f64 * 8.0 / active,
                    window_goodput_bps: (a.acked - a.acked_at_mark) as f64 * 8.0 / secs,
                    acked_bytes: a.acked,
                    lost_bytes: a.lost,
                }
            })
            .collect()
    };
    // Destinations in first-seen order, each once.
    let mut dsts: Vec<String> = Vec::new();
    for f in &flows {
        if !dsts.contains(&f.dst) {
            dsts.push(f.dst.clone());
        }
    }
    let macroflows = dsts
        .into_iter()
        .map(|d| {
            let rates: Vec<f64> = flows
                .iter()
                .filter(|f| f.dst == d)
                .map(|f| f.window_goodput_bps)
                .collect();
            MacroflowOut {
                flows: rates.len(),
                aggregate_bps: rates.iter().sum(),
                jain: jain(&rates),
                dst: d,
            }
        })
        .collect();
    let out = Summary {
        measured_seconds: secs,
        bottleneck_drops: drops,
        flows,
        macroflows,
    };
    if json {
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    println!("\nper-flow goodput over the last {secs:.1} s (all flows active):");
    for f in &out.flows {
        println!(
            "  flow {:<2} -> {:<10} {:>8.2} Mbit/s  ({} acked, {} lost)",
            f.flow,
            f.dst,
            f.window_goodput_bps / 1e6,
            fmt::bytes(f.acked_bytes),
            fmt::bytes(f.lost_bytes)
        );
    }
    for m in &out.macroflows {
        println!(
            "macroflow {:<10} {} flow(s): {:.2} Mbit/s together, Jain fairness {:.3}",
            m.dst,
            m.flows,
            m.aggregate_bps / 1e6,
            m.jain
        );
    }
    println!("bottleneck drops: {}", out.bottleneck_drops);
    Ok(())
}
