//! sigcomm1999 §4.4 / Fig 12: with infrequent feedback, aging with a
//! minimum-RTT half-life loses fewer packets than with an srtt half-life.

#![allow(clippy::unwrap_used)]

use cm_core::Aging;
use cm_experiments::aging::{run, sweep, totals};

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

#[test]
#[ignore]
fn debug_stall() {
    use cm_core::{Config, Duration, Instant};
    use cm_experiments::alf::*;
    use cm_sim::*;
    let d = dumbbell(&DumbbellConfig::sigcomm1999(
        2,
        1_000_000,
        Duration::from_millis(60),
    ))
    .unwrap();
    let mut sim = Sim::<AlfPacket>::new(d.topology, 1).unwrap();
    let app = AlfApp::new(d.right_hosts[0], FlowTag(1), Instant::ZERO, 1);
    sim.attach(
        d.left_hosts[0],
        AlfSender::new(
            Config {
                aging: cm_core::Aging::Srtt,
                ..Config::default()
            },
            vec![app],
        )
        .unwrap(),
    )
    .unwrap();
    sim.attach(
        d.right_hosts[0],
        AlfReceiver::new(Reporting::Every(Duration::from_millis(1000))),
    )
    .unwrap();
    for s in 1..=30 {
        sim.run_until(Instant::from_micros(s * 1_000_000));
        let h: &AlfSender = sim.host(d.left_hosts[0]).unwrap();
        let m = h.cm().macroflow_info(h.cm().macroflow_ids()[0]).unwrap();
        eprintln!(
            "t={s} events={} now={} win={} rate={:?} aging={} inflight={} credit={}",
            sim.events_processed(),
            sim.now(),
            m.window,
            m.shaping_rate,
            m.aging_steps,
            m.in_flight,
            m.shaper_credit
        );
    }
}
