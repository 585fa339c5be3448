//! Reordering and duplication on links: the fractions match the configured
//! probabilities (binomial bounds), copies follow their original, and links
//! without them leave every run exactly as before.
#![allow(clippy::unwrap_used)]

mod common;

use cm_core::Duration;
use cm_sim::{
    FlowTag, LinkConfig, QueueLimit, RawPayload, Sim, Sink, TraceKind, TraceMode, TraceRecord,
};
use common::{bell, cbr_sim};

/// Packets sent in the statistical tests.
const N: u64 = 10_000;

/// `n·p ± z·sqrt(n·p·(1−p))`, the normal approximation of a binomial's
/// central interval (z = 4.5: a false failure once in ~150,000 seeds).
fn binomial_bounds(n: u64, p: f64) -> (f64, f64) {
    let (n, z) = (n as f64, 4.5);
    let sd = (n * p * (1.0 - p)).sqrt();
    (n * p - z * sd, n * p + z * sd)
}

/// 10 Mbit/s, 10 ms bottleneck with a large queue: the 1000-byte packets
/// every 1 ms below never queue, and a 5 ms hold lets five later ones pass.
fn bottleneck() -> LinkConfig {
    LinkConfig::new(
        10_000_000,
        Duration::from_millis(10),
        QueueLimit::Packets(1000),
    )
}

/// Runs `N` CBR packets over a one-pair dumbbell with `bottleneck`; returns
/// the receiver's arrivals (time, packet id) and the simulation.
fn run(bottleneck: LinkConfig, seed: u64) -> (Vec<(u64, u64)>, Sim<RawPayload>) {
    let d = bell(1, bottleneck);
    let (mut sim, right) = cbr_sim(d, seed, 1000, 1000, N);
    sim.run_until_idle();
    let sink = sim.host::<Sink>(right[0]).unwrap();
    let arrivals = sink
        .arrivals
        .iter()
        .map(|&(t, id, _)| (t.as_micros(), id))
        .collect();
    (arrivals, sim)
}

/// (arrivals below the highest id seen before, copies of an id seen before).
fn out_of_order_and_duplicates(arrivals: &[(u64, u64)]) -> (u64, u64) {
    let mut seen = std::collections::BTreeSet::new();
    let (mut late, mut dup, mut max) = (0, 0, None);
    for &(_, id) in arrivals {
        if !seen.insert(id) {
            dup += 1;
        } else if max.is_some_and(|m| id < m) {
            late += 1;
        }
        max = max.max(Some(id));
    }
    (late, dup)
}

#[test]
fn reorder_fraction_matches_the_probability() {
    let p = 0.05;
    let (lo, hi) = binomial_bounds(N, p);
    for seed in 1..=5 {
        let cfg = bottleneck().with_reorder(p, Duration::from_millis(5));
        let (arrivals, sim) = run(cfg, seed);
        assert_eq!(arrivals.len() as u64, N, "nothing lost or copied");
        let (late, dup) = out_of_order_and_duplicates(&arrivals);
        assert_eq!(dup, 0);
        let held = sim.link_stats(cm_sim::LinkId(0)).unwrap().reordered;
        // Every held packet is overtaken (a packet leaves every 1 ms < 5 ms),
        // except possibly the last few sent.
        println!("seed {seed}: {late} of {N} out of order ({held} held back)");
        assert!(
            late <= held && held - late <= 5,
            "seed {seed}: {late} late of {held} held"
        );
        assert!(
            (lo..=hi).contains(&(late as f64)),
            "seed {seed}: {late} of {N} out of order, expected [{lo:.0}, {hi:.0}]"
        );
    }
}

#[test]
fn duplicate_fraction_matches_the_probability() {
    let p = 0.02;
    let (lo, hi) = binomial_bounds(N, p);
    for seed in 1..=5 {
        let (arrivals, sim) = run(bottleneck().with_duplicate(p), seed);
        let (late, dup) = out_of_order_and_duplicates(&arrivals);
        println!("seed {seed}: {dup} copies of {N}");
        assert_eq!(late, 0, "duplication alone does not reorder");
        assert!(
            (lo..=hi).contains(&(dup as f64)),
            "seed {seed}: {dup} copies of {N}, expected [{lo:.0}, {hi:.0}]"
        );
        assert_eq!(arrivals.len() as u64, N + dup);
        let link = sim.link_stats(cm_sim::LinkId(0)).unwrap();
        assert_eq!(link.duplicated, dup);
        let flow = sim.flow_stats(FlowTag(1)).unwrap();
        assert_eq!(flow.duplicated, dup);
        assert_eq!(flow.sent_packets + flow.duplicated, flow.delivered_packets);
        // A copy arrives right after its original: it leaves the bottleneck
        // at the same time and then waits one serialization on the 100
        // Mbit/s access link (80 µs for 1000 bytes).
        let mut seen = std::collections::BTreeSet::new();
        for (i, &(t, id)) in arrivals.iter().enumerate() {
            if !seen.insert(id) {
                assert_eq!(arrivals[i - 1], (t - 80, id), "copy {i}");
            }
        }
    }
}

#[test]
fn reorder_and_duplicate_together_are_deterministic_and_conserve_packets() {
    // A queue of 5 packets on a 2x-overloaded link: drops, holds and copies
    // at once.
    let cfg = LinkConfig::new(1_000_000, Duration::from_millis(10), QueueLimit::Packets(5))
        .with_loss(0.01)
        .with_reorder(0.05, Duration::from_millis(20))
        .with_duplicate(0.02);
    let trace = |seed| {
        let d = bell(1, cfg);
        let (mut sim, _) = cbr_sim(d, seed, 1000, 4000, 2000);
        sim.set_trace(TraceMode::Collect);
        sim.run_until_idle();
        let f = sim.flow_stats(FlowTag(1)).unwrap().clone();
        assert!(f.duplicated > 0 && f.dropped_random > 0 && f.dropped_overflow > 0);
        assert_eq!(
            f.sent_packets + f.duplicated,
            f.delivered_packets + f.dropped()
        );
        let l = sim.link_stats(cm_sim::LinkId(0)).unwrap();
        assert!(l.reordered > 0 && l.duplicated == f.duplicated);
        sim.take_trace()
    };
    let a: Vec<TraceRecord> = trace(9);
    assert_eq!(a, trace(9));
    assert_ne!(a, trace(10));
}

/// Trace of a lossy run: the only RNG user is the loss draw.
fn lossy_trace(cfg: LinkConfig) -> (Vec<TraceRecord>, u64) {
    let d = bell(2, cfg);
    let (mut sim, _) = cbr_sim(d, 3, 1000, 3000, 1000);
    sim.set_trace(TraceMode::Collect);
    sim.run_until_idle();
    let events = sim.events_processed();
    let next = sim.rng().next_u64();
    let mut t = sim.take_trace();
    t.push(TraceRecord {
        time: cm_core::Instant::from_micros(next),
        ..t[0]
    });
    (t, events)
}

#[test]
fn zero_probabilities_leave_runs_identical() {
    let base = LinkConfig::new(1_000_000, Duration::from_millis(10), QueueLimit::Packets(8))
        .with_loss(0.02);
    let zero = base
        .with_reorder(0.0, Duration::from_millis(7))
        .with_duplicate(0.0);
    assert_eq!(
        LinkConfig {
            reorder_delay: Duration::ZERO,
            ..zero
        },
        base
    );
    let (a, ea) = lossy_trace(base);
    let (b, eb) = lossy_trace(zero);
    assert_eq!(ea, eb, "same number of events");
    // Same trace and same RNG state afterwards (the last record's time).
    assert_eq!(a, b);
    assert!(a.iter().any(|r| matches!(r.kind, TraceKind::Drop(_))));
}
