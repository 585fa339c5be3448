//! Cost of one request → grant → notify → update cycle (issue: ≤ 200 ns,
//! flat in the number of open flows).
//!
//! Three populations: 1 flow in 1 macroflow, 1,000 flows over 100
//! macroflows, 100,000 flows over 10,000 macroflows. Each iteration serves
//! the next flow round-robin, so successive cycles touch different flows and
//! macroflows as a busy host would, and includes polling the grant event.
//! The window never limits (large initial window, every grant acknowledged
//! at once) so what is measured is the CM's bookkeeping, not its waiting.
//!
//! `cargo bench -p cm-core --bench cycle` (add `-- --quick` for a short run).

#![allow(clippy::unwrap_used, missing_docs)]

use std::hint::black_box;

use cm_core::controller::{AimdConfig, ControllerConfig};
use cm_core::{
    Bytes, Config, CongestionManager, Duration, Event, Feedback, FlowId, Instant, OpenParams,
};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

struct Host {
    cm: CongestionManager,
    flows: Vec<FlowId>,
    now: Instant,
    next: usize,
}

const RTT: Duration = Duration::from_micros(100);

fn host(flows: usize, macroflows: usize) -> Host {
    let cfg = Config {
        controller: ControllerConfig::Aimd(AimdConfig {
            initial_window: Some(Bytes(1 << 26)),
            ..AimdConfig::default()
        }),
        client_timeout: None,
        ..Config::default()
    };
    let mut cm = CongestionManager::new(cfg).unwrap();
    let now = Instant::ZERO;
    let client = cm.register_client(now).unwrap();
    let ids: Vec<FlowId> = (0..flows)
        .map(|i| {
            let m = i % macroflows;
            let dst = format!("10.{}.{}.{}:80", m >> 16, (m >> 8) & 255, m & 255);
            cm.open(now, client, OpenParams::to(dst.parse().unwrap()))
                .unwrap()
        })
        .collect();
    let mut h = Host {
        cm,
        flows: ids,
        now,
        next: 0,
    };
    // One cycle per flow first, so every macroflow has an RTT estimate.
    for _ in 0..flows {
        h.cycle();
    }
    h
}

impl Host {
    /// One request → grant → notify → update cycle on the next flow.
    #[inline]
    fn cycle(&mut self) {
        let f = self.flows[self.next];
        self.next += 1;
        if self.next == self.flows.len() {
            self.next = 0;
        }
        self.now += Duration::from_micros(1);
        let now = self.now;
        self.cm.request(now, f).unwrap();
        let Some(Event::Grant { flow, bytes }) = self.cm.poll_event() else {
            panic!("window and shaper never limit in this benchmark");
        };
        self.cm.notify(now, flow, bytes).unwrap();
        self.cm
            .update(now, flow, Feedback::acked(bytes.get(), RTT))
            .unwrap();
        // The driver's loop also services timers when one is due.
        if self.cm.poll_timeout().is_some_and(|t| t <= now) {
            self.cm.handle_timeout(now);
        }
        black_box(&mut self.cm);
    }
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("cycle");
    g.throughput(Throughput::Elements(1));
    for (flows, macroflows) in [(1, 1), (1_000, 100), (100_000, 10_000)] {
        let mut h = host(flows, macroflows);
        let name = format!("{flows} flows, {macroflows} macroflows");
        g.bench_function(name, |b| b.iter(|| h.cycle()));
        // Nothing leaked into the event queue or the flows' bookkeeping.
        assert!(h.cm.poll_event().is_none());
        assert_eq!(h.cm.flow_count(), flows);
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
