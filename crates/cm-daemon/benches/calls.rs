//! The daemon's cost per ALF packet, against the core's own cost for the
//! same calls, in one run.
//!
//! One packet of the libcm API benchmark's per-call ALF sender
//! (`cargo bench -p libcm --bench api_overhead`, variant `alf/shm`) is three
//! calls in two frames: `cm_update` for the acknowledgement, then
//! `cm_request` and the `cm_notify` of the datagram the grant let out. Its
//! daemon takes each hand-off's frames in one go, about 55 packets' worth
//! (`perf sched timehist` of that benchmark), then routes the core's grants
//! into one frame for the client. This benchmark drives the daemon's frame
//! handling (`Harness`: decode, checks, the core, routing and encoding the
//! grants; no rings or system calls) with exactly that traffic, and the
//! core alone with the same calls, so the difference is what the daemon
//! adds per packet on top of the CM itself.
//!
//! `cargo bench -p cm-daemon --bench calls` prints ns per packet for both
//! (the median of 9 rounds of 200,000 packets) and their ratio.
//! `CM_CALLS_COLD_KB=n` writes n KiB of other memory between hand-offs
//! (untimed), as the sender's network stack does between the real
//! daemon's turns, to show what a cold cache costs the daemon.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::hint::black_box;
use std::time::Instant as StdInstant;

use cm_core::{
    Bytes, Config, CongestionManager, Duration, Event, Feedback, FlowId, Instant, OpenParams,
};
use cm_daemon::{DaemonConfig, Harness};
use cm_ipc::{Frame, ToClient, ToDaemon};

/// Datagram size, as in the API benchmark's table row.
const SIZE: u64 = 1200;
/// Packets per hand-off between client and daemon.
const HANDOFF: u64 = 55;
/// Packets per round, and rounds.
const PACKETS: u64 = 200_000;
const ROUNDS: usize = 9;
/// Time between packets (the API benchmark's ~4 µs).
const GAP: Duration = Duration::from_micros(4);
const RTT: Duration = Duration::from_micros(50);

fn frame(msgs: &[ToDaemon]) -> Vec<u8> {
    let mut f = Frame::new();
    for m in msgs {
        f.push(m);
    }
    f.finish()
}

/// ns per packet through the daemon's frame handling.
fn daemon_round() -> f64 {
    let mut h = Harness::new(DaemonConfig::default()).unwrap();
    let mut now = Instant::ZERO;
    let token = h.connect(0, 1, now).unwrap().unwrap();
    h.frame(
        token,
        &frame(&[ToDaemon::Hello {
            version: cm_ipc::VERSION,
        }]),
        now,
    );
    h.frame(
        token,
        &frame(&[ToDaemon::Open {
            seq: 1,
            src: None,
            dst: "127.0.0.2:9".parse().unwrap(),
        }]),
        now,
    );
    let flow = h
        .output(token)
        .unwrap()
        .into_iter()
        .find_map(|m| match m {
            ToClient::Opened { flow, .. } => Some(flow),
            _ => None,
        })
        .unwrap();
    // The frames libcm sends, encoded once (the client's cost is not
    // the daemon's).
    let update = frame(&[ToDaemon::Update {
        flow,
        nsent: SIZE,
        nrecd: SIZE,
        loss: cm_core::LossMode::None,
        rtt_us: Some(RTT.as_micros()),
        lost_age_us: None,
    }]);
    let request_notify = frame(&[
        ToDaemon::Request { flow, k: 1 },
        ToDaemon::Notify { flow, nsent: SIZE },
    ]);
    // The first window's requests, so that grants flow from the start.
    for _ in 0..HANDOFF {
        h.frame(token, &frame(&[ToDaemon::Request { flow, k: 1 }]), now);
    }
    h.advance(now);
    h.discard_output(token);
    let mut junk: Option<Vec<u8>> = std::env::var("CM_CALLS_COLD_KB")
        .ok()
        .and_then(|k| k.parse::<usize>().ok())
        .map(|k| vec![1u8; k * 1024]);
    let mut cold = std::time::Duration::ZERO;
    let t0 = StdInstant::now();
    let mut out = 0usize;
    for i in 0..PACKETS {
        now += GAP;
        h.frame(token, &update, now);
        h.frame(token, &request_notify, now);
        if i % HANDOFF == HANDOFF - 1 {
            h.advance(now);
            out += h.discard_output(token);
            if let Some(junk) = junk.as_mut() {
                // One write per cache line, not timed.
                let t = StdInstant::now();
                for (k, b) in junk.iter_mut().enumerate().step_by(64) {
                    *b = b.wrapping_add(k as u8);
                }
                cold += t.elapsed();
            }
        }
    }
    let ns = (t0.elapsed() - cold).as_secs_f64() * 1e9 / PACKETS as f64;
    black_box(&junk);
    assert!(out > 0, "the daemon granted nothing");
    black_box(out);
    ns
}

/// ns per packet for the same calls on the core alone.
fn core_round() -> f64 {
    let mut cm = CongestionManager::new(Config::default()).unwrap();
    let mut now = Instant::ZERO;
    let client = cm.register_client(now).unwrap();
    let flow: FlowId = cm
        .open(now, client, OpenParams::to("127.0.0.2:9".parse().unwrap()))
        .unwrap();
    for _ in 0..HANDOFF {
        cm.request(now, flow).unwrap();
    }
    while cm.poll_event().is_some() {}
    let t0 = StdInstant::now();
    let mut grants = 0u64;
    for i in 0..PACKETS {
        now += GAP;
        cm.update(now, flow, Feedback::acked(SIZE, RTT)).unwrap();
        cm.request(now, flow).unwrap();
        cm.notify(now, flow, Bytes(SIZE)).unwrap();
        if i % HANDOFF == HANDOFF - 1 {
            if cm.poll_timeout().is_some_and(|t| t <= now) {
                cm.handle_timeout(now);
            }
            while let Some(ev) = cm.poll_event() {
                if let Event::Grant { bytes, .. } = ev {
                    grants += bytes.get();
                }
            }
        }
    }
    let ns = t0.elapsed().as_secs_f64() * 1e9 / PACKETS as f64;
    assert!(grants > 0, "the core granted nothing");
    black_box(grants);
    ns
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    // `cargo bench` passes --bench; nothing else to parse.
    let (mut d, mut c) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        c.push(core_round());
        d.push(daemon_round());
    }
    let (d, c) = (median(d), median(c));
    println!(
        "per ALF packet (update + request + notify, {HANDOFF} packets per hand-off), \
         median of {ROUNDS} rounds of {PACKETS}:"
    );
    println!("  core alone          {c:>7.1} ns");
    println!(
        "  daemon frames       {d:>7.1} ns  ({:.2}x the core)",
        d / c
    );
    println!("  daemon's own share  {:>7.1} ns", d - c);
}
