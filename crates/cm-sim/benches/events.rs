//! Events per second of the engine on one core: a dumbbell (sigcomm1999
//! Fig 7) with 8 CBR flows offering 2x a 100 Mbit/s bottleneck.
//!
//! Prints `events/s` and, as a baseline measured in the same run, the rate
//! of bare `BinaryHeap` push/pop pairs on the same number of entries, so the
//! ratio shows the engine's overhead over its event queue alone.
#![allow(missing_docs, clippy::unwrap_used)]

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::hint::black_box;
use std::time::Instant as WallClock;

use cm_core::{Duration, Instant};
use cm_sim::{
    CbrSource, DumbbellConfig, FlowTag, LinkConfig, QueueLimit, RawPayload, Sim, Sink, dumbbell,
};

const FLOWS: usize = 8;

fn run_sim(secs: u64) -> (u64, f64) {
    let bottleneck = LinkConfig::new(
        100_000_000,
        Duration::from_millis(20),
        QueueLimit::Packets(100),
    );
    let mut cfg = DumbbellConfig::symmetric(FLOWS, bottleneck);
    cfg.access = LinkConfig::new(
        1_000_000_000,
        Duration::from_millis(1),
        QueueLimit::Packets(1000),
    );
    let d = dumbbell(&cfg).unwrap();
    let mut sim = Sim::<RawPayload>::new(d.topology, 1).unwrap();
    let stop = Instant::from_micros(secs * 1_000_000);
    for (i, (&l, &r)) in d.left_hosts.iter().zip(&d.right_hosts).enumerate() {
        // 1000 B every 320 µs = 25 Mbit/s per flow, 200 Mbit/s in total.
        let src = CbrSource::with_interval(
            r,
            FlowTag(i as u32),
            RawPayload { len: 1000 },
            Duration::from_micros(320),
            Instant::from_micros(i as u64 * 13),
            stop,
        );
        sim.attach(l, src).unwrap();
        sim.attach(r, Sink::new()).unwrap();
    }
    let t0 = WallClock::now();
    sim.run_until_idle();
    let wall = t0.elapsed().as_secs_f64();
    let util = sim.link_stats(d.bottleneck).unwrap().utilization();
    assert!(util > 0.95, "bottleneck not saturated: {util}");
    (sim.events_processed(), wall)
}

/// Bare heap of (time, seq, payload) with a steady population of `live`.
fn run_heap(ops: u64, live: u64) -> f64 {
    let mut h = BinaryHeap::new();
    let mut seq = 0u64;
    for i in 0..live {
        h.push(Reverse((i * 7, i, 0u32)));
    }
    let t0 = WallClock::now();
    for _ in 0..ops {
        let Reverse((t, _, x)) = h.pop().unwrap();
        seq += 1;
        h.push(Reverse((t + 1 + (seq % 1000), seq, black_box(x))));
    }
    black_box(&h);
    t0.elapsed().as_secs_f64()
}

fn main() {
    let secs = std::env::var("CM_SIM_BENCH_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(40);
    let _ = run_sim(2); // warm-up
    let (events, wall) = run_sim(secs);
    let eps = events as f64 / wall;
    let heap_wall = run_heap(events, 300);
    let heap_eps = events as f64 / heap_wall;
    println!(
        "cm-sim dumbbell, {FLOWS} CBR flows at 2x a 100 Mbit/s bottleneck, {secs} s simulated"
    );
    println!("  engine:   {events} events in {wall:.3} s = {eps:.0} events/s");
    println!("  baseline: bare BinaryHeap pop+push = {heap_eps:.0} ops/s");
    println!("  ratio engine/baseline = {:.3}", eps / heap_eps);
}
