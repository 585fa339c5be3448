//! `real-vat` — vat-style interactive audio (cm-implementation-linux §3.6,
//! Fig 2) on an emulated path shared with Linux Reno transfers.
//!
//! Three 64 kbit/s vat senders (20 ms frames of 160 bytes, sent through
//! [`cm_apps::alf::AlfChannel`]: the frame is chosen at the grant) run at once
//! beside the same Reno transfers: through the CM with the paper's
//! drop-from-head buffer, through the CM with a FIFO (drop-tail) buffer of
//! the same size, and over plain UDP. The two CM senders share one CM and
//! so one macroflow, whose scheduler gives them equal shares: they meet
//! exactly the same load, and only their buffers differ (run on separate
//! CMs, or one after the other, their shares varied between runs by more
//! than the policies differ). Both police to the CM's long-term rate. The Reno
//! transfers make the path's share for a flow smaller than vat's rate, so
//! the CM senders must drop, and their controllers' losses and timeouts
//! stall the buffers now and then. A stalled FIFO keeps its oldest frames
//! and delays everything behind them; drop-from-head sends the freshest.
//!
//! One-way delay is measured from each frame's making (in the source,
//! before the policer and the buffer) to its arrival, on the process's one
//! clock.

use std::fmt::Write as _;
use std::net::{IpAddr, SocketAddr, SocketAddrV4};
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use cm_apps::vat::{
    ReceiverConfig, SenderReport, Transport as VatTransport, VatConfig, VatReceiver, VatReport,
    VatSender,
};
use cm_experiments::experiments::{Check, Output};
use cm_experiments::plot::{Plot, Series, Style};
use cm_experiments::progress::Progress;
use cm_force::proxy::{Relay, run_all};
use cm_netem::{Node, PathConfig, Queue};
use cm_transport::maxq::Overflow;
use cm_ttcp::Transport;
use serde_json::json;

use crate::RealOpts;
use crate::error::{RealError, Result};
use crate::harness::{HostOptions, Job, Rig, embedded_cm};

/// The bottleneck, bits per second.
const RATE_BPS: u64 = 200_000;
/// One-way delay of the path.
const ONE_WAY: Duration = Duration::from_millis(40);
/// The bottleneck queue, 1500-byte packets (bytes: tbf's limit).
const QUEUE_PACKETS: u64 = 4;
/// Competing Linux Reno transfers.
const RENO_FLOWS: usize = 4;
/// The application buffer of both CM senders, frames.
const BUFFER: usize = 8;
/// vat's datagram on the wire: frame, CC-UDP header, UDP/IP headers.
const WIRE_BYTES: f64 = 160.0 + 16.0 + 28.0;
/// How long a CM sender may go on past its source's end to empty its
/// buffer, seconds; its receiver listens one second longer.
const SENDER_GRACE: u64 = 5;
/// First vat port at the receiver (one per case).
const VAT_PORT: u16 = 5010;

/// The three senders: label, transport, buffer policy.
const CASES: [(&str, VatTransport, Overflow); 3] = [
    ("drop-from-head", VatTransport::Cm, Overflow::DropHead),
    ("fifo", VatTransport::Cm, Overflow::DropTail),
    ("raw UDP", VatTransport::Udp, Overflow::DropHead),
];

struct CaseResult {
    sender: SenderReport,
    receiver: VatReport,
}

/// The CM senders' macroflow, sampled every [`SAMPLE`] while they run.
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
struct WindowSamples {
    samples: u64,
    /// Mean window, bytes.
    mean_window: f64,
    /// Mean bytes in flight.
    mean_in_flight: f64,
    /// Fraction of samples with the window at most two MTUs, the floor a
    /// reduction leaves (RFC 5681 §3.1).
    at_floor: f64,
    /// The CM's MTU, bytes: a grant needs this much room in the window.
    mtu: u64,
}

/// What a group of senders gives back: each case's result, and its
/// macroflow's samples (none for plain UDP).
type GroupResult = (Vec<CaseResult>, WindowSamples);

/// How often the macroflow is sampled.
const SAMPLE: Duration = Duration::from_millis(100);

/// Run the senders until `until` or their end, sampling the macroflow to
/// `dst` (if any) every [`SAMPLE`].
fn run_sampled(
    ends: &mut [VatSender],
    cm: &libcm::ccudp::SharedCm,
    until: Instant,
    dst: IpAddr,
) -> Result<WindowSamples> {
    let mtu = libcm::Config::default().mtu.get();
    let mut w = WindowSamples {
        mtu,
        ..WindowSamples::default()
    };
    let (mut window, mut in_flight, mut floor) = (0.0, 0.0, 0u64);
    while Instant::now() < until && !ends.iter().all(|e| e.finished()) {
        let slice = (Instant::now() + SAMPLE).min(until);
        run_all(ends, cm, &AtomicBool::new(false), Some(slice)).map_err(RealError::app("vat"))?;
        let stat = cm.borrow_mut().stat()?;
        if let Some(m) = stat.macroflows.iter().find(|m| m.dst == Some(dst)) {
            w.samples += 1;
            window += m.window as f64;
            in_flight += m.in_flight as f64;
            floor += u64::from(m.window <= 2 * mtu);
        }
    }
    if w.samples > 0 {
        let n = w.samples as f64;
        (w.mean_window, w.mean_in_flight, w.at_floor) =
            (window / n, in_flight / n, floor as f64 / n);
    }
    Ok(w)
}

/// Runs the senders of `cases` (indices into [`CASES`]) on one CM in the
/// sender's namespace (so CM senders share one macroflow), and their
/// receivers on one thread in the receiver's.
fn vat_group(
    rig: &Rig,
    cases: &'static [usize],
    secs: u64,
) -> Result<std::thread::JoinHandle<Result<GroupResult>>> {
    let rcv = rig.path().receiver_addr();
    let addr = move |i: usize| SocketAddr::V4(SocketAddrV4::new(rcv, VAT_PORT + i as u16));
    let rx = rig
        .path()
        .spawn_in(Node::Receiver, move || -> Result<Vec<VatReport>> {
            let cm = embedded_cm()?;
            let mut ends = cases
                .iter()
                .map(|&i| {
                    // The receivers run as long as the senders may: a CM
                    // sender can stall for seconds at this loss (backed-off
                    // retransmission timeouts), and a receiver that ended
                    // on a short idle timer would acknowledge nothing more,
                    // so the flow would stay stalled to its end.
                    let cfg = ReceiverConfig {
                        listen: addr(i),
                        transport: CASES[i].1,
                        idle: Duration::from_secs(secs + SENDER_GRACE + 1),
                    };
                    VatReceiver::bind(&cm, cfg).map_err(RealError::app("vat"))
                })
                .collect::<Result<Vec<_>>>()?;
            let until = Instant::now() + Duration::from_secs(secs + SENDER_GRACE + 1);
            run_all(&mut ends, &cm, &AtomicBool::new(false), Some(until))
                .map_err(RealError::app("vat"))?;
            Ok(ends.iter().map(VatReceiver::report).collect())
        })?;
    // The receivers bind before the senders' first frames.
    std::thread::sleep(Duration::from_millis(200));
    let tx = rig.path().spawn_in(
        Node::Sender,
        move || -> Result<(Vec<SenderReport>, WindowSamples)> {
            let cm = embedded_cm()?;
            let mut ends = cases
                .iter()
                .map(|&i| {
                    let cfg = VatConfig {
                        transport: CASES[i].1,
                        buffer: BUFFER,
                        overflow: CASES[i].2,
                        duration: Duration::from_secs(secs),
                        ..VatConfig::default()
                    };
                    VatSender::connect(&cm, addr(i), cfg).map_err(RealError::app("vat"))
                })
                .collect::<Result<Vec<_>>>()?;
            let until = Instant::now() + Duration::from_secs(secs + SENDER_GRACE);
            let w = run_sampled(&mut ends, &cm, until, IpAddr::V4(rcv))?;
            Ok((ends.iter().map(VatSender::report).collect(), w))
        },
    )?;
    Ok(std::thread::spawn(move || -> Result<GroupResult> {
        let (senders, window) = tx.join().map_err(|_| RealError::Thread("vat sender"))??;
        let receivers = rx.join().map_err(|_| RealError::Thread("vat receiver"))??;
        let cases = senders
            .into_iter()
            .zip(receivers)
            .map(|(sender, receiver)| CaseResult { sender, receiver })
            .collect();
        Ok((cases, window))
    }))
}

/// Run the experiment.
pub fn run(opts: &RealOpts) -> Result<Output> {
    let secs: u64 = if opts.quick { 20 } else { 60 };
    let bar = Progress::new("real-vat", 2, opts.quiet);
    let cfg = PathConfig {
        rate_bps: RATE_BPS,
        one_way_delay: ONE_WAY,
        queue: Queue::Packets(QUEUE_PACKETS),
        ..PathConfig::default()
    };
    // The Reno transfers start first and run past the vat sender's end.
    let reno_secs = secs + 4;
    let bytes = RATE_BPS / 8 * reno_secs;
    let jobs: Vec<Job> = (0..RENO_FLOWS)
        .map(|_| {
            Job::now(bytes, Transport::linux("reno")).for_at_most(Duration::from_secs(reno_secs))
        })
        .collect();
    let rig = Rig::build(cfg, HostOptions::sack(true))?;
    let (reno, cases, window) = std::thread::scope(|s| -> Result<_> {
        let reno = s.spawn(|| rig.run(&jobs, None));
        std::thread::sleep(Duration::from_secs(2));
        // drop-from-head and FIFO on one CM (one macroflow, shared
        // equally), plain UDP beside them.
        let handles = [
            vat_group(&rig, &[0, 1], secs)?,
            vat_group(&rig, &[2], secs)?,
        ];
        let mut cases = Vec::new();
        let mut window = WindowSamples::default();
        for h in handles {
            let (c, w) = h.join().map_err(|_| RealError::Thread("vat case"))??;
            cases.extend(c);
            if w.samples > 0 {
                window = w;
            }
            bar.tick();
        }
        let reno = reno.join().map_err(|_| RealError::Thread("reno"))??;
        Ok((reno, cases, window))
    })?;
    rig.finish()?;
    let reno_bps: Vec<f64> = reno
        .iter()
        .map(|s| s.bytes as f64 * 8.0 / s.seconds.max(1e-3))
        .collect();
    let reno_mean = reno_bps.iter().sum::<f64>() / reno_bps.len().max(1) as f64;
    let wire_bps = |c: &CaseResult| c.receiver.frames as f64 * WIRE_BYTES * 8.0 / secs as f64;
    let (head, fifo, raw) = (&cases[0], &cases[1], &cases[2]);
    let p95_ratio = head.receiver.delay.p95_ms / fifo.receiver.delay.p95_ms.max(1e-9);
    let head_to_reno = wire_bps(head) / reno_mean.max(1.0);
    let head_to_fifo = wire_bps(head) / wire_bps(fifo).max(1.0);
    // The part of the delay the buffer's policy decides (reported, not
    // judged): the end-to-end ratio also carries the network's queue,
    // which both senders meet alike.
    let buffer_p95_ratio = head.sender.p95_buffer_ms / fifo.sender.p95_buffer_ms.max(1e-9);
    // What a full drop-from-head buffer's head waited, on average: the
    // buffer's frames at the rate the policer let frames in. Drop-from-head
    // bounds its wait by this span however long the CM stalls; a FIFO's
    // wait grows with the stalls.
    let admitted = head.sender.made.saturating_sub(head.sender.policed).max(1);
    let span_ms = BUFFER as f64 * secs as f64 * 1e3 / admitted as f64;
    let mut csv = String::from("case,t_s,frames,mean_delay_ms\n");
    for ((label, _, _), c) in CASES.iter().zip(&cases) {
        for s in &c.receiver.seconds {
            let _ = writeln!(csv, "{label},{},{},{:.1}", s.t, s.frames, s.mean_delay_ms);
        }
    }
    let series = CASES
        .iter()
        .zip(&cases)
        .map(|((label, _, _), c)| Series {
            label: (*label).into(),
            points: c
                .receiver
                .seconds
                .iter()
                .filter(|s| s.frames > 0)
                .map(|s| (f64::from(s.t), s.mean_delay_ms))
                .collect(),
            style: Style::Line,
        })
        .collect();
    let case_json: Vec<_> = CASES
        .iter()
        .zip(&cases)
        .map(|((label, _, _), c)| {
            json!({
                "case": label,
                "delay_mean_ms": c.receiver.delay.mean_ms,
                "delay_p95_ms": c.receiver.delay.p95_ms,
                "delay_max_ms": c.receiver.delay.max_ms,
                "jitter_ms": c.receiver.jitter_ms,
                "loss": c.receiver.loss,
                "frames": c.receiver.frames,
                "wire_bps": wire_bps(c),
                "sender": c.sender,
            })
        })
        .collect();
    let row = |l: &str, c: &CaseResult| {
        format!(
            "{l}: delay mean {:.0} ms, p95 {:.0} ms; loss {:.1}%; {:.0} kbit/s",
            c.receiver.delay.mean_ms,
            c.receiver.delay.p95_ms,
            c.receiver.loss * 100.0,
            wire_bps(c) / 1e3
        )
    };
    Ok(Output {
        name: "real-vat".into(),
        csv,
        plot: Plot {
            title: format!("vat beside {RENO_FLOWS} Reno transfers: one-way delay per second"),
            x_label: "time (s)".into(),
            y_label: "mean one-way delay (ms)".into(),
            series,
        },
        metrics: json!({
            "cases": case_json,
            "head_p95_to_fifo_p95": p95_ratio,
            "head_buffer_p95_to_fifo_buffer_p95": buffer_p95_ratio,
            "buffer_span_ms": span_ms,
            "head_buffer_p95_to_span": head.sender.p95_buffer_ms / span_ms,
            "fifo_buffer_p95_to_span": fifo.sender.p95_buffer_ms / span_ms,
            "head_rate_to_reno_mean": head_to_reno,
            "head_rate_to_fifo_rate": head_to_fifo,
            "cm_window": window,
            "reno_bps": reno_bps,
            "reno_mean_bps": reno_mean,
            "seconds": secs,
        }),
        paper: json!({"claim": "drop-from-head keeps vat's delay low where FIFO buffering gives long delay and delay variation (§3.6)"}),
        checks: vec![
            Check {
                metric: "head_p95_to_fifo_p95".into(),
                ours: p95_ratio,
                paper: "FIFO buffering: long delay (§3.6)".into(),
                accept: "<= 0.5".into(),
                pass: p95_ratio <= 0.5,
            },
            Check {
                metric: "head_rate_to_fifo_rate".into(),
                ours: head_to_fifo,
                paper: "no more than the CM's share".into(),
                accept: "<= 1.25".into(),
                pass: head_to_fifo <= 1.25,
            },
        ],
        notes: vec![
            format!("Path: {} kbit/s, {} ms one way, a DropTail queue of {QUEUE_PACKETS} × 1500 bytes; {RENO_FLOWS} Linux Reno transfers (SACK) for {reno_secs} s, and the three vat senders at once for {secs} s from 2 s in: drop-from-head and FIFO on one embedded CM (one macroflow, AIMD, feedback from the receivers' CC-UDP acknowledgements), plain UDP beside them.", RATE_BPS / 1000, ONE_WAY.as_millis()),
            format!("vat: 160-byte frames every 20 ms (64 kbit/s; {WIRE_BYTES} bytes on the wire); buffer {BUFFER} frames; the CM senders police to their CM's rate averaged over 2 s."),
            "Delay counts from the frame's making to its arrival: policer, buffer, CM, network. The network's queue (up to 240 ms here) is in all three; the buffers differ by what they keep when the CM cannot send: a full drop-from-head buffer holds the newest 8 frames the policer passed, a full FIFO the oldest, for 8 of the CM's send intervals. head_buffer_p95_to_fifo_buffer_p95 (reported, not judged) compares the senders' 95th-percentile waits in the buffer alone (sender.p95_buffer_ms). buffer_span_ms: the buffer's frames at the rate the policer let frames in; *_buffer_p95_to_span: each sender's 95th-percentile wait in the buffer over it (drop-from-head's stays near 1, FIFO's grows with the CM's stalls).".into(),
            "head_rate_to_fifo_rate: both CM senders share one macroflow; drop-from-head must not buy its delay by sending more. head_rate_to_reno_mean (reported, not judged): the CM counts bytes, so a 204-byte-packet flow may send as many bytes as a Reno flow of 1500-byte packets, which on this path times out often.".into(),
        ],
        summary: vec![
            row("drop-from-head", head),
            row("FIFO", fifo),
            row("raw UDP", raw),
            format!("Reno flows: mean {:.0} kbit/s", reno_mean / 1e3),
        ],
    })
}
