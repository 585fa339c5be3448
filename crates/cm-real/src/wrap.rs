//! `real-wrap` — an unmodified `iperf3 -u -b 50M` next to one Linux TCP
//! flow on a 10 Mbit/s, 60 ms path, first as it is (it takes the link and
//! starves TCP), then under `cm wrap` (transport-selection-middleware
//! §4.3: congestion control forced on an unmodified program; its queue
//! drops what the path cannot carry, instead of the bottleneck).
//!
//! Both programs are Debian's `iperf3`, never modified. The wrapped one
//! runs with `LD_PRELOAD=libcm_wrap.so` (what `cm wrap` sets); the
//! receiving namespace runs the counting receiver CM
//! ([`cm_force::Receiver`]) for its feedback. Rates are measured at the
//! receiving `iperf3` servers (their JSON intervals), over the seconds in
//! which both flows run, past a warm-up.

use std::fmt::Write as _;
use std::path::{Path as FsPath, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use cm_experiments::experiments::{Check, Output};
use cm_experiments::plot::{Plot, Series, Style};
use cm_experiments::progress::Progress;
use cm_force::config::{ENV_REPORT, find_wrap_library};
use cm_netem::{Node, Path, PathConfig};
use serde_json::{Value, json};

use crate::RealOpts;
use crate::error::{RealError, Result};
use crate::proc::Proc;

/// The bottleneck, bits per second (`PathConfig::default()`).
const LINK_BPS: f64 = 10_000_000.0;
/// What the UDP program offers.
const OFFERED: &str = "50M";
const UDP_PORT: &str = "5201";
const TCP_PORT: &str = "5202";

/// One run: the UDP program wrapped or not, against a TCP flow.
#[derive(Clone, Copy, Debug)]
struct Case {
    label: &'static str,
    wrapped: bool,
    tcp_cc: &'static str,
}

#[derive(Debug, Default)]
struct CaseResult {
    udp_bps: f64,
    tcp_bps: f64,
    udp_series: Vec<(f64, f64)>,
    tcp_series: Vec<(f64, f64)>,
    report: Option<cm_force::Report>,
    receiver: Option<cm_force::receiver::ReceiverStats>,
}

/// Per-second receive rates from an `iperf3 -s -J` run: (end time, bit/s).
fn server_intervals(json_text: &str) -> Result<Vec<(f64, f64)>> {
    let v: Value = serde_json::from_str(json_text)
        .map_err(|e| RealError::Program(format!("iperf3 server JSON: {e}")))?;
    let ivs = v["intervals"]
        .as_array()
        .ok_or_else(|| RealError::Program("iperf3 server JSON has no intervals".into()))?;
    Ok(ivs
        .iter()
        .filter_map(|i| {
            Some((
                i["sum"]["end"].as_f64()?,
                i["sum"]["bits_per_second"].as_f64()?,
            ))
        })
        .collect())
}

fn mean_between(series: &[(f64, f64)], from: f64, to: f64) -> f64 {
    let v: Vec<f64> = series
        .iter()
        .filter(|(t, _)| *t > from && *t <= to)
        .map(|(_, r)| *r)
        .collect();
    v.iter().sum::<f64>() / v.len().max(1) as f64
}

fn run_case(
    path: &Path,
    lib: &FsPath,
    case: Case,
    secs: u64,
    warmup: f64,
    dir: &FsPath,
) -> Result<CaseResult> {
    let rcv = path.receiver_addr().to_string();
    let server = |port: &str| {
        let mut c = path.command(Node::Receiver, "iperf3");
        c.args(["-s", "-1", "-J", "-p", port])
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        Proc::spawn(c, "iperf3 -s")
    };
    let udp_srv = server(UDP_PORT)?;
    let tcp_srv = server(TCP_PORT)?;
    // The counting receiver CM, on a thread inside the receiving namespace.
    let stop = Arc::new(AtomicBool::new(false));
    let receiver = if case.wrapped {
        let (stop2, (tx, rx)) = (Arc::clone(&stop), std::sync::mpsc::channel());
        let h = path.spawn_in(Node::Receiver, move || {
            let mut r =
                match cm_force::Receiver::bind(cm_force::WrapConfig::default().receiver_port) {
                    Ok(r) => r,
                    Err(e) => {
                        let _ = tx.send(Err(e.to_string()));
                        return None;
                    }
                };
            let _ = tx.send(Ok(()));
            let _ = r.run(&stop2, None);
            Some(r.stats())
        })?;
        match rx.recv_timeout(Duration::from_secs(5)) {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(RealError::Program(format!("receiver CM: {e}"))),
            Err(_) => return Err(RealError::Thread("receiver CM")),
        }
        Some(h)
    } else {
        None
    };
    std::thread::sleep(Duration::from_millis(400));
    let mut tcp = path.command(Node::Sender, "iperf3");
    tcp.args([
        "-C",
        case.tcp_cc,
        "-c",
        &rcv,
        "-p",
        TCP_PORT,
        "-t",
        &(secs + 1).to_string(),
        "-J",
    ])
    .stdout(Stdio::null())
    .stderr(Stdio::null());
    let tcp = Proc::spawn(tcp, "iperf3 (TCP)")?;
    std::thread::sleep(Duration::from_secs(1));
    let report_file = dir.join(format!("real-wrap-{}.json", case.label));
    let _ = std::fs::remove_file(&report_file);
    let mut udp = path.command(Node::Sender, "iperf3");
    udp.args([
        "-u",
        "-b",
        OFFERED,
        "-c",
        &rcv,
        "-p",
        UDP_PORT,
        "-t",
        &secs.to_string(),
        "-J",
    ])
    .stdout(Stdio::null())
    .stderr(Stdio::null());
    if case.wrapped {
        udp.env("LD_PRELOAD", lib).env(ENV_REPORT, &report_file);
    }
    let udp = Proc::spawn(udp, "iperf3 -u")?;
    let limit = Duration::from_secs(secs + 15);
    udp.output(limit)?;
    tcp.output(limit)?;
    let udp_series = server_intervals(&udp_srv.output(Duration::from_secs(5))?)?;
    // The TCP server's clock started a second before the UDP server's.
    let tcp_series: Vec<(f64, f64)> = server_intervals(&tcp_srv.output(Duration::from_secs(5))?)?
        .into_iter()
        .map(|(t, r)| (t - 1.0, r))
        .collect();
    stop.store(true, Ordering::Relaxed);
    let receiver = match receiver {
        Some(h) => h.join().map_err(|_| RealError::Thread("receiver CM"))?,
        None => None,
    };
    let to = secs as f64;
    Ok(CaseResult {
        udp_bps: mean_between(&udp_series, warmup, to),
        tcp_bps: mean_between(&tcp_series, warmup, to),
        udp_series,
        tcp_series,
        report: std::fs::read(&report_file)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok()),
        receiver,
    })
}

/// Runs the unwrapped and the wrapped case (and, in full, the wrapped one
/// against CUBIC).
pub fn run(opts: &RealOpts) -> Result<Output> {
    if Command::new("iperf3").arg("--version").output().is_err() {
        return Err(RealError::Missing(
            "real-wrap runs Debian's iperf3: apt-get install iperf3".into(),
        ));
    }
    let lib: PathBuf = find_wrap_library(None).map_err(RealError::Missing)?;
    // Reno and the wrapped flow's AIMD trade the link in swings of several
    // seconds, so a 9 s window put the ratio anywhere from 0.6 to 2.1 (five
    // quick runs at 12 s: 0.68, 0.68, 0.77, 1.78, 2.03); 16 s windows cut
    // from the full runs' traces stay within 0.65 to 1.42.
    let (secs, warmup) = if opts.quick { (20, 4.0) } else { (30, 5.0) };
    let mut cases = vec![
        Case {
            label: "unwrapped-reno",
            wrapped: false,
            tcp_cc: "reno",
        },
        Case {
            label: "wrapped-reno",
            wrapped: true,
            tcp_cc: "reno",
        },
    ];
    if !opts.quick {
        cases.push(Case {
            label: "wrapped-cubic",
            wrapped: true,
            tcp_cc: "cubic",
        });
    }
    let path = Path::build(PathConfig::default())?;
    let dir = std::env::temp_dir().join(format!("cm-real-wrap-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| RealError::Program(e.to_string()))?;
    let bar = Progress::new("real-wrap", cases.len(), opts.quiet);
    let mut results = Vec::new();
    for c in &cases {
        results.push(run_case(&path, &lib, *c, secs, warmup, &dir)?);
        bar.tick();
    }
    path.teardown()?;
    let _ = std::fs::remove_dir_all(&dir);
    let (unw, wr) = (&results[0], &results[1]);
    let unwrapped_share = unw.udp_bps / LINK_BPS;
    let wrapped_ratio = wr.udp_bps / wr.tcp_bps.max(1.0);
    let mut csv = String::from("case,flow,t_s,rate_bps\n");
    let mut summary = Vec::new();
    let mut case_json = Vec::new();
    for (c, r) in cases.iter().zip(&results) {
        for (flow, s) in [("udp", &r.udp_series), ("tcp", &r.tcp_series)] {
            for (t, b) in s {
                let _ = writeln!(csv, "{},{flow},{t:.2},{b:.0}", c.label);
            }
        }
        let (o, s, d) = r
            .report
            .as_ref()
            .map_or((0, 0, 0), cm_force::Report::totals);
        summary.push(format!(
            "{}: iperf3 -u {:.2} Mbit/s, Linux {} {:.2} Mbit/s (ratio {:.2}){}",
            c.label,
            r.udp_bps / 1e6,
            c.tcp_cc,
            r.tcp_bps / 1e6,
            r.udp_bps / r.tcp_bps.max(1.0),
            if c.wrapped {
                format!(", wrapper: offered {o}, sent {s}, dropped at the queue {d}")
            } else {
                String::new()
            }
        ));
        case_json.push(json!({
            "case": c.label, "wrapped": c.wrapped, "tcp": c.tcp_cc,
            "udp_bps": r.udp_bps, "tcp_bps": r.tcp_bps,
            "wrapper": r.report, "receiver_cm": r.receiver,
        }));
    }
    let series = [(0usize, "unwrapped"), (1, "wrapped")]
        .into_iter()
        .flat_map(|(i, name)| {
            let r = &results[i];
            [
                Series {
                    label: format!("iperf3 -u, {name}"),
                    points: r.udp_series.iter().map(|(t, b)| (*t, b / 1e6)).collect(),
                    style: Style::Line,
                },
                Series {
                    label: format!("Linux Reno, beside {name}"),
                    points: r.tcp_series.iter().map(|(t, b)| (*t, b / 1e6)).collect(),
                    style: Style::Line,
                },
            ]
        })
        .collect();
    let checks = vec![
        Check {
            metric: "unwrapped_udp_link_share".into(),
            ours: unwrapped_share,
            paper: "an unresponsive flow takes the link (§3)".into(),
            accept: ">= 0.80".into(),
            pass: unwrapped_share >= 0.80,
        },
        Check {
            metric: "wrapped_udp_to_tcp".into(),
            ours: wrapped_ratio,
            paper: "about its TCP-friendly share (§4.3)".into(),
            accept: "0.5 to 2".into(),
            pass: (0.5..=2.0).contains(&wrapped_ratio),
        },
    ];
    Ok(Output {
        name: "real-wrap".into(),
        csv,
        plot: Plot {
            title: "iperf3 -u -b 50M beside Linux Reno, 10 Mbit/s, 60 ms RTT: unwrapped and under cm wrap".into(),
            x_label: "time (s)".into(),
            y_label: "throughput at the receiver (Mbit/s, 1 s bins)".into(),
            series,
        },
        metrics: json!({
            "unwrapped_udp_link_share": unwrapped_share,
            "wrapped_udp_to_tcp": wrapped_ratio,
            "seconds": secs,
            "warmup_s": warmup,
            "cases": case_json,
        }),
        paper: json!({"claim": "forcing congestion control on unresponsive UDP programs moves the drops from the routers to the proxy and keeps other flows alive (transport-selection-middleware §3, §4.3)"}),
        checks,
        notes: vec![
            format!("Path: 10 Mbit/s tbf, 30 ms each way (60 ms RTT), queue one BDP, no random loss. A Linux TCP flow (iperf3 -C reno) starts, and a second later `iperf3 -u -b {OFFERED}` runs {secs} s; rates are the receiving iperf3 servers' 1 s intervals from {warmup:.0} s to {secs} s of the UDP run."),
            "Wrapped: LD_PRELOAD=libcm_wrap.so (what `cm wrap` sets), MAXQ 1 with drop-from-head, an embedded CM in iperf3 (no daemon runs in the sender namespace) with the CM's AIMD; feedback from the counting receiver CM in the receiving namespace (probes on UDP 3124, sigcomm1999 §4.2.2). The iperf3 binaries are Debian's, unmodified.".into(),
            "The CM's AIMD halves on loss like Reno; against CUBIC (the full run's third case) the wrapped flow gets the share a Reno flow would get against CUBIC, which is smaller.".into(),
        ],
        summary,
    })
}
