//! sigcomm1999 §4.4 / Fig 12: with infrequent feedback, aging with a
//! minimum-RTT half-life loses fewer packets than with an srtt half-life.

#![allow(clippy::unwrap_used)]

use cm_core::Aging;
use cm_experiments::experiments::Opts;
use cm_experiments::experiments::aging::{self, simulation};

#[test]
fn minimum_rtt_half_life_loses_fewer_packets_than_srtt() {
    // The experiment itself (its sweep, both modes, its totals), not a copy.
    let out = aging::run(&Opts {
        quick: true,
        quiet: true,
        threads: 1,
    })
    .unwrap();
    eprint!("{}", out.csv);
    let lost = |key: &str| out.metrics[key].as_u64().unwrap();
    let (minrtt, srtt) = (lost("lost_minrtt"), lost("lost_srtt"));
    eprintln!("lost_minrtt {minrtt} lost_srtt {srtt}");
    assert!(minrtt < srtt, "lost_minrtt {minrtt} !< lost_srtt {srtt}");
}

#[test]
fn runs_are_deterministic() {
    let p = simulation::sweep(true)[0];
    let a = simulation::run(p, Aging::MinRtt).unwrap();
    let b = simulation::run(p, Aging::MinRtt).unwrap();
    assert_eq!(
        (a.sent_packets, a.lost_packets),
        (b.sent_packets, b.lost_packets)
    );
}
