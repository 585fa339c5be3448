//! sigcomm1999 §4.4 / Fig 12: with infrequent feedback, aging with a
//! minimum-RTT half-life loses fewer packets than with an srtt half-life.

#![allow(clippy::unwrap_used)]

use cm_core::Aging;
use cm_experiments::experiments::aging::simulation::{run, sweep, totals};

#[test]
fn minimum_rtt_half_life_loses_fewer_packets_than_srtt() {
    let mut runs = Vec::new();
    for p in sweep(true) {
        for mode in [Aging::MinRtt, Aging::Srtt] {
            let r = run(p, mode).unwrap();
            eprintln!(
                "{:>6} report {:>4} ms queue {} BDP seed {}: sent {:>5} lost {:>4} goodput {:>7.0} bit/s",
                r.mode,
                p.report_ms,
                p.queue_bdps,
                p.seed,
                r.sent_packets,
                r.lost_packets,
                r.goodput_bps
            );
            runs.push(r);
        }
    }
    let (minrtt, srtt) = totals(&runs);
    eprintln!("lost_minrtt {minrtt} lost_srtt {srtt}");
    assert!(minrtt < srtt, "lost_minrtt {minrtt} !< lost_srtt {srtt}");
}

#[test]
fn runs_are_deterministic() {
    let p = sweep(true)[0];
    let a = run(p, Aging::MinRtt).unwrap();
    let b = run(p, Aging::MinRtt).unwrap();
    assert_eq!(
        (a.sent_packets, a.lost_packets),
        (b.sent_packets, b.lost_packets)
    );
}
