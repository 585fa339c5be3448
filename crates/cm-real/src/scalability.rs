//! `real-scalability-t1` — iscc §VI-C, Fig 6 on a real path: `n` NACK-based
//! video streams of one scheme (AIMD, IIAD, TFRC, ISCC(2)) share an
//! emulated T1 (1.544 Mbit/s, 100 ms RTT, a 40-packet DropTail queue),
//! and the loss rate `p_n` at the bottleneck is measured as `n` grows;
//! `s_n = p_n / p_2` is the packet-loss increase factor.
//!
//! Each stream is `cm_apps::video`: its own embedded CM (its own macroflow,
//! as the paper's flows came from separate hosts) running the scheme
//! (`cm_experiments`' `Scheme::config`, a 14 kbit/s base-layer floor) with
//! its parameter calibrated on this path by the paper's rule (two flows
//! lose 0.3–0.6%; the quick run takes the paper's parameters: MTU/RTT of
//! 30 and 50 kbit/s for AIMD and IIAD, TFRC's 180-byte equation packets,
//! ISCC's `m_I` = 20), sending 1500-byte
//! packets in bunches of 3; its client reports once per RTT with NACKs
//! and packet-bunch capacity samples, which ISCC runs on. Loss is read from
//! the bottleneck's `tbf` counters, from the warm-up's end (`Warmup`: the
//! first drop once the streams have had time to start) to the streams'
//! end; the frozen-picture fraction from the clients.

use std::fmt::Write as _;
use std::net::{SocketAddr, SocketAddrV4};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use cm_apps::video::{
    VideoClient, VideoClientConfig, VideoClientReport, VideoConfig, VideoServer, VideoServerReport,
};
use cm_experiments::experiments::scalability_t1::simulation::{
    BASE_LAYER_BPS, Calibration, Scheme, T1_BPS, calibrate_with,
};
use cm_experiments::experiments::scalability_t1::{QUEUE_PACKETS, order, paper_order};
use cm_experiments::experiments::{Check, Output};
use cm_experiments::plot::{Plot, Series, Style};
use cm_experiments::progress::Progress;
use cm_force::proxy::run_all;
use cm_netem::{Node, PathConfig, Queue};
use serde_json::json;

use crate::RealOpts;
use crate::error::{RealError, Result};
use crate::harness::{HostOptions, Rig, embedded_cm};

/// One-way delay: a 100 ms RTT (the T1 path).
const ONE_WAY: Duration = Duration::from_millis(50);

/// The emulated T1: its rate, the delay, the paper's 40-packet queue.
pub(crate) fn t1_path() -> PathConfig {
    PathConfig {
        rate_bps: T1_BPS,
        one_way_delay: ONE_WAY,
        queue: Queue::Packets(u64::from(QUEUE_PACKETS)),
        // A serial line's spacing: tbf's bucket holds one packet, so a
        // bunch leaves the T1 one packet time apart even after an idle
        // spell (with the default two MTUs, its first two packets would
        // pass together and the sample read twice the line rate).
        burst_bytes: Some(1520),
        ..PathConfig::default()
    }
}
/// First client port.
const PORT: u16 = 6100;
/// The playout (startup) delay: the paper's 3 s (iscc §VI-C).
const PLAYOUT: Duration = Duration::from_secs(3);
/// The source's top rate: base plus FGS enhancement up to 1,190 kbit/s
/// (iscc §VI-B).
const TOP_BPS: f64 = 1_190_000.0;
/// Time between stream starts.
const STAGGER: Duration = Duration::from_millis(500);

/// When a run's loss starts to count. Loss is a property of streams that
/// congest the link, so the measured window opens at the first packet the
/// bottleneck drops at least `min` seconds after the last stream started
/// (the streams have reached the link's capacity, rather than still
/// climbing towards it or being held below it by their source), or `max`
/// seconds after the last start if nothing is dropped by then.
///
/// A fixed warm-up misjudged slow schemes: ISCC(2)'s increase,
/// (x/m_I)·√(x/C), is small for a slow flow, and two-flow runs of 15 s
/// warm-up at the paper's m_I = 20 measured no loss where one stream was
/// still climbing beside one held at its source's top rate; the
/// calibration took that for a scheme too gentle (docs/apps.md).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Warmup {
    /// Seconds after the last start before the first drop counts.
    pub(crate) min: u64,
    /// Seconds after the last start at which the window opens regardless.
    pub(crate) max: u64,
}

impl Warmup {
    /// A warm-up of exactly `secs` (for runs that measure something else
    /// than loss).
    pub(crate) fn fixed(secs: u64) -> Self {
        Warmup {
            min: secs,
            max: secs,
        }
    }
}

/// How often the warm-up reads the bottleneck's drop counter.
const POLL: Duration = Duration::from_secs(1);

/// The run's sizes: schemes, flow counts, warm-up and measured seconds.
fn sizes(quick: bool) -> (Vec<Scheme>, Vec<usize>, Warmup, u64) {
    if quick {
        (
            vec![Scheme::Aimd, Scheme::Iscc],
            vec![32],
            Warmup { min: 20, max: 40 },
            40,
        )
    } else {
        (
            vec![Scheme::Aimd, Scheme::Iiad, Scheme::Tfrc, Scheme::Iscc],
            vec![2, 4, 8, 16, 32, 50],
            Warmup { min: 15, max: 180 },
            90,
        )
    }
}

/// What the clients' thread returns: each client's report and capacity
/// samples, and its packet count when the measured window opened.
type ClientEnds = (Vec<(VideoClientReport, Vec<f64>)>, Vec<u64>);

/// What one run of `n` streams of a scheme measured.
pub(crate) struct RunResult {
    pub(crate) scheme: Scheme,
    pub(crate) n: usize,
    /// Bottleneck drops over arrivals in the measured window.
    pub(crate) loss: f64,
    utilization: f64,
    /// Seconds from the last start to the measured window.
    warm_s: f64,
    /// Whether the window opened at a drop (else at [`Warmup::max`]).
    congested: bool,
    /// Each client's received rate in the measured window, bit/s.
    flow_bps: Vec<f64>,
    servers: Vec<VideoServerReport>,
    clients: Vec<VideoClientReport>,
    /// Each client's capacity samples, bit/s.
    pub(crate) samples: Vec<Vec<f64>>,
}

impl RunResult {
    fn frozen_fraction(&self) -> f64 {
        let (f, p) = self
            .clients
            .iter()
            .fold((0, 0), |(f, p), c| (f + c.frozen, p + c.pictures));
        if p == 0 { 0.0 } else { f as f64 / p as f64 }
    }

    /// Each server's filtered capacity estimate at the end, bit/s.
    pub(crate) fn estimates_bps(&self) -> Vec<f64> {
        self.servers.iter().filter_map(|s| s.capacity_bps).collect()
    }

    /// The servers' feedback counters summed: datagrams the
    /// acknowledgements resolved as lost, and retransmission timeouts.
    fn lost_and_timeouts(&self) -> (u64, u64) {
        self.servers
            .iter()
            .fold((0, 0), |(l, t), s| (l + s.lost, t + s.timeouts))
    }

    fn capacity_bps(&self) -> Option<f64> {
        let c: Vec<f64> = self.servers.iter().filter_map(|s| s.capacity_bps).collect();
        (!c.is_empty()).then(|| c.iter().sum::<f64>() / c.len() as f64)
    }
}

/// `n` streams of `scheme` on the rig's path: the last starts `(n−1)` ×
/// [`STAGGER`] in; loss counts from the end of the warm-up (`warm`) for
/// `measure` seconds, and every stream ends then.
pub(crate) fn run_one(
    rig: &Rig,
    scheme: Scheme,
    param: f64,
    n: usize,
    warm: Warmup,
    measure: u64,
) -> Result<RunResult> {
    let rcv = rig.path().receiver_addr();
    let addr = move |i: usize| SocketAddr::V4(SocketAddrV4::new(rcv, PORT + i as u16));
    let last_start = STAGGER * (n as u32 - 1);
    // The streams are sized for the longest warm-up and stopped (`stop`)
    // when the measured window closes.
    let end = last_start + Duration::from_secs(warm.max + measure);
    let stop = Arc::new(AtomicBool::new(false));
    // Set when the measured window opens: the clients note their packet
    // counts then, for the streams' rates over the window.
    let opened = Arc::new(AtomicBool::new(false));
    let opened_rx = Arc::clone(&opened);
    let clients = rig
        .path()
        .spawn_in(Node::Receiver, move || -> Result<ClientEnds> {
            let cm = embedded_cm()?;
            let mut ends = (0..n)
                .map(|i| {
                    VideoClient::bind(VideoClientConfig {
                        listen: addr(i),
                        report: Duration::from_millis(200),
                        playout: PLAYOUT,
                        idle: Duration::from_secs(3),
                        batch: None,
                    })
                    .map_err(RealError::app("video"))
                })
                .collect::<Result<Vec<_>>>()?;
            let until = Instant::now() + end + Duration::from_secs(10);
            run_all(&mut ends, &cm, &opened_rx, Some(until)).map_err(RealError::app("video"))?;
            let at_open = ends.iter().map(|c| c.report().packets).collect();
            run_all(&mut ends, &cm, &AtomicBool::new(false), Some(until))
                .map_err(RealError::app("video"))?;
            let reports = ends.iter().map(|c| (c.report(), c.samples_bps())).collect();
            Ok((reports, at_open))
        })?;
    std::thread::sleep(Duration::from_millis(200));
    let t0 = Instant::now();
    let servers = (0..n)
        .map(|i| {
            let start = STAGGER * i as u32;
            let cfg = VideoConfig {
                base_bps: BASE_LAYER_BPS as f64,
                top_bps: TOP_BPS,
                playout: PLAYOUT,
                duration: end - start,
                controller: scheme.config(param),
                ..VideoConfig::default()
            };
            let stop = Arc::clone(&stop);
            rig.path()
                .spawn_in(Node::Sender, move || -> Result<VideoServerReport> {
                    std::thread::sleep(start.saturating_sub(t0.elapsed()));
                    let cm = embedded_cm()?;
                    let mut s =
                        VideoServer::connect(&cm, addr(i), cfg).map_err(RealError::app("video"))?;
                    let until = Instant::now() + end + Duration::from_secs(5);
                    run_all(std::slice::from_mut(&mut s), &cm, &stop, Some(until))
                        .map_err(RealError::app("video"))?;
                    Ok(s.report())
                })
                .map_err(RealError::from)
        })
        .collect::<Result<Vec<_>>>()?;
    let after_last = |s: u64| last_start + Duration::from_secs(s);
    std::thread::sleep(after_last(warm.min).saturating_sub(t0.elapsed()));
    let mut a = rig.path().stats()?.bottleneck;
    let congested = loop {
        if t0.elapsed() >= after_last(warm.max) {
            break false;
        }
        std::thread::sleep(POLL);
        let b = rig.path().stats()?.bottleneck;
        let dropped = b.dropped > a.dropped;
        a = b;
        if dropped {
            break true;
        }
    };
    let from = Instant::now();
    opened.store(true, Ordering::Relaxed);
    std::thread::sleep(Duration::from_secs(measure));
    let b = rig.path().stats()?.bottleneck;
    stop.store(true, Ordering::Relaxed);
    let secs = from.elapsed().as_secs_f64();
    let warm_s = from
        .duration_since(t0)
        .saturating_sub(last_start)
        .as_secs_f64();
    let servers = servers
        .into_iter()
        .map(|h| h.join().map_err(|_| RealError::Thread("video server"))?)
        .collect::<Result<Vec<_>>>()?;
    let (clients, at_open) = clients
        .join()
        .map_err(|_| RealError::Thread("video clients"))??;
    let (clients, samples): (Vec<VideoClientReport>, _) = clients.into_iter().unzip();
    let flow_bps = clients
        .iter()
        .zip(&at_open)
        .map(|(c, a)| c.packets.saturating_sub(*a) as f64 * 1500.0 * 8.0 / secs)
        .collect();
    let (sent, dropped) = (b.sent_packets - a.sent_packets, b.dropped - a.dropped);
    Ok(RunResult {
        scheme,
        n,
        loss: dropped as f64 / (sent + dropped).max(1) as f64,
        utilization: (b.sent_bytes - a.sent_bytes) as f64 * 8.0 / (T1_BPS as f64 * secs),
        warm_s,
        congested,
        flow_bps,
        servers,
        clients,
        samples,
    })
}

/// Two-flow runs of the calibration: warm-up, measured seconds, and the
/// most runs per scheme.
const CALIBRATION: (Warmup, u64, u32) = (Warmup { min: 15, max: 180 }, 45, 6);

/// A scheme's calibration on this path.
struct PathCalibration {
    /// The bisection's result and trials.
    found: Calibration,
    /// Per trial, how its run went: warm-up, whether a drop opened the
    /// window, utilization, the two streams' rates.
    runs: Vec<serde_json::Value>,
}

/// Each scheme's parameter by the paper's rule (iscc §VI-C: two flows
/// lose 0.3–0.6%), found on this path: the paper's own parameter first,
/// then the simulator's bisection (`calibrate_with`) over two-flow runs.
fn calibrate(rig: &Rig, schemes: &[Scheme], quiet: bool) -> Result<Vec<PathCalibration>> {
    let (warm, measure, steps) = CALIBRATION;
    let bar = Progress::new("real-scalability-t1 calibration", schemes.len(), quiet);
    let mut out = Vec::new();
    for &s in schemes {
        let mut runs = Vec::new();
        let found = calibrate_with(s, Some(s.paper_param()), steps, |param| {
            let r = run_one(rig, s, param, 2, warm, measure)?;
            let rates = &r.flow_bps;
            if !quiet {
                eprintln!(
                    "  {} param {param:.1}: two-flow loss {:.4}, window opened {:.0} s after the last start ({}), utilization {:.2}, streams {:.0} and {:.0} kbit/s",
                    s.label(),
                    r.loss,
                    r.warm_s,
                    if r.congested { "at a drop" } else { "no drop" },
                    r.utilization,
                    rates.first().copied().unwrap_or(0.0) / 1e3,
                    rates.last().copied().unwrap_or(0.0) / 1e3,
                );
            }
            let (lost, timeouts) = r.lost_and_timeouts();
            runs.push(json!({"param": param, "loss": r.loss, "warm_s": r.warm_s,
                "congested": r.congested, "utilization": r.utilization, "flow_bps": rates,
                "server_lost": lost, "server_timeouts": timeouts}));
            std::thread::sleep(Duration::from_secs(1));
            Ok::<f64, RealError>(r.loss)
        })?;
        out.push(PathCalibration { found, runs });
        bar.tick();
    }
    Ok(out)
}

/// Run the experiment.
pub fn run(opts: &RealOpts) -> Result<Output> {
    let (schemes, ns, warm, measure) = sizes(opts.quick);
    let rig = Rig::build(t1_path(), HostOptions::sack(true))?;
    // The quick run uses the paper's parameters; the full run calibrates
    // them on this path first, as the paper did on its testbed.
    let calib = if opts.quick {
        None
    } else {
        Some(calibrate(&rig, &schemes, opts.quiet)?)
    };
    let bar = Progress::new("real-scalability-t1", schemes.len() * ns.len(), opts.quiet);
    let mut runs = Vec::new();
    for (k, &scheme) in schemes.iter().enumerate() {
        let param = calib
            .as_ref()
            .map_or(scheme.paper_param(), |c| c[k].found.param);
        for &n in &ns {
            runs.push(run_one(&rig, scheme, param, n, warm, measure)?);
            bar.tick();
            // Let the queue drain and the sockets close before the next.
            std::thread::sleep(Duration::from_secs(1));
        }
    }
    rig.finish()?;
    let simulated = if opts.quick {
        None
    } else {
        Some(simulator_at_max(&schemes, opts.quiet)?)
    };
    report(
        &runs,
        &schemes,
        calib.as_deref(),
        simulated.as_deref(),
        &ns,
        warm,
        measure,
    )
}

/// The simulator's loss `p` and loss increase factor `s = p / p_2` at its
/// largest n (50) per scheme, from its own calibrated sweep (`cm experiment
/// scalability-t1`, a few seconds): what the real run's order is checked
/// against.
fn simulator_at_max(schemes: &[Scheme], quiet: bool) -> Result<Vec<(Scheme, f64, f64)>> {
    let opts = cm_experiments::experiments::Opts {
        quick: false,
        quiet,
        threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
    };
    let out = cm_experiments::experiments::scalability_t1::run(&opts)
        .map_err(|e| RealError::Program(format!("the simulator's scalability-t1: {e}")))?;
    schemes
        .iter()
        .map(|&s| {
            let m = &out.metrics[s.label()];
            m["p_max"]
                .as_f64()
                .zip(m["p_2"].as_f64())
                .map(|(p, p2)| (s, p, p / p2))
                .ok_or_else(|| {
                    RealError::Program(format!("the simulator's scalability-t1 has no {s:?}"))
                })
        })
        .collect()
}

fn report(
    runs: &[RunResult],
    schemes: &[Scheme],
    calib: Option<&[PathCalibration]>,
    simulated: Option<&[(Scheme, f64, f64)]>,
    ns: &[usize],
    warm: Warmup,
    measure: u64,
) -> Result<Output> {
    let quick = calib.is_none();
    let n_max = ns.iter().copied().max().unwrap_or(2);
    let loss = |s: Scheme, n: usize| {
        runs.iter()
            .find(|r| r.scheme == s && r.n == n)
            .map_or(f64::NAN, |r| r.loss)
    };
    let mut csv = String::from(
        "scheme,n,loss,s_n,utilization,frozen_fraction,capacity_estimate_bps,min_flow_bps,max_flow_bps\n",
    );
    let mut series = Vec::new();
    let mut per_scheme = serde_json::Map::new();
    let mut summary = Vec::new();
    for (k, &s) in schemes.iter().enumerate() {
        let cal = calib.map(|c| &c[k]);
        let param = cal.map_or(s.paper_param(), |c| c.found.param);
        let p2 = loss(s, 2);
        let mut pts = Vec::new();
        let mut points = Vec::new();
        for r in runs.iter().filter(|r| r.scheme == s) {
            // s_n needs p_2 (the quick run has one n only).
            let sn = if p2.is_nan() {
                f64::NAN
            } else {
                r.loss / p2.max(1e-9)
            };
            let rates = &r.flow_bps;
            let (lost, timeouts) = r.lost_and_timeouts();
            let lo = rates.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = rates.iter().copied().fold(0.0, f64::max);
            let _ = writeln!(
                csv,
                "{},{},{:.5},{:.2},{:.3},{:.4},{:.0},{lo:.0},{hi:.0}",
                s.label(),
                r.n,
                r.loss,
                sn,
                r.utilization,
                r.frozen_fraction(),
                r.capacity_bps().unwrap_or(0.0)
            );
            pts.push((r.n as f64, r.loss * 100.0));
            points.push(
                json!({"n": r.n, "loss": r.loss, "s_n": sn, "utilization": r.utilization,
                "frozen_fraction": r.frozen_fraction(), "capacity_estimate_bps": r.capacity_bps(),
                "warm_s": r.warm_s, "congested": r.congested,
                "server_lost": lost, "server_timeouts": timeouts,
                "recovered": r.clients.iter().map(|c| c.recovered).sum::<u64>(),
                "nacks": r.clients.iter().map(|c| c.nacks).sum::<u64>(),
                "min_flow_bps": lo, "max_flow_bps": hi}),
            );
        }
        let pm = loss(s, n_max);
        let frozen = runs
            .iter()
            .find(|r| r.scheme == s && r.n == n_max)
            .map_or(f64::NAN, RunResult::frozen_fraction);
        summary.push(format!(
            "{:<8} param {param:.0} (paper {:.0})  p_2 {:.4}  p_{n_max} {:.4}  s_{n_max} {:.1}  frozen at n = {n_max}: {:.1}%",
            s.label(),
            s.paper_param(),
            p2,
            pm,
            pm / p2,
            frozen * 100.0
        ));
        per_scheme.insert(
            s.label().into(),
            json!({"p_2": p2, "p_max": pm, "n_max": n_max, "points": points,
                "param": param, "paper_param": s.paper_param(),
                "calibration": cal.map(|c| json!({"loss": c.found.loss, "trials": c.found.trials,
                    "runs": c.runs}))}),
        );
        series.push(Series {
            label: s.label().into(),
            points: pts,
            style: Style::Line,
        });
    }
    let (aimd, iscc) = (loss(Scheme::Aimd, n_max), loss(Scheme::Iscc, n_max));
    let ratio = iscc / aimd.max(1e-9);
    let mut checks = vec![Check {
        metric: format!("ISCC p_{n_max} / AIMD p_{n_max}"),
        ours: ratio,
        paper: "3.1% vs 22% at n = 50 (Fig 6)".into(),
        accept: "< 0.5".into(),
        pass: ratio < 0.5,
    }];
    let by = |f: &dyn Fn(Scheme) -> f64| order(schemes.iter().map(|&s| (s, f(s))).collect());
    let real_by_p = by(&|s| loss(s, n_max));
    let real_by_s = by(&|s| loss(s, n_max) / loss(s, 2).max(1e-9));
    if let Some(sim) = simulated {
        // The second line: the order at the largest n is the
        // simulator's (its n = 50, the real run's n_max in the full run).
        // The order is of s_n, the quantity Fig 6 plots: p_n = s_n p_2,
        // and p_2 is calibrated anywhere in a band a factor of 2 wide, so
        // the order of p_n between schemes whose s_n are close is decided
        // by where each one's calibration fell (both orders are in the
        // metrics).
        let simulator = order(sim.iter().map(|&(s, _, sn)| (s, sn)).collect());
        let same = real_by_s == simulator;
        checks.push(Check {
            metric: format!("order of s_{n_max}: {real_by_s}"),
            ours: f64::from(u8::from(same)),
            paper: format!("Fig 6: {}; simulator: {simulator}", paper_order()),
            accept: "the simulator's order (1)".into(),
            pass: same,
        });
    }
    Ok(Output {
        name: "real-scalability-t1".into(),
        csv,
        plot: Plot {
            title: "NACK-based streams on an emulated T1: bottleneck loss vs flows".into(),
            x_label: "flows n".into(),
            y_label: "packet loss (%)".into(),
            series,
        },
        metrics: json!({"schemes": per_scheme, "warm_min_s": warm.min, "warm_max_s": warm.max,
            "measured_s": measure,
            "stagger_ms": STAGGER.as_millis() as u64,
            "order_by_p": real_by_p, "order_by_s": real_by_s,
            "simulator_p_max": simulated.map(|v| v.iter()
                .map(|&(s, p, _)| (s.label().to_string(), json!(p)))
                .collect::<serde_json::Map<_, _>>()),
            "simulator_s_max": simulated.map(|v| v.iter()
                .map(|&(s, _, sn)| (s.label().to_string(), json!(sn)))
                .collect::<serde_json::Map<_, _>>()),
            "simulator_order_by_p": simulated.map(|v| order(v.iter().map(|&(s, p, _)| (s, p)).collect())),
            "simulator_order_by_s": simulated.map(|v| order(v.iter().map(|&(s, _, sn)| (s, sn)).collect()))}),
        paper: json!({"AIMD p_50": 0.22, "IIAD p_50": 0.45, "TFRC p_50": 0.20, "ISCC p_50": 0.031}),
        checks,
        notes: vec![
            format!("Path: {T1_BPS} bit/s (T1), {} ms one way, a DropTail queue of {QUEUE_PACKETS} packets (cm-netem tbf). n streams of one scheme start {} ms apart; loss is the bottleneck's drops over arrivals for {measure} s from the first drop at least {} s after the last start (at most {} s after it: the streams must congest the link for its loss to mean anything; each point's warm_s and congested say when and how its window opened).", ONE_WAY.as_millis(), STAGGER.as_millis(), warm.min, warm.max),
            format!("Each stream: `cm_apps::video` (the server of `cm stream serve --nack`) on its own embedded CM, {}, 1500-byte packets in bunches of 3, a 14 kbit/s base layer and FGS enhancement up to 1,190 kbit/s, NACK retransmission of the base layer and a 3 s startup delay (the paper's); the client reports once per RTT with capacity samples that ISCC's estimate comes from.", if quick { "the scheme with the paper's parameters (MTU/RTT 30 kbit/s for AIMD, TFRC's 180-byte equation packets, ISCC's m_I = 20)".to_string() } else { format!("the scheme with its parameter calibrated on this path by the paper's rule (iscc §VI-C: two flows lose 0.3–0.6%): the paper's parameter first, then a bisection in log space over two-flow runs (warm-up as above, {}–{} s; {} s measured; at most {} runs; the simulator's calibrate_with), keeping the first in the band or else the closest; schemes.*.calibration holds every trial and how its window opened", CALIBRATION.0.min, CALIBRATION.0.max, CALIBRATION.1, CALIBRATION.2) }),
            "The paper's runs were 10 minutes, one RTT distribution of 50–200 ms; here every stream has the same 100 ms RTT and the runs are shorter (see warm_s and measured_s), so p_n is noisier than Fig 6's; the check is on the ratio at the largest n.".into(),
        ],
        summary,
    })
}
