//! `kernel-sharing` — cm-implementation-linux §4.3, Fig 7 with unmodified
//! programs: `curl` retrieves a 128 KB object from `python3 -m
//! http.server` nine times, 500 ms apart, each on a fresh kernel TCP
//! connection, over an 80 ms RTT path. With Reno every connection
//! slow-starts from the kernel's initial window; with `cm` (`cmd
//! --kernel-tcp`) each starts from its share of the destination's
//! macroflow window, which the earlier connections' ACKs opened, so
//! retrievals 2–9 finish sooner (paper: ≈ 40% faster).

use std::fmt::Write as _;
use std::time::Duration;

use crate::RealOpts;
use crate::error::Result;
use crate::kernel_rig::{KernelRig, parse_curl};
use crate::sharing::{COUNT, OBJECT};
use cm_experiments::experiments::sharing::request_series;
use cm_experiments::experiments::{Check, Output};
use cm_experiments::plot::Plot;
use cm_experiments::progress::Progress;
use cm_netem::PathConfig;
use cm_report::stats::mean;
use serde_json::json;

/// The nine retrievals' times (curl's `time_total`: connect to last byte).
fn retrievals(k: &KernelRig, cc: &str) -> Result<Vec<f64>> {
    k.set_server_cc(cc)?;
    let t0 = std::time::Instant::now();
    let mut times = Vec::with_capacity(COUNT);
    for i in 0..COUNT {
        let at = Duration::from_millis(500 * i as u64);
        if let Some(wait) = at.checked_sub(t0.elapsed()) {
            std::thread::sleep(wait);
        }
        let (bytes, secs) = parse_curl(&k.curl("object", 20.0)?.output(Duration::from_secs(30))?)?;
        if bytes as u64 != OBJECT {
            return Err(crate::error::RealError::Program(format!(
                "curl fetched {bytes} of {OBJECT} bytes"
            )));
        }
        times.push(secs);
    }
    Ok(times)
}

/// Runs both variants `reps` times, alternating.
pub fn run(opts: &RealOpts) -> Result<Output> {
    let reps = if opts.quick { 2 } else { 5 };
    let cfg = PathConfig {
        rate_bps: 100_000_000,
        one_way_delay: Duration::from_millis(40),
        ..PathConfig::default()
    };
    let k = KernelRig::start(cfg, &[("object", OBJECT)])?;
    // The kernel's cached per-destination metrics (ssthresh, RTT) would
    // carry Reno's history between its connections too: off, so that each
    // Reno connection is fresh and only the macroflow remembers.
    k.rig()
        .path()
        .sysctl(cm_netem::Node::Sender, "net.ipv4.tcp_no_metrics_save", "1")?;
    let bar = Progress::new("kernel-sharing", 2 * reps, opts.quiet);
    let (mut reno, mut cm) = (vec![Vec::new(); COUNT], vec![Vec::new(); COUNT]);
    for _ in 0..reps {
        for (i, t) in retrievals(&k, "reno")?.into_iter().enumerate() {
            reno[i].push(t);
        }
        bar.tick();
        for (i, t) in retrievals(&k, cm_kernel::NAME)?.into_iter().enumerate() {
            cm[i].push(t);
        }
        bar.tick();
    }
    k.finish()?;
    let reno: Vec<f64> = reno.iter().map(|v| mean(v)).collect();
    let cm: Vec<f64> = cm.iter().map(|v| mean(v)).collect();
    let later = 1.0 - mean(&cm[1..]) / mean(&reno[1..]);
    let first = 1.0 - cm[0] / reno[0];
    let mut csv = String::from("request,reno_s,cm_s\n");
    let mut summary = Vec::new();
    for i in 0..COUNT {
        let _ = writeln!(csv, "{},{:.4},{:.4}", i + 1, reno[i], cm[i]);
        summary.push(format!(
            "request {}: reno {:.3} s, cm {:.3} s",
            i + 1,
            reno[i],
            cm[i]
        ));
    }
    summary.push(format!("later_improvement {later:.2}, first {first:.2}"));
    Ok(Output {
        name: "kernel-sharing".into(),
        csv,
        plot: Plot {
            title: "9 curl retrievals of 128 KB, 500 ms apart, 80 ms RTT: kernel TCP with cm vs Reno".into(),
            x_label: "request".into(),
            y_label: "transfer time (s)".into(),
            series: vec![
                request_series(&reno, "Reno (fresh connections)"),
                request_series(&cm, "cm (cmd --kernel-tcp)"),
            ],
        },
        metrics: json!({"later_improvement": later, "first_improvement": first,
                        "reno_s": reno, "cm_s": cm, "repetitions": reps}),
        paper: json!({"later_improvement": 0.40,
                      "claim": "requests after the first complete ≈40% faster with the CM"}),
        checks: vec![Check {
            metric: "later_improvement".into(),
            ours: later,
            paper: "≈ 0.40".into(),
            accept: ">= 0.30".into(),
            pass: later >= 0.30,
        }],
        notes: vec![
            format!("Path: 100 Mbit/s tbf, 40 ms each way (80 ms RTT), queue one BDP; {reps} run(s) of 9 retrievals per congestion control, alternating; mean per request."),
            "Debian's curl and python3 -m http.server, unmodified; the server's namespace default congestion control is reno or cm, and net.ipv4.tcp_no_metrics_save=1 there so that Reno's connections are fresh. Time: curl's time_total (connect to the last byte).".into(),
            "The macroflow outlives a round: from the second round on, request 1 of the cm round also starts from the window the previous round left (first_improvement), as a CM host's next visit to a server would.".into(),
        ],
        summary,
    })
}
