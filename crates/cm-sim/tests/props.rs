//! Property tests: packet conservation and queue limits, with and without
//! reordering and duplication.
#![allow(clippy::unwrap_used)]

mod common;

use cm_core::Duration;
use cm_sim::{FlowTag, LinkConfig, QueueLimit};
use common::{bell, cbr_sim};
use proptest::prelude::*;

fn queue_limit() -> impl Strategy<Value = QueueLimit> {
    prop_oneof![
        (0u32..30).prop_map(QueueLimit::Packets),
        (0u64..40_000).prop_map(QueueLimit::Bytes),
        Just(QueueLimit::Unlimited),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Every sent packet is delivered or dropped exactly once; queues never
    /// exceed their limit; link counters agree with flow counters.
    #[test]
    fn packets_are_conserved_and_queues_bounded(
        seed in any::<u64>(),
        flows in 1usize..4,
        bw in 100_000u64..20_000_000,
        delay_ms in 0u64..50,
        queue in queue_limit(),
        loss in 0.0f64..0.3,
        len in 40u32..1500,
        interval in 200u64..20_000,
        count in 1u64..200,
    ) {
        let cfg = LinkConfig::new(bw, Duration::from_millis(delay_ms), queue).with_loss(loss);
        let d = bell(flows, cfg);
        let bottleneck = d.bottleneck;
        let (mut sim, _) = cbr_sim(d, seed, len, interval, count);
        sim.run_until_idle();
        let mut dropped = 0;
        for i in 0..flows {
            let f = sim.flow_stats(FlowTag(i as u32 + 1)).unwrap();
            prop_assert_eq!(f.sent_packets, count);
            prop_assert_eq!(f.delivered_packets + f.dropped(), count);
            prop_assert_eq!(f.dropped_at.values().sum::<u64>(), f.dropped());
            dropped += f.dropped();
        }
        let ls = sim.link_stats(bottleneck).unwrap();
        prop_assert_eq!(ls.dropped_overflow + ls.dropped_random, dropped);
        prop_assert_eq!(ls.enqueued, ls.sent_packets);
        match queue {
            QueueLimit::Packets(q) => prop_assert!(ls.max_queue_packets <= u64::from(q)),
            QueueLimit::Bytes(b) => prop_assert!(ls.max_queue_bytes <= b),
            QueueLimit::Unlimited => prop_assert_eq!(ls.dropped_overflow, 0),
        }
        prop_assert!(ls.utilization() <= 1.0 + 1e-9);
        prop_assert_eq!(sim.link_queue_len(bottleneck), Some(0));
    }

    /// With reordering and duplication: every packet and every copy is
    /// delivered or dropped exactly once, and the copies the flows count
    /// are the ones the bottleneck made.
    #[test]
    fn copies_are_conserved_under_reordering_and_duplication(
        seed in any::<u64>(),
        flows in 1usize..4,
        bw in 100_000u64..20_000_000,
        queue in queue_limit(),
        loss in 0.0f64..0.3,
        reorder in 0.0f64..=1.0,
        extra_ms in 1u64..50,
        duplicate in 0.0f64..=1.0,
        interval in 200u64..20_000,
        count in 1u64..200,
    ) {
        let cfg = LinkConfig::new(bw, Duration::from_millis(5), queue)
            .with_loss(loss)
            .with_reorder(reorder, Duration::from_millis(extra_ms))
            .with_duplicate(duplicate);
        let d = bell(flows, cfg);
        let bottleneck = d.bottleneck;
        let (mut sim, _) = cbr_sim(d, seed, 1000, interval, count);
        sim.run_until_idle();
        let mut copies = 0;
        for i in 0..flows {
            let f = sim.flow_stats(FlowTag(i as u32 + 1)).unwrap();
            prop_assert_eq!(f.sent_packets + f.duplicated, f.delivered_packets + f.dropped());
            copies += f.duplicated;
        }
        let ls = sim.link_stats(bottleneck).unwrap();
        prop_assert_eq!(ls.duplicated, copies);
        prop_assert!(ls.reordered + ls.dropped_random <= ls.sent_packets);
        prop_assert_eq!(sim.pending_events(), 0);
    }
}
