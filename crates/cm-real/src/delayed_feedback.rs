//! `real-delayed-feedback` — cm-implementation-linux §4.4, Fig 10: a
//! receiver that delays its feedback to the CM by min(500 acks, 2 s) makes
//! the bandwidth the CM reports bursty: slow start waits 2 s for the first
//! report, which then changes the rate in one large step, and later the
//! rate moves in the steps of each batch.
//!
//! One `cm_apps::video` stream (the CM's default window AIMD, a source
//! that can fill the path) runs three times over the same emulated path:
//! with the client acknowledging every 5 ms (prompt feedback, a dozen
//! acks per RTT: once per RTT is already late for the CM's aging, whose
//! threshold is the smoothed RTT plus its variation); with the client
//! holding its acknowledgements until 500 packets have arrived or 2 s have
//! passed (`VideoClientConfig::batch`; the server's retransmission timeout
//! stays above the hold, `VideoConfig::feedback_hold`, as the paper's
//! server did not time out); and the same on a CM without exponential
//! aging (sigcomm1999 §4.4), which the implementation paper's kernel CM
//! does not describe: this CM ages the window of a macroflow whose
//! feedback is overdue, and a 2 s hold is overdue by 10 RTTs. The server
//! records `cm_query`'s rate every 50 ms: the "reported bandwidth" of
//! Fig 10.

use std::fmt::Write as _;
use std::net::{SocketAddr, SocketAddrV4};
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use cm_apps::video::{
    VideoClient, VideoClientConfig, VideoClientReport, VideoConfig, VideoServer, VideoServerReport,
};
use cm_experiments::experiments::{Check, Output};
use cm_experiments::plot::{Plot, Series, Style};
use cm_experiments::progress::Progress;
use cm_force::proxy::run_all;
use cm_netem::{Node, PathConfig};
use serde_json::json;

use crate::RealOpts;
use crate::error::{RealError, Result};
use crate::harness::{HostOptions, Rig, embedded_cm};

/// The path's rate and one-way delay (the queue is cm-netem's default,
/// one BDP): 500 packets fill only 30% of the pipe, so the window reaches
/// them by doubling once per 2 s batch without meeting the queue.
const RATE_BPS: u64 = 100_000_000;
const ONE_WAY: Duration = Duration::from_millis(100);
/// The client's port.
const PORT: u16 = 6300;
/// The prompt client's period between acknowledgements.
const PROMPT: Duration = Duration::from_millis(5);
/// The paper's hold: min(500 acks, 2000 ms).
const BATCH: u32 = 500;
const HOLD: Duration = Duration::from_secs(2);

/// One run: the server's report and rate trace, the client's report.
struct Case {
    label: &'static str,
    server: VideoServerReport,
    trace: Vec<(f64, f64)>,
    client: VideoClientReport,
}

impl Case {
    /// When the CM first reported a rate, seconds.
    fn first_estimate_s(&self) -> f64 {
        self.trace
            .iter()
            .find(|p| p.1 > 0.0)
            .map_or(f64::NAN, |p| p.0)
    }

    /// The rates recorded from the first estimate on.
    fn rates(&self) -> Vec<f64> {
        let from = self.first_estimate_s();
        self.trace
            .iter()
            .filter(|p| p.0 >= from)
            .map(|p| p.1)
            .collect()
    }

    /// The 95th percentile of the rate's change from one 50 ms sample to
    /// the next, relative to the mean rate, once the CM has a rate.
    fn step_p95(&self) -> f64 {
        let r = self.rates();
        let mean = r.iter().sum::<f64>() / r.len().max(1) as f64;
        let mut d: Vec<f64> = r
            .windows(2)
            .map(|w| (w[1] - w[0]).abs() / mean.max(1.0))
            .collect();
        d.sort_by(f64::total_cmp);
        d.get(d.len() * 95 / 100).copied().unwrap_or(f64::NAN)
    }

    /// The client's goodput over the last quarter of a `secs` run, bit/s.
    fn late_goodput_bps(&self, secs: u64) -> f64 {
        let from = (secs * 3 / 4) as u32;
        let s: Vec<f64> = self
            .client
            .seconds
            .iter()
            .filter(|s| s.t >= from && s.t < secs as u32)
            .map(|s| s.goodput_bps)
            .collect();
        s.iter().sum::<f64>() / s.len().max(1) as f64
    }

    /// The share of 50 ms samples in which the rate did not change.
    fn flat_fraction(&self) -> f64 {
        let r = self.rates();
        let same = r.windows(2).filter(|w| w[0] == w[1]).count();
        same as f64 / r.len().saturating_sub(1).max(1) as f64
    }
}

fn run_case(rig: &Rig, label: &'static str, delayed: bool, aging: bool, secs: u64) -> Result<Case> {
    let to = SocketAddr::V4(SocketAddrV4::new(rig.path().receiver_addr(), PORT));
    let client = rig
        .path()
        .spawn_in(Node::Receiver, move || -> Result<VideoClientReport> {
            let cm = embedded_cm()?;
            let mut c = VideoClient::bind(VideoClientConfig {
                listen: to,
                report: if delayed { HOLD } else { PROMPT },
                playout: Duration::from_secs(3),
                idle: Duration::from_secs(3),
                batch: delayed.then_some(BATCH),
            })
            .map_err(RealError::app("video"))?;
            let until = Instant::now() + Duration::from_secs(secs + 15);
            run_all(
                std::slice::from_mut(&mut c),
                &cm,
                &AtomicBool::new(false),
                Some(until),
            )
            .map_err(RealError::app("video"))?;
            Ok(c.report())
        })?;
    std::thread::sleep(Duration::from_millis(200));
    let server = rig.path().spawn_in(
        Node::Sender,
        move || -> Result<(VideoServerReport, Vec<(f64, f64)>)> {
            let core = cm_core::Config {
                aging: if aging {
                    cm_core::config::Aging::default()
                } else {
                    cm_core::config::Aging::Off
                },
                ..cm_core::Config::default()
            };
            let cm: libcm::ccudp::SharedCm =
                std::rc::Rc::new(std::cell::RefCell::new(libcm::Cm::embedded(core)?));
            let cfg = VideoConfig {
                base_bps: 100_000.0,
                top_bps: 2.0 * RATE_BPS as f64,
                duration: Duration::from_secs(secs),
                controller: cm_core::controller::ControllerConfig::default(),
                feedback_hold: delayed.then_some(HOLD),
                ..VideoConfig::default()
            };
            let mut s = VideoServer::connect(&cm, to, cfg).map_err(RealError::app("video"))?;
            let until = Instant::now() + Duration::from_secs(secs + 5);
            run_all(
                std::slice::from_mut(&mut s),
                &cm,
                &AtomicBool::new(false),
                Some(until),
            )
            .map_err(RealError::app("video"))?;
            Ok((s.report(), s.rate_trace().to_vec()))
        },
    )?;
    let (server, trace) = server
        .join()
        .map_err(|_| RealError::Thread("video server"))??;
    let client = client
        .join()
        .map_err(|_| RealError::Thread("video client"))??;
    Ok(Case {
        label,
        server,
        trace,
        client,
    })
}

/// Run the experiment.
pub fn run(opts: &RealOpts) -> Result<Output> {
    let secs = if opts.quick { 30 } else { 40 };
    let bar = Progress::new("real-delayed-feedback", 3, opts.quiet);
    // 500 packets must fit in the path for a batch of 500 acks to come
    // before the 2 s are up: 100 Mbit/s and a 200 ms RTT hold 1,667.
    let path = PathConfig {
        rate_bps: RATE_BPS,
        one_way_delay: ONE_WAY,
        ..PathConfig::default()
    };
    let rig = Rig::build(path, HostOptions::sack(true))?;
    let mut cases = Vec::new();
    for (label, delayed, aging) in [
        ("prompt feedback", false, true),
        ("delayed feedback", true, true),
        ("delayed without aging", true, false),
    ] {
        cases.push(run_case(&rig, label, delayed, aging, secs)?);
        bar.tick();
        std::thread::sleep(Duration::from_secs(1));
    }
    rig.finish()?;
    let mut csv = String::from("case,t_s,rate_bps\n");
    for c in &cases {
        for (t, r) in &c.trace {
            let _ = writeln!(csv, "{},{t:.2},{r:.0}", c.label);
        }
    }
    let (normal, delayed, unaged) = (&cases[0], &cases[1], &cases[2]);
    let goodput = |c: &Case| c.client.packets as f64 * 1500.0 * 8.0 / secs as f64;
    let step_ratio = delayed.step_p95() / normal.step_p95().max(1e-9);
    let unaged_ratio = unaged.step_p95() / normal.step_p95().max(1e-9);
    let fill = goodput(unaged) / goodput(normal).max(1.0);
    let case_json = |c: &Case| {
        json!({"first_estimate_s": c.first_estimate_s(), "step_p95": c.step_p95(),
               "flat_fraction": c.flat_fraction(), "goodput_bps": goodput(c),
               "late_goodput_bps": c.late_goodput_bps(secs),
               "loss": c.client.loss, "server": c.server})
    };
    let flat_gain = unaged.flat_fraction() - normal.flat_fraction();
    let end = |c: &Case| c.late_goodput_bps(secs);
    let late_fill = end(unaged) / end(normal).max(1.0);
    let first = delayed.first_estimate_s().min(unaged.first_estimate_s());
    let checks = vec![
        Check {
            metric: "delayed: first rate report (s)".into(),
            ours: first,
            paper: "slow start delayed by 2 s waiting for the feedback".into(),
            accept: ">= 1.5".into(),
            pass: first >= 1.5,
        },
        Check {
            metric: "prompt: first rate report (s)".into(),
            ours: normal.first_estimate_s(),
            paper: "(within an RTT or two)".into(),
            accept: "< 0.5".into(),
            pass: normal.first_estimate_s() < 0.5,
        },
        Check {
            metric: "no aging: share of 50 ms samples with the rate unchanged, delayed − prompt"
                .into(),
            ours: flat_gain,
            paper: "bursty reported bandwidth (Fig 10)".into(),
            accept: ">= 0.3".into(),
            pass: flat_gain >= 0.3,
        },
        Check {
            metric: "no aging: last quarter's goodput, delayed / prompt".into(),
            ours: late_fill,
            paper: "once the pipe is full, 500 acks come rapidly and normal behaviour resumes"
                .into(),
            accept: ">= 0.5".into(),
            pass: late_fill >= 0.5,
        },
    ];
    let series = cases
        .iter()
        .map(|c| Series {
            label: c.label.into(),
            points: c.trace.iter().map(|&(t, r)| (t, r / 1e6)).collect(),
            style: Style::Line,
        })
        .collect();
    let row = |c: &Case| {
        format!(
            "{}: first rate at {:.2} s, p95 step {:.1}% of the mean, flat {:.0}% of samples, goodput {:.2} Mbit/s",
            c.label,
            c.first_estimate_s(),
            c.step_p95() * 100.0,
            c.flat_fraction() * 100.0,
            goodput(c) / 1e6
        )
    };
    Ok(Output {
        name: "real-delayed-feedback".into(),
        csv,
        plot: Plot {
            title: "Reported bandwidth (cm_query) with prompt and with delayed feedback".into(),
            x_label: "time (s)".into(),
            y_label: "rate (Mbit/s)".into(),
            series,
        },
        metrics: json!({"prompt": case_json(normal), "delayed": case_json(delayed),
                        "delayed_no_aging": case_json(unaged),
                        "step_ratio": step_ratio, "step_ratio_no_aging": unaged_ratio,
                        "flat_gain_no_aging": flat_gain,
                        "late_goodput_no_aging_to_prompt": late_fill,
                        "goodput_no_aging_to_prompt": fill, "seconds": secs,
                        "batch_packets": BATCH, "hold_s": HOLD.as_secs_f64()}),
        paper: json!({"claim": "delaying feedback by min(500 acks, 2000 ms) makes the reported bandwidth bursty; slow start waits 2 s (Fig 10)"}),
        checks,
        notes: vec![
            format!("Path: {} Mbit/s, {} ms each way, one BDP of queue (cm-netem), so that 500 packets fit in flight with no queue. One `cm stream --nack` stream (the CM's window AIMD; 100 kbit/s base layer, a source that can fill the path) for {secs} s, first with the client acknowledging every 5 ms, then holding its acknowledgements until {BATCH} packets have arrived or {} s have passed.", RATE_BPS / 1_000_000, ONE_WAY.as_millis(), HOLD.as_secs()),
            "The third case runs the server's CM with exponential aging off (cm_core::config::Aging::Off), as the implementation paper's kernel CM describes none; with aging on, every 2 s hold leaves the macroflow's feedback overdue for about 10 RTTs and the window is halved each minimum RTT of that, so the stream stays near its base layer (the delayed case's goodput).".into(),
            "The server records cm_query's rate for its flow every 50 ms. step_p95: the 95th percentile of the change between consecutive samples over the mean rate, from the first estimate on.".into(),
        ],
        summary: vec![row(normal), row(delayed), row(unaged)],
    })
}
