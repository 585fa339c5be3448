//! The self-test passes on the two reference configurations. Needs root.

use std::time::Duration;

use cm_netem::{Path, PathConfig, Queue};

fn check(cfg: PathConfig) {
    let path = Path::build(cfg.clone()).expect("build path");
    match path.self_test() {
        Ok(report) => println!("{report}"),
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
    });
    check(PathConfig {
        rate_bps: 100_000_000,
        one_way_delay: Duration::from_millis(5),
        queue: Queue::Packets(100),
        loss: 0.0,
        reverse_rate_bps: None,
    });
}
