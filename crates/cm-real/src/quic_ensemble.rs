//! `quic-ensemble` — four QUIC downloads from one server whose quinn
//! connections are flows of one CM (`cm_quic::CmCongestion`), against one
//! outside Linux Reno flow on 10 Mbit/s, 60 ms RTT; and the same four on
//! quinn's own NewReno (sigcomm1999 §1/§5.1 with QUIC instead of TCP/CM).
//!
//! The server runs in the sender's namespace with an embedded CM; the
//! clients in the receiver's. Every transfer runs for the same time; rates
//! are each transfer's bytes over its duration.

use std::net::{SocketAddr, SocketAddrV4};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::RealOpts;
use crate::ensemble_sets::{Rates, mean_jain, mean_share, scatter, table};
use crate::error::{RealError, Result};
use crate::harness::{HostOptions, Job, Rig};
use cm_experiments::experiments::{Check, Output};
use cm_experiments::plot::Plot;
use cm_experiments::progress::Progress;
use cm_netem::{Node, PathConfig};
use cm_quic::transfer::{Congestion, Received, fetch, serve};
use cm_ttcp::Transport;
use serde_json::json;

/// Inner downloads per set.
const INNER: usize = 4;
/// The QUIC server's port.
const PORT: u16 = 4433;

fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
}

fn run_set(rig: &Rig, cm: bool, secs: u8, dir: &std::path::Path) -> Result<Rates> {
    let path = rig.path();
    let server = SocketAddr::V4(SocketAddrV4::new(path.sender_addr(), PORT));
    let cert = dir.join(if cm { "cm.der" } else { "newreno.der" });
    let _ = std::fs::remove_file(&cert);
    let stop = Arc::new(AtomicBool::new(false));
    let (cert_s, stop_s) = (cert.clone(), Arc::clone(&stop));
    let serving = path.spawn_in(Node::Sender, move || -> std::result::Result<(), String> {
        let cc = if cm {
            let mk = || {
                libcm::Cm::embedded(libcm::Config {
                    mtu: libcm::Bytes(1200),
                    ..libcm::Config::default()
                })
            };
            Congestion::Cm(cm_quic::CmThread::spawn(mk).map_err(|e| e.to_string())?)
        } else {
            Congestion::NewReno
        };
        let rt = runtime().map_err(|e| e.to_string())?;
        rt.block_on(serve(server, cc, &cert_s, || stop_s.load(Ordering::SeqCst)))
            .map_err(|e| e.to_string())
    })?;
    let until = Instant::now() + Duration::from_secs(10);
    while !cert.exists() {
        if Instant::now() > until || serving.is_finished() {
            stop.store(true, Ordering::SeqCst);
            let why = serving.join().ok().and_then(std::result::Result::err);
            return Err(RealError::Program(format!(
                "the QUIC server did not start: {why:?}"
            )));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let clients: Vec<_> = (0..INNER)
        .map(|_| {
            let cert = cert.clone();
            path.spawn_in(
                Node::Receiver,
                move || -> std::result::Result<Received, String> {
                    let rt = runtime().map_err(|e| e.to_string())?;
                    rt.block_on(fetch(server, &cert, secs))
                        .map_err(|e| e.to_string())
                },
            )
        })
        .collect::<std::result::Result<_, _>>()?;
    let limit = Duration::from_secs(u64::from(secs));
    let bytes = 10_000_000 / 8 * (u64::from(secs) + 1);
    let job = Job::now(bytes, Transport::linux("reno")).for_at_most(limit);
    let r = rig.run(&[job], None);
    let mut inner = Vec::new();
    let mut failed = None;
    for c in clients {
        match c.join() {
            Ok(Ok(got)) => inner.push(got.bps()),
            Ok(Err(e)) => failed = Some(e),
            Err(_) => failed = Some("a client thread panicked".into()),
        }
    }
    stop.store(true, Ordering::SeqCst);
    let _ = serving.join();
    if let Some(e) = failed {
        return Err(RealError::Program(format!("QUIC download: {e}")));
    }
    let outside = r?.first().map_or(0.0, |s| {
        s.bytes as f64 * 8.0 / (s.end_s - s.start_s).max(1e-3)
    });
    Ok(Rates { inner, outside })
}

/// Runs the CM set and the NewReno set, alternating `reps` times.
pub fn run(opts: &RealOpts) -> Result<Output> {
    let (secs, reps): (u8, usize) = if opts.quick { (30, 1) } else { (60, 3) };
    let dir = std::env::temp_dir().join(format!("cm-quic-ensemble-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| RealError::Program(e.to_string()))?;
    let rig = Rig::build(PathConfig::default(), HostOptions::sack(true))?;
    let bar = Progress::new("quic-ensemble", 2 * reps, opts.quiet);
    let mut cm_sets = Vec::new();
    let mut nr_sets = Vec::new();
    let result = (|| -> Result<()> {
        for _ in 0..reps {
            cm_sets.push(run_set(&rig, true, secs, &dir)?);
            bar.tick();
            nr_sets.push(run_set(&rig, false, secs, &dir)?);
            bar.tick();
        }
        Ok(())
    })();
    let _ = std::fs::remove_dir_all(&dir);
    result?;
    rig.finish()?;
    let (share_cm, share_nr) = (mean_share(&cm_sets), mean_share(&nr_sets));
    let jain_cm = mean_jain(&cm_sets);
    let (csv, mut summary) = table(&[("cm", &cm_sets), ("newreno", &nr_sets)], "quic", "QUIC");
    summary.push(format!(
        "outside_share_cm {share_cm:.2}, outside_share_newreno {share_nr:.2}, jain_cm {jain_cm:.3}"
    ));
    let series = scatter(&[
        (
            &cm_sets,
            "4 QUIC on the CM, together",
            "outside Reno beside the CM",
        ),
        (
            &nr_sets,
            "4 QUIC on NewReno, together",
            "outside Reno beside NewReno",
        ),
    ]);
    Ok(Output {
        name: "quic-ensemble".into(),
        csv,
        plot: Plot {
            title: "4 QUIC downloads (quinn on the CM, or NewReno) vs 1 outside Reno, 10 Mbit/s, 60 ms".into(),
            x_label: "run".into(),
            y_label: "throughput (Mbit/s)".into(),
            series,
        },
        metrics: json!({"outside_share_cm": share_cm, "outside_share_newreno": share_nr,
                        "jain_cm": jain_cm, "seconds": secs, "runs": reps}),
        paper: json!({"outside_share_cm": 0.5,
                      "claim": "a macroflow of many connections competes like one TCP (sigcomm1999 §1, §5.1)"}),
        checks: vec![Check {
            metric: "outside_share_cm".into(),
            ours: share_cm,
            paper: "≈ 0.5".into(),
            accept: ">= 0.40".into(),
            pass: share_cm >= 0.40,
        }],
        notes: vec![
            format!("Path: 10 Mbit/s tbf, 30 ms each way, queue one BDP, SACK on for the Reno flow. Each set runs {secs} s; {reps} run(s) per set, alternating; means reported. Rates are bytes over each transfer's whole time."),
            "The server (cm_quic::transfer::serve) gives each connection its own CmCongestion factory for the peer's address, all on one embedded CM (MTU 1200, quinn's initial datagram size), so the four connections are one macroflow; the NewReno set uses quinn's default controller.".into(),
        ],
        summary,
    })
}
