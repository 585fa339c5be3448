//! The self-test passes on the two reference configurations and on a path that
//! reorders 5 % and duplicates 2 % of its packets. Needs root.

use std::time::Duration;

use cm_netem::{Path, PathConfig, Queue};

fn check(cfg: PathConfig) {
    let path = Path::build(cfg.clone()).expect("build path");
    match path.self_test() {
        Ok(report) => {
            println!("{report}");
            let reorders = cfg.reorder > 0.0 || cfg.duplicate > 0.0;
            assert_eq!(
                report.reorder.is_some(),
                reorders,
                "reorder phase iff configured"
            );
            // The self-test restores what it switched off.
            assert_eq!(path.loss(), cfg.loss);
            assert_eq!(path.reorder(), (cfg.reorder, cfg.reorder_delay));
            assert_eq!(path.duplicate(), cfg.duplicate);
        }
        Err(e) => panic!("self-test failed for {cfg:?}: {e:#}"),
    }
    path.teardown().expect("teardown");
}

/// One test (not two) so the measurements do not run concurrently on a 2-core machine.
#[test]
fn self_test_passes_on_reference_paths() {
    if !cm_netem::is_root() {
        println!("skipped: needs root");
        return;
    }
    check(PathConfig {
        rate_bps: 10_000_000,
        one_way_delay: Duration::from_millis(30),
        queue: Queue::Bdp,
        loss: 0.01,
        reverse_rate_bps: None,
        ..PathConfig::default()
    });
    check(PathConfig {
        rate_bps: 100_000_000,
        one_way_delay: Duration::from_millis(5),
        queue: Queue::Packets(100),
        loss: 0.0,
        reverse_rate_bps: None,
        ..PathConfig::default()
    });
    // Issue 15's receiver-side loss detection experiments: reordering and
    // duplication measured by sequence numbers (Wilson bounds as for loss).
    check(PathConfig {
        rate_bps: 10_000_000,
        one_way_delay: Duration::from_millis(10),
        queue: Queue::Bdp,
        loss: 0.0,
        reverse_rate_bps: None,
        reorder: 0.05,
        reorder_delay: Duration::from_millis(5),
        duplicate: 0.02,
        burst_bytes: None,
    });
}
