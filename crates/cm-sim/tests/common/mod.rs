//! Shared helpers for the integration tests.
#![allow(dead_code, missing_docs, clippy::unwrap_used)]

use cm_core::{Duration, Instant};
use cm_sim::{
    CbrSource, Dumbbell, DumbbellConfig, FlowTag, LinkConfig, QueueLimit, RawPayload, Sim, Sink,
    dumbbell,
};

pub fn us(t: u64) -> Instant {
    Instant::from_micros(t)
}

pub fn access() -> LinkConfig {
    LinkConfig::new(100_000_000, Duration::from_millis(1), QueueLimit::Unlimited)
}

/// A dumbbell with `n` hosts per side and the given bottleneck (both directions).
pub fn bell(n: usize, bottleneck: LinkConfig) -> Dumbbell {
    let mut c = DumbbellConfig::symmetric(n, bottleneck);
    c.access = access();
    dumbbell(&c).unwrap()
}

/// `n` CBR flows left[i] -> right[i], flow tag i+1, each sending `count`
/// packets of `len` bytes every `interval_us`.
pub fn cbr_sim(
    d: Dumbbell,
    seed: u64,
    len: u32,
    interval_us: u64,
    count: u64,
) -> (Sim<RawPayload>, Vec<cm_sim::NodeId>) {
    let mut sim = Sim::new(d.topology, seed).unwrap();
    for (i, (&l, &r)) in d.left_hosts.iter().zip(&d.right_hosts).enumerate() {
        let src = CbrSource::with_interval(
            r,
            FlowTag(i as u32 + 1),
            RawPayload { len },
            Duration::from_micros(interval_us),
            us(i as u64 * 7),
            us(i as u64 * 7 + interval_us * count),
        );
        sim.attach(l, src).unwrap();
        sim.attach(r, Sink::recording()).unwrap();
    }
    (sim, d.right_hosts)
}
