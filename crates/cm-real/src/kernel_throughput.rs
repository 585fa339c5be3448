//! `kernel-throughput` — cm-implementation-linux §4.1 with the kernel's
//! TCP: one long `curl` download from `python3 -m http.server` on a
//! 100 Mbit/s, 10 ms RTT path whose queue (250 KB, twice the BDP)
//! overflows, with the server's connections on `cm` (`cmd --kernel-tcp`)
//! and on Reno. The claim: putting a connection's congestion control in
//! the CM costs no throughput; and what the daemon's part costs, as its CPU
//! time per MB moved.

use std::fmt::Write as _;
use std::time::Duration;

use crate::RealOpts;
use crate::error::Result;
use crate::kernel_rig::{KernelRig, parse_curl};
use cm_experiments::experiments::{Check, Output};
use cm_experiments::plot::{Plot, Series, Style};
use cm_experiments::progress::Progress;
use cm_netem::{PathConfig, Queue};
use cm_report::stats::mean;
use serde_json::json;

/// Runs both congestion controls `reps` times, alternating.
pub fn run(opts: &RealOpts) -> Result<Output> {
    let (secs, reps) = if opts.quick { (15.0, 1) } else { (40.0, 3) };
    let cfg = PathConfig {
        rate_bps: 100_000_000,
        one_way_delay: Duration::from_millis(5),
        queue: Queue::Bytes(250_000),
        ..PathConfig::default()
    };
    let k = KernelRig::start(cfg, &[("big", 1 << 32)])?;
    let bar = Progress::new("kernel-throughput", 2 * reps, opts.quiet);
    let (mut cm, mut reno, mut cpu_per_mb) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..reps {
        for cc in ["reno", cm_kernel::NAME] {
            k.set_server_cc(cc)?;
            let before = k.daemon_cpu();
            let (bytes, t) = parse_curl(
                &k.curl("big", secs)?
                    .output(Duration::from_secs_f64(secs + 10.0))?,
            )?;
            let rate = bytes * 8.0 / t;
            if cc == "reno" {
                reno.push(rate);
            } else {
                cm.push(rate);
                if let (Some(a), Some(b)) = (before, k.daemon_cpu()) {
                    cpu_per_mb.push((b - a).as_secs_f64() * 1e6 / (bytes / 1e6).max(1e-9));
                }
            }
            bar.tick();
        }
    }
    k.finish()?;
    let ratio = mean(&cm) / mean(&reno);
    let cpu = (!cpu_per_mb.is_empty()).then(|| mean(&cpu_per_mb));
    let mut csv = String::from("run,reno_bps,cm_bps,daemon_cpu_us_per_mb\n");
    for i in 0..reps {
        let c = cpu_per_mb
            .get(i)
            .map_or(String::new(), |c| format!("{c:.1}"));
        let _ = writeln!(csv, "{},{:.0},{:.0},{c}", i + 1, reno[i], cm[i]);
    }
    let summary = vec![format!(
        "reno {:.2} Mbit/s, cm {:.2} Mbit/s, ratio {ratio:.3}; the daemon's CPU {} µs per MB",
        mean(&reno) / 1e6,
        mean(&cm) / 1e6,
        cpu.map_or("-".into(), |c| format!("{c:.1}"))
    )];
    let points = |v: &[f64]| {
        v.iter()
            .enumerate()
            .map(|(i, r)| ((i + 1) as f64, r / 1e6))
            .collect()
    };
    Ok(Output {
        name: "kernel-throughput".into(),
        csv,
        plot: Plot {
            title: "One long curl download, 100 Mbit/s, 10 ms RTT: kernel TCP with cm vs Reno".into(),
            x_label: "run".into(),
            y_label: "throughput (Mbit/s)".into(),
            series: vec![
                Series { label: "Reno".into(), points: points(&reno), style: Style::Scatter },
                Series { label: "cm (cmd --kernel-tcp)".into(), points: points(&cm), style: Style::Scatter },
            ],
        },
        metrics: json!({"throughput_ratio": ratio, "reno_bps": reno, "cm_bps": cm,
                        "daemon_cpu_us_per_mb": cpu, "seconds": secs, "runs": reps}),
        paper: json!({"throughput_ratio": 1.0,
                      "claim": "the CM costs no throughput on a long transfer (cm-implementation-linux §4.1)"}),
        checks: vec![Check {
            metric: "throughput_ratio".into(),
            ours: ratio,
            paper: "≈ 1".into(),
            accept: ">= 0.95".into(),
            pass: ratio >= 0.95,
        }],
        notes: vec![
            format!("Path: 100 Mbit/s tbf, 5 ms each way, 250 KB queue (twice the BDP, so slow start and congestion avoidance overflow it); one {secs:.0} s curl download per run, {reps} run(s) per congestion control, alternating."),
            "The daemon's CPU: cmd's on-CPU time (/proc/<pid>/schedstat) over the cm download, per MB downloaded. It covers reading the BPF ring buffer, the core's updates and writing the allowances; the BPF programs' own cost is in the kernel's softirq time, not here.".into(),
        ],
        summary,
    })
}
