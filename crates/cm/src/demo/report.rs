//! Status lines while the demo runs, and the closing summary.

use std::time::Duration as StdDuration;

use anyhow::Result;
use cm_core::Instant;
use serde::Serialize;

use super::sender::Sender;

/// Jain's fairness index of `xs` (1 = perfectly equal; 1/n = one takes all).
pub fn jain(xs: &[f64]) -> f64 {
    let sum: f64 = xs.iter().sum();
    let sq: f64 = xs.iter().map(|x| x * x).sum();
    if sq == 0.0 {
        1.0
    } else {
        sum * sum / (xs.len() as f64 * sq)
    }
}

fn kb(b: u64) -> String {
    format!("{:.1}kB", b as f64 / 1e3)
}

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

/// One line per macroflow with its window, rate, srtt, loss and in-flight bytes.
pub fn status(s: &Sender, now: Instant, json: bool) {
    let mut ids = s.cm.macroflow_ids();
    ids.sort();
    for id in ids {
        let Ok(m) = s.cm.macroflow_info(id) else {
            continue;
        };
        let dst = m.key.map_or_else(|| id.to_string(), |k| k.dst.to_string());
        let line = format!(
            "{:>5.1}s  {:<16} {:>5} {:>9} {:>13} {:>9} {:>9} {:>5.1}% {:>10}",
            now.as_micros() as f64 / 1e6,
            dst,
            m.flows.len(),
            kb(m.window.get()),
            m.rate.map_or("-".into(), |r| r.to_string()),
            m.srtt.map_or("-".into(), |d| d.to_string()),
            m.rttvar.map_or("-".into(), |d| d.to_string()),
            m.loss.unwrap_or(0.0) * 100.0,
            kb(m.in_flight.get()),
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
pub fn summary(s: &Sender, measured: StdDuration, drops: u64, json: bool) -> Result<()> {
    let end = s.now();
    let secs = measured.as_secs_f64().max(1e-6);
    let flows: Vec<FlowOut> = s
        .apps
        .iter()
        .enumerate()
        .map(|(i, a)| {
            let active = (end.as_micros() as f64 / 1e6 - a.start.as_secs_f64()).max(1e-6);
            FlowOut {
                flow: i,
                dst: a.dst.ip().to_string(),
                goodput_bps: a.acked as f64 * 8.0 / active,
                window_goodput_bps: (a.acked - a.acked_at_mark) as f64 * 8.0 / secs,
                acked_bytes: a.acked,
                lost_bytes: a.lost,
            }
        })
        .collect();
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
            kb(f.acked_bytes),
            kb(f.lost_bytes)
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

#[cfg(test)]
mod tests {
    use super::jain;

    #[test]
    fn jain_index() {
        assert!((jain(&[1.0, 1.0, 1.0]) - 1.0).abs() < 1e-12);
        assert!((jain(&[1.0, 0.0, 0.0, 0.0]) - 0.25).abs() < 1e-12);
    }
}
