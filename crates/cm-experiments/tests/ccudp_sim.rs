//! The shipped CC-UDP feedback loop (`cm_transport::ccudp`, the code behind
//! libcm's `CcUdpSocket`) in the simulator: an ALF sender and its receiver
//! over a lossy, congested bottleneck. Every datagram that left the sender
//! is reported to the CM exactly once, as received or as lost, or is still
//! in flight, so the CM's bytes in flight match the sender's
//! (cm-implementation-linux §2.1.3; RFC 3124 §4.2).

#![allow(clippy::unwrap_used)]

use cm_core::{Config, Duration, Instant};
use cm_experiments::alf::{AlfApp, AlfPacket, AlfReceiver, AlfSender, Reporting};
use cm_sim::{DumbbellConfig, FlowTag, Sim, dumbbell};

const DATA: FlowTag = FlowTag(1);

fn run(reporting: Reporting, loss: f64) {
    let one_way = Duration::from_millis(30);
    let mut cfg = DumbbellConfig::sigcomm1999(1, 2_000_000, one_way);
    // Random loss on the data direction only; the DropTail queue adds
    // congestion losses.
    cfg.bottleneck = cfg.bottleneck.with_loss(loss);
    let d = dumbbell(&cfg).unwrap();
    let (tx, rx) = (d.left_hosts[0], d.right_hosts[0]);
    let mut sim = Sim::<AlfPacket>::new(d.topology, 7).unwrap();
    let app = AlfApp::new(rx, DATA, Instant::ZERO, 1);
    sim.attach(tx, AlfSender::new(Config::default(), vec![app]).unwrap())
        .unwrap();
    sim.attach(rx, AlfReceiver::new(reporting)).unwrap();
    sim.run_until(Instant::ZERO + Duration::from_secs(20));

    let dropped = sim.flow_stats(DATA).unwrap().dropped();
    let host: &AlfSender = sim.host(tx).unwrap();
    let acct = host.apps[0].accounting();
    let c = acct.counters;
    let (in_flight_bytes, in_flight) = acct.in_flight_bytes();
    let what =
        format!("{reporting:?} loss {loss}: {c:?}, in flight {in_flight}, dropped {dropped}");
    assert!(c.acked > 300, "{what}");
    // Each datagram that left: received, lost, or still in flight — once.
    assert_eq!(c.acked + c.lost + in_flight, acct.departed(), "{what}");
    // No reordering on a dumbbell: nothing is called lost that arrived,
    // and every drop is reported lost unless it is still unresolved.
    assert_eq!(c.spurious, 0, "{what}");
    assert!(c.lost <= dropped && dropped <= c.lost + in_flight, "{what}");
    assert!(c.lost > 0, "{what}");
    // The CM's view: the same bytes in flight, a loss rate, and an RTT no
    // shorter than the path's propagation delay.
    let cm = host.cm();
    let id = cm.macroflow_ids()[0];
    let m = cm.macroflow_info(id).unwrap();
    assert_eq!(m.in_flight.get(), in_flight_bytes, "{what}");
    // Cumulatively too (the CM's in-flight count stops at zero, so a byte
    // reported twice can hide there; the flow's counters do not): every
    // byte notified as sent was reported once, received or lost, or is in
    // flight.
    let f = cm.flow_info(m.flows[0]).unwrap().counters;
    assert_eq!(
        f.received.get() + f.lost.get() + in_flight_bytes,
        f.sent.get(),
        "{what}: {f:?}"
    );
    assert!(m.loss.is_some_and(|l| l > 0.0), "{what}: {:?}", m.loss);
    let srtt = m.srtt.unwrap();
    assert!(srtt >= one_way.saturating_mul(2), "{what}: srtt {srtt}");
}

#[test]
fn per_packet_acks_over_a_lossy_bottleneck_conserve_bytes_in_flight() {
    run(Reporting::EveryPacket, 0.01);
}

#[test]
fn periodic_acks_over_a_lossy_bottleneck_conserve_bytes_in_flight() {
    run(Reporting::Every(Duration::from_millis(200)), 0.02);
}
