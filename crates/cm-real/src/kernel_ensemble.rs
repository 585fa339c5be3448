//! `kernel-ensemble` — four downloads by unmodified programs whose kernel
//! TCP connections use the `cm` congestion control (`cmd --kernel-tcp`),
//! against one outside Linux Reno flow on 10 Mbit/s, 60 ms RTT; and the
//! same with all five on Reno (sigcomm1999 §1/§5.1, with the kernel's TCP
//! instead of TCP/CM).
//!
//! The server is Debian's `python3 -m http.server` in the sender's
//! namespace, whose default congestion control is set to `cm` (set A) or
//! `reno` (set B) by `sysctl net.ipv4.tcp_congestion_control`; the clients
//! are `curl` in the receiver's namespace. The outside flow is a cm-ttcp
//! Linux Reno transfer on the same path. Every transfer runs for the same
//! time; rates are each transfer's bytes over its duration.

use std::time::Duration;

use crate::RealOpts;
use crate::ensemble_sets::{Rates, mean_jain, mean_share, scatter, table};
use crate::error::Result;
use crate::harness::Job;
use crate::kernel_rig::{KernelRig, parse_curl};
use cm_experiments::experiments::{Check, Output};
use cm_experiments::plot::Plot;
use cm_experiments::progress::Progress;
use cm_netem::PathConfig;
use cm_ttcp::Transport;
use serde_json::json;

/// Inner downloads per set.
const INNER: usize = 4;

/// A run's rates, and for set A what `cm stat` showed in the middle of it:
/// (macroflows with kernel flows, kernel flows).
type SetResult = (Rates, Option<(usize, usize)>);

fn run_set(k: &KernelRig, cc: &str, secs: f64, stat: bool) -> Result<SetResult> {
    k.set_server_cc(cc)?;
    let curls = (0..INNER)
        .map(|_| k.curl("big", secs))
        .collect::<Result<Vec<_>>>()?;
    // The stat snapshot, half-way, from another thread.
    let snap = stat.then(|| {
        let s = k.socket().to_path_buf();
        std::thread::spawn(move || -> Option<(usize, usize)> {
            std::thread::sleep(Duration::from_secs_f64(secs / 2.0));
            let st = libcm::Cm::connect(&s).ok()?.stat().ok()?;
            let kernel: Vec<_> = st.flows.iter().filter(|f| f.kernel.is_some()).collect();
            let mut mfs: Vec<u64> = kernel.iter().map(|f| f.macroflow).collect();
            mfs.sort_unstable();
            mfs.dedup();
            Some((mfs.len(), kernel.len()))
        })
    });
    let limit = Duration::from_secs_f64(secs);
    let bytes = 10_000_000 / 8 * (secs as u64 + 1);
    let job = Job::now(bytes, Transport::linux("reno")).for_at_most(limit);
    let r = k.rig().run(&[job], None)?;
    let outside = r.first().map_or(0.0, |s| {
        s.bytes as f64 * 8.0 / (s.end_s - s.start_s).max(1e-3)
    });
    let mut inner = Vec::new();
    for c in curls {
        let (b, t) = parse_curl(&c.output(limit + Duration::from_secs(10))?)?;
        inner.push(b * 8.0 / t);
    }
    let seen = snap.and_then(|h| h.join().ok().flatten());
    Ok((Rates { inner, outside }, seen))
}

/// Runs set A (`cm`) and set B (Reno), alternating `reps` times.
pub fn run(opts: &RealOpts) -> Result<Output> {
    let secs = if opts.quick { 30.0 } else { 60.0 };
    // Three runs in the quick version too: over one 30 s run, five Reno
    // flows left the outside one anywhere from 0.15 to 0.28 of the link.
    let reps = 3;
    // 10 Mbit/s, 30 ms each way, one BDP of queue; a sparse 1 GiB file.
    let k = KernelRig::start(PathConfig::default(), &[("big", 1 << 30)])?;
    let bar = Progress::new("kernel-ensemble", 2 * reps, opts.quiet);
    let mut cm_sets = Vec::new();
    let mut reno_sets = Vec::new();
    for _ in 0..reps {
        cm_sets.push(run_set(&k, cm_kernel::NAME, secs, true)?);
        bar.tick();
        reno_sets.push(run_set(&k, "reno", secs, false)?);
        bar.tick();
    }
    k.finish()?;
    let seen = cm_sets.iter().filter_map(|s| s.1).collect::<Vec<_>>();
    let cm_sets: Vec<Rates> = cm_sets.into_iter().map(|s| s.0).collect();
    let reno_sets: Vec<Rates> = reno_sets.into_iter().map(|s| s.0).collect();
    let (share_cm, share_reno) = (mean_share(&cm_sets), mean_share(&reno_sets));
    let (jain_cm, jain_reno) = (mean_jain(&cm_sets), mean_jain(&reno_sets));
    // The macroflow's worst run: one TCP would leave the outside flow
    // half the link; a macroflow held under half of that share, starved.
    let worst_cm = cm_sets.iter().map(Rates::outside_share).fold(0.0, f64::max);
    let (csv, mut summary) = table(&[("cm", &cm_sets), ("reno", &reno_sets)], "inner", "curl");
    summary.push(format!(
        "outside_share_cm {share_cm:.2}, outside_share_reno {share_reno:.2}, jain_cm {jain_cm:.3}, jain_reno {jain_reno:.3}; cm stat mid-run (macroflows, kernel flows): {seen:?}"
    ));
    let series = scatter(&[
        (
            &cm_sets,
            "4 downloads on cm, together",
            "outside Reno beside cm",
        ),
        (
            &reno_sets,
            "4 downloads on Reno, together",
            "outside Reno beside Reno",
        ),
    ]);
    let one_macroflow = !seen.is_empty() && seen.iter().all(|&(m, k)| m == 1 && k == INNER);
    Ok(Output {
        name: "kernel-ensemble".into(),
        csv,
        plot: Plot {
            title: "4 curl downloads (kernel TCP, cm or Reno) vs 1 outside Reno, 10 Mbit/s, 60 ms".into(),
            x_label: "run".into(),
            y_label: "throughput (Mbit/s)".into(),
            series,
        },
        metrics: json!({
            "outside_share_cm": share_cm,
            "outside_share_reno": share_reno,
            "worst_outside_share_cm": worst_cm,
            "jain_cm": jain_cm,
            "jain_reno": jain_reno,
            "stat_macroflows_kernel_flows": seen,
            "seconds": secs,
            "runs": reps,
        }),
        paper: json!({"outside_share_cm": 0.5, "outside_share_reno": 0.2,
                      "claim": "a macroflow of many connections competes like one TCP (sigcomm1999 §1, §5.1)"}),
        checks: vec![
            Check {
                metric: "outside_share_cm".into(),
                ours: share_cm,
                paper: "≈ 0.5".into(),
                accept: ">= 0.40".into(),
                pass: share_cm >= 0.40,
            },
            Check {
                metric: "worst_outside_share_cm".into(),
                ours: worst_cm,
                paper: "≈ 0.5".into(),
                accept: "<= 0.75 in every run".into(),
                pass: worst_cm <= 0.75,
            },
            Check {
                metric: "outside_share_reno".into(),
                ours: share_reno,
                paper: "≈ 0.2".into(),
                accept: "<= 0.25".into(),
                pass: share_reno <= 0.25,
            },
            Check {
                metric: "jain_cm".into(),
                ours: jain_cm,
                paper: "1.0".into(),
                accept: ">= 0.98".into(),
                pass: jain_cm >= 0.98,
            },
            Check {
                metric: "one_macroflow".into(),
                ours: f64::from(u8::from(one_macroflow)),
                paper: "1".into(),
                accept: "cm stat shows the 4 connections in 1 macroflow".into(),
                pass: one_macroflow,
            },
        ],
        notes: vec![
            format!("Path: 10 Mbit/s tbf, 30 ms each way, queue one BDP, SACK on. Each set runs {secs:.0} s; {reps} run(s) per set, alternating; means reported. Rates are bytes over each transfer's whole time."),
            "The 4 downloads are Debian's curl fetching from `python3 -m http.server`, neither modified: the server's namespace default congestion control is `cm` (set A) or `reno` (set B). `cmd --kernel-tcp` runs in the host namespace; the BPF congestion control is global, so the server's connections report to it from their namespace.".into(),
        ],
        summary,
    })
}
