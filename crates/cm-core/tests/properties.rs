//! Property tests over random sequences of API calls and times
//! (`PROPTEST_CASES`, 10,000 per property in CI via scripts/test.sh).
//!
//! Invariants, checked after every call:
//! - the window never falls below its one-MTU floor (sigcomm1999 §4.1);
//! - outstanding bytes are conserved: a macroflow's in-flight and granted
//!   bytes are exactly the sums over its flows, and each flow's in-flight
//!   bytes are what it notified minus what feedback resolved;
//! - grants never exceed what the window and the shaper allow;
//! - weighted shares converge to the weights (sigcomm1999 §4.6);
//! - every controller (AIMD, the binomial presets window- and rate-based,
//!   ISCC with and without a capacity, TFRC) keeps these and reports a
//!   positive rate (iscc §III: rates never reach zero);
//! - no input, however malformed, panics.

#![allow(clippy::unwrap_used)]

use std::collections::HashMap;

use cm_core::{
    Bytes, Config, CongestionManager, Duration, Event, Feedback, FlowId, Instant, LossMode,
    MacroflowId, OpenParams, Thresholds,
};
use proptest::prelude::*;

const MTU: u64 = 1000;

/// One API call with raw, possibly nonsensical, arguments. Flow and
/// macroflow arguments index into what was opened so far (wrapping), so
/// closed and reclaimed ids are exercised too.
#[derive(Clone, Debug)]
enum Op {
    Open {
        host: u8,
        port: u16,
    },
    Close(usize),
    Request {
        flow: usize,
        k: u32,
    },
    /// Notify the oldest grant: `exact` sends what was granted, otherwise `bytes`.
    Notify {
        flow: usize,
        exact: bool,
        bytes: u64,
    },
    Update {
        flow: usize,
        nsent: u64,
        nrecd: u64,
        loss: u8,
        rtt_us: Option<u64>,
    },
    Advance(u64),
    SetMacroflow {
        flow: usize,
        target: Option<usize>,
    },
    SetWeight {
        flow: usize,
        weight: u32,
    },
    Thresholds {
        flow: usize,
        down: f64,
        up: f64,
    },
    RateUpdates {
        flow: usize,
        on: bool,
    },
    Query(usize),
    NewClient,
    CloseClient(usize),
    /// Switch the flow's macroflow to controller `which` (see [`controller`]).
    SetController {
        flow: usize,
        which: u8,
    },
    /// A capacity sample or setting for the flow's macroflow, bit/s.
    Capacity {
        flow: usize,
        bps: u64,
        sample: bool,
    },
}

fn op() -> impl Strategy<Value = Op> {
    let idx = 0usize..16;
    prop_oneof![
        3 => (0u8..4, 1u16..4).prop_map(|(host, port)| Op::Open { host, port }),
        1 => idx.clone().prop_map(Op::Close),
        6 => (idx.clone(), prop_oneof![9 => Just(1u32), 1 => 0u32..80]).prop_map(|(flow, k)| Op::Request { flow, k }),
        6 => (idx.clone(), prop::bool::weighted(0.8), prop_oneof![0u64..5_000, Just(u64::MAX), Just(1u64 << 41)])
            .prop_map(|(flow, exact, bytes)| Op::Notify { flow, exact, bytes }),
        6 => (idx.clone(), 0u64..20_000, 0u64..20_000, 0u8..6, prop::option::of(prop_oneof![0u64..400_000, Just(u64::MAX)]))
            .prop_map(|(flow, nsent, nrecd, loss, rtt_us)| Op::Update { flow, nsent, nrecd, loss, rtt_us }),
        5 => prop_oneof![0u64..2_000, 0u64..2_000_000, Just(700_000_000u64)].prop_map(Op::Advance),
        1 => (idx.clone(), prop::option::of(idx.clone())).prop_map(|(flow, target)| Op::SetMacroflow { flow, target }),
        1 => (idx.clone(), 0u32..70_000).prop_map(|(flow, weight)| Op::SetWeight { flow, weight }),
        1 => (idx.clone(), prop_oneof![Just(f64::NAN), 0.0f64..4.0], 0.5f64..4.0)
            .prop_map(|(flow, down, up)| Op::Thresholds { flow, down, up }),
        1 => (idx.clone(), any::<bool>()).prop_map(|(flow, on)| Op::RateUpdates { flow, on }),
        1 => idx.clone().prop_map(Op::Query),
        1 => Just(Op::NewClient),
        1 => (0usize..4).prop_map(Op::CloseClient),
        1 => (idx.clone(), 0u8..7).prop_map(|(flow, which)| Op::SetController { flow, which }),
        1 => (idx.clone(), prop_oneof![0u64..100, 1_000u64..100_000_000, Just(u64::MAX)], any::<bool>())
            .prop_map(|(flow, bps, sample)| Op::Capacity { flow, bps, sample }),
    ]
}

/// The test's own record of what each flow was granted, sent and resolved.
#[derive(Default)]
struct Model {
    /// Unanswered grants per flow, oldest first.
    grants: HashMap<FlowId, Vec<Bytes>>,
    /// Notified minus resolved, per flow.
    in_flight: HashMap<FlowId, u64>,
}

struct Harness {
    cm: CongestionManager,
    now: Instant,
    clients: Vec<cm_core::ClientId>,
    flows: Vec<FlowId>,
    model: Model,
}

/// The controllers the core ships, by index.
fn controller(which: u8) -> cm_core::controller::ControllerConfig {
    let spec = match which % 7 {
        0 => "aimd",
        1 => "iiad:mode=window",
        2 => "sqrt",
        3 => "aimd:mode=rate,mtu_rtt=30k",
        4 => "iscc",
        5 => "iscc:capacity=2M",
        _ => "tfrc:s=180",
    };
    spec.parse().unwrap()
}

impl Harness {
    fn new() -> Self {
        Self::with(cm_core::controller::ControllerConfig::default())
    }

    fn with(controller: cm_core::controller::ControllerConfig) -> Self {
        let cfg = Config {
            mtu: Bytes(MTU),
            client_timeout: Some(Duration::from_secs(30)),
            controller,
            ..Config::default()
        };
        let mut cm = CongestionManager::new(cfg).unwrap();
        let c = cm.register_client(Instant::ZERO).unwrap();
        Harness {
            cm,
            now: Instant::ZERO,
            clients: vec![c],
            flows: Vec::new(),
            model: Model::default(),
        }
    }

    fn flow(&self, i: usize) -> Option<FlowId> {
        (!self.flows.is_empty()).then(|| self.flows[i % self.flows.len()])
    }

    fn macroflow(&self, i: usize) -> Option<MacroflowId> {
        let ids = self.cm.macroflow_ids();
        (!ids.is_empty()).then(|| ids[i % ids.len()])
    }

    /// Apply one op; returns the macroflows that issued grants during it.
    fn apply(&mut self, op: &Op) -> Vec<MacroflowId> {
        let now = self.now;
        match *op {
            Op::Open { host, port } => {
                let dst = format!("192.0.2.{host}:{port}").parse().unwrap();
                let client = *self.clients.last().unwrap();
                if let Ok(f) = self.cm.open(now, client, OpenParams::to(dst)) {
                    self.flows.push(f);
                }
            }
            Op::Close(i) => {
                if let Some(f) = self.flow(i) {
                    if self.cm.close(now, f).is_ok() {
                        self.forget(f);
                    }
                }
            }
            Op::Request { flow, k } => {
                if let Some(f) = self.flow(flow) {
                    let _ = self.cm.request_mtus(now, f, k);
                }
            }
            Op::Notify { flow, exact, bytes } => {
                if let Some(f) = self.flow(flow) {
                    let grant = self.model.grants.get(&f).and_then(|g| g.first().copied());
                    let n = match (exact, grant) {
                        (true, Some(g)) => g,
                        _ => Bytes(bytes),
                    };
                    if self.cm.notify(now, f, n).is_ok() {
                        if let Some(g) = self.model.grants.get_mut(&f) {
                            if !g.is_empty() {
                                g.remove(0);
                            }
                        }
                        *self.model.in_flight.entry(f).or_default() += n.get();
                    }
                }
            }
            Op::Update {
                flow,
                nsent,
                nrecd,
                loss,
                rtt_us,
            } => {
                if let Some(f) = self.flow(flow) {
                    let loss = match loss {
                        0 | 5 => LossMode::None,
                        1 => LossMode::Transient,
                        2 => LossMode::Persistent,
                        3 => LossMode::Ecn,
                        _ => LossMode::NotCongestion,
                    };
                    let fb = Feedback {
                        nsent: Bytes(nsent),
                        nrecd: Bytes(nrecd),
                        loss,
                        rtt: rtt_us.map(Duration::from_micros),
                        lost_sent: None,
                    };
                    if self.cm.update(now, f, fb).is_ok() {
                        let inf = self.model.in_flight.entry(f).or_default();
                        *inf -= nsent.min(*inf);
                    }
                }
            }
            Op::Advance(us) => {
                self.now += Duration::from_micros(us);
                self.cm.handle_timeout(self.now);
            }
            Op::SetMacroflow { flow, target } => {
                if let Some(f) = self.flow(flow) {
                    let t = target.and_then(|t| self.macroflow(t));
                    let _ = self.cm.set_macroflow(now, f, t);
                }
            }
            Op::SetController { flow, which } => {
                if let Some(f) = self.flow(flow) {
                    if let Ok(mf) = self.cm.macroflow_of(f) {
                        let _ = self.cm.set_controller(now, mf, &controller(which));
                    }
                }
            }
            Op::Capacity { flow, bps, sample } => {
                if let Some(f) = self.flow(flow) {
                    let rate = cm_core::Rate::from_bits_per_sec(bps);
                    if sample {
                        let _ = self.cm.capacity_sample(now, f, rate);
                    } else if let Ok(mf) = self.cm.macroflow_of(f) {
                        let _ = self.cm.set_capacity(now, mf, Some(rate));
                    }
                }
            }
            Op::SetWeight { flow, weight } => {
                if let Some(f) = self.flow(flow) {
                    let _ = self.cm.set_weight(now, f, weight);
                }
            }
            Op::Thresholds { flow, down, up } => {
                if let Some(f) = self.flow(flow) {
                    let t = Thresholds {
                        rate_down: down,
                        rate_up: up,
                        rtt_down: up,
                        rtt_up: down,
                    };
                    let _ = self.cm.set_thresholds(now, f, t);
                }
            }
            Op::RateUpdates { flow, on } => {
                if let Some(f) = self.flow(flow) {
                    let _ = self.cm.set_rate_updates(now, f, on);
                }
            }
            Op::Query(i) => {
                if let Some(f) = self.flow(i) {
                    if let Ok(q) = self.cm.query(f) {
                        assert!(q.loss.is_none_or(|l| (0.0..=1.0).contains(&l)));
                    }
                }
            }
            Op::NewClient => {
                if let Ok(c) = self.cm.register_client(now) {
                    self.clients.push(c);
                }
            }
            Op::CloseClient(i) => {
                let c = self.clients[i % self.clients.len()];
                if let Ok(flows) = self.cm.client_flows(c).map(<[FlowId]>::to_vec) {
                    if self.cm.close_client(now, c).is_ok() {
                        for f in flows {
                            self.forget(f);
                        }
                    }
                }
                if self.clients.len() > 1 {
                    self.clients.retain(|&x| x != c);
                }
            }
        }
        self.drain_events()
    }

    fn forget(&mut self, f: FlowId) {
        self.model.grants.remove(&f);
        self.model.in_flight.remove(&f);
    }

    fn drain_events(&mut self) -> Vec<MacroflowId> {
        let mut granted = Vec::new();
        while let Some(ev) = self.cm.poll_event() {
            match ev {
                Event::Grant { flow, bytes } => {
                    assert!(bytes.get() >= MTU && bytes.get() % MTU == 0, "{bytes}");
                    self.model.grants.entry(flow).or_default().push(bytes);
                    // The flow may have been reclaimed later in the same batch.
                    if let Ok(mf) = self.cm.macroflow_of(flow) {
                        if !granted.contains(&mf) {
                            granted.push(mf);
                        }
                    }
                }
                Event::GrantExpired { flow, bytes } => {
                    // Every unanswered grant up to `bytes` in total lapsed, oldest first.
                    let g = self.model.grants.entry(flow).or_default();
                    let mut left = bytes.get();
                    while left > 0 && !g.is_empty() {
                        left = left.saturating_sub(g.remove(0).get());
                    }
                    assert_eq!(left, 0, "expired more than was granted");
                }
                Event::FlowReclaimed { flow, .. } => self.forget(flow),
                Event::RateUpdate { estimate, .. } => {
                    assert!(estimate.rate.is_some() && estimate.srtt.is_some());
                }
                _ => {}
            }
        }
        granted
    }

    /// Conservation of outstanding bytes and the window floor.
    fn check_invariants(&self, granted: &[MacroflowId]) {
        let mut flow_total = 0;
        for mf in self.cm.macroflow_ids() {
            let m = self.cm.macroflow_info(mf).unwrap();
            assert!(m.window >= m.mtu, "window {} below one MTU", m.window);
            assert!(
                m.rate.is_none_or(|r| r.bytes_per_sec() > 0),
                "{} rate reached zero",
                m.controller
            );
            let (mut inf, mut res) = (0, 0);
            for &f in &m.flows {
                let fi = self.cm.flow_info(f).unwrap();
                assert_eq!(fi.macroflow, mf);
                let expect_inf = self.model.in_flight.get(&f).copied().unwrap_or(0);
                assert_eq!(fi.in_flight.get(), expect_inf, "flow {f} in flight");
                let expect_granted: u64 = self
                    .model
                    .grants
                    .get(&f)
                    .map_or(0, |g| g.iter().map(|b| b.get()).sum());
                assert_eq!(fi.granted.get(), expect_granted, "flow {f} granted");
                inf += fi.in_flight.get();
                res += fi.granted.get();
            }
            assert_eq!(
                m.in_flight.get(),
                inf,
                "macroflow {mf} in flight = sum of flows"
            );
            assert_eq!(
                m.reserved.get(),
                res,
                "macroflow {mf} reserved = sum of grants"
            );
            flow_total += m.flows.len();
            if granted.contains(&mf) {
                // A grant is issued only when the window has room for it
                // (closed loop) and the shaper is out of debt or repays its
                // debt within the pacing slack: the last grant may leave at
                // most its own size plus rate × slack in debt.
                if m.aging_steps == 0 {
                    assert!(
                        m.in_flight + m.reserved <= m.window,
                        "grant beyond the window: {} + {} > {}",
                        m.in_flight,
                        m.reserved,
                        m.window
                    );
                }
                let max_grant = (self.cm.config().max_request_mtus as i64) * MTU as i64;
                let slack = self.cm.config().pacing_slack;
                let lead = m
                    .shaping_rate
                    .map_or(0, |r| r.bytes_in(slack).get() as i64 + 1);
                assert!(
                    m.shaper_credit >= -(max_grant + lead),
                    "shaper debt {}",
                    m.shaper_credit
                );
            }
        }
        assert_eq!(flow_total, self.cm.flow_count());
    }
}

proptest! {
    /// Window floor, byte conservation and grant limits hold after every
    /// call of any sequence; nothing panics.
    #[test]
    fn invariants_hold_over_random_call_sequences(ops in prop::collection::vec(op(), 1..120)) {
        let mut h = Harness::new();
        for op in &ops {
            let granted = h.apply(op);
            h.check_invariants(&granted);
        }
    }

    /// The same invariants for every controller the core ships.
    #[test]
    fn invariants_hold_for_every_controller(
        which in 0u8..7,
        ops in prop::collection::vec(op(), 1..120),
    ) {
        let mut h = Harness::with(controller(which));
        for op in &ops {
            let granted = h.apply(op);
            h.check_invariants(&granted);
        }
    }

    /// With the shaper as the only limit, the bytes granted over a run never
    /// exceed the bucket plus the integral of the shaping rate and the
    /// pacing slack's worth of it (sigcomm1999 §4.1: grants paced at about
    /// window/srtt, no bursts).
    #[test]
    fn shaper_never_releases_more_than_its_rate(
        rtt_ms in 1u64..200,
        steps in prop::collection::vec(1u64..5_000, 1..300),
    ) {
        let cfg = Config { mtu: Bytes(MTU), ..Config::default() };
        let mut cm = CongestionManager::new(cfg).unwrap();
        let c = cm.register_client(Instant::ZERO).unwrap();
        let f = cm.open(Instant::ZERO, c, OpenParams::to("192.0.2.9:1".parse().unwrap())).unwrap();
        let mf = cm.macroflow_of(f).unwrap();
        let rtt = Duration::from_millis(rtt_ms);
        // One RTT sample gives the shaper a rate; everything is acked at
        // once after, so the window never limits (space is ample).
        cm.request(Instant::ZERO, f).unwrap();
        while let Some(ev) = cm.poll_event() {
            if let Event::Grant { bytes, .. } = ev { cm.notify(Instant::ZERO, f, bytes).unwrap(); }
        }
        let mut now = Instant::ZERO + rtt;
        cm.update(now, f, Feedback::acked(MTU, rtt)).unwrap();
        let mut allowance: f64 = 0.0;
        let mut granted: u64 = 0;
        let mut bucket: f64 = 0.0;
        let mut lead: f64 = 0.0;
        let slack_s = cm.config().pacing_slack.as_micros() as f64 / 1e6;
        for dt in steps {
            let info = cm.macroflow_info(mf).unwrap();
            let rate = info.shaping_rate.unwrap().bytes_per_sec() as f64;
            // bucket depth: max(2 MTU, 1 ms of rate) (Config::burst_time)
            bucket = bucket.max((2 * MTU) as f64).max(rate / 1000.0);
            cm.request_mtus(now, f, 4).unwrap();
            while let Some(ev) = cm.poll_event() {
                if let Event::Grant { bytes, .. } = ev {
                    granted += bytes.get();
                    cm.notify(now, f, bytes).unwrap();
                    cm.update(now, f, Feedback::acked(bytes.get(), rtt)).unwrap();
                }
            }
            let next = now + Duration::from_micros(dt);
            let rate_after = cm.macroflow_info(mf).unwrap().shaping_rate.unwrap().bytes_per_sec() as f64;
            allowance += rate.max(rate_after) * dt as f64 / 1e6;
            // debt taken within the pacing slack (Config::pacing_slack)
            lead = lead.max(rate.max(rate_after) * slack_s);
            now = next;
            cm.handle_timeout(now);
            while let Some(ev) = cm.poll_event() {
                if let Event::Grant { bytes, .. } = ev {
                    granted += bytes.get();
                    cm.notify(now, f, bytes).unwrap();
                    cm.update(now, f, Feedback::acked(bytes.get(), rtt)).unwrap();
                }
            }
        }
        // One bucket at the start, the rate integral, and one grant of
        // debt beyond the pacing slack's.
        let limit = bucket + allowance + lead + (4 * MTU) as f64 + 1.0;
        prop_assert!(granted as f64 <= limit, "granted {granted} > limit {limit:.0}");
    }

    /// Backlogged flows of one macroflow get bytes in proportion to their
    /// weights (sigcomm1999 §4.6, Fig 13): within 5% once every flow has had
    /// many turns.
    #[test]
    fn weighted_shares_converge_to_weights(weights in prop::collection::vec(1u32..8, 2..6)) {
        let cfg = Config { mtu: Bytes(MTU), ..Config::default() };
        let mut cm = CongestionManager::new(cfg).unwrap();
        let c = cm.register_client(Instant::ZERO).unwrap();
        let dst = "192.0.2.7:80".parse().unwrap();
        let mut now = Instant::ZERO;
        let flows: Vec<FlowId> = weights
            .iter()
            .map(|&w| {
                let f = cm.open(now, c, OpenParams::to(dst)).unwrap();
                cm.set_weight(now, f, w).unwrap();
                cm.request_mtus(now, f, 64).unwrap();
                f
            })
            .collect();
        let total_w: u32 = weights.iter().sum();
        let rounds = 300 * u64::from(total_w);
        let mut sent: HashMap<FlowId, u64> = HashMap::new();
        let rtt = Duration::from_millis(10);
        let mut grants = 0;
        while grants < rounds {
            let mut got = Vec::new();
            while let Some(ev) = cm.poll_event() {
                if let Event::Grant { flow, bytes } = ev { got.push((flow, bytes)); }
            }
            for (flow, bytes) in got {
                grants += bytes.get() / MTU;
                *sent.entry(flow).or_default() += bytes.get();
                cm.notify(now, flow, bytes).unwrap();
                // Stay backlogged.
                cm.request_mtus(now, flow, (bytes.get() / MTU) as u32).unwrap();
            }
            now += Duration::from_millis(1);
            for &f in &flows {
                let inf = cm.flow_info(f).unwrap().in_flight.get();
                if inf > 0 {
                    cm.update(now, f, Feedback::acked(inf, rtt)).unwrap();
                }
            }
            cm.handle_timeout(now);
        }
        let total: u64 = sent.values().sum();
        for (f, &w) in flows.iter().zip(&weights) {
            let share = sent.get(f).copied().unwrap_or(0) as f64 / total as f64;
            let target = f64::from(w) / f64::from(total_w);
            prop_assert!(
                (share - target).abs() <= 0.05 * target,
                "weights {weights:?}: flow share {share:.4} vs target {target:.4}"
            );
        }
    }
}
