//! Smoke tests of the simulated hosts.

use cm_core::{Duration, Instant};
use cm_experiments::hosts::{CmHost, ConnSpec, Pkt, ReceiverHost};
use cm_sim::{Dumbbell, DumbbellConfig, FlowTag, Sim, dumbbell};
use cm_transport::CcMode;

/// One connection from a CM host across the sigcomm1999 dumbbell (1 Mbit/s,
/// 60 ms), simulated for 20 s: the simulator, the hosts, the connection.
fn simulate(cc: CcMode, bytes: Option<u64>, trace: bool) -> (Sim<Pkt>, Dumbbell, usize) {
    let d = dumbbell(&DumbbellConfig::sigcomm1999(
        1,
        1_000_000,
        Duration::from_millis(60),
    ))
    .expect("topology");
    let (src, dst) = (d.left_hosts[0], d.right_hosts[0]);
    let mut sim = Sim::<Pkt>::new(d.topology.clone(), 1).expect("sim");
    let mut host = CmHost::new(src, cm_core::Config::default()).expect("host");
    let mut spec = ConnSpec::new(dst, FlowTag(1), cc).trace(trace);
    spec.bytes = bytes;
    let c = host.add_conn(spec).expect("conn");
    sim.attach(src, host).expect("attach");
    sim.attach(dst, ReceiverHost::new()).expect("attach");
    sim.run_until(Instant::from_micros(20_000_000));
    (sim, d, c)
}

fn run(cc: CcMode, bytes: Option<u64>) -> (f64, Option<f64>, Vec<String>) {
    let (sim, d, c) = simulate(cc, bytes, false);
    let (src, dst) = (d.left_hosts[0], d.right_hosts[0]);
    let rx = sim.host::<ReceiverHost>(dst).expect("rx");
    let bytes = rx.tcp_bytes(FlowTag(1));
    let h = sim.host::<CmHost>(src).expect("host");
    (
        bytes as f64 * 8.0 / 20.0,
        h.conn(c).expect("conn").record.transfer_secs(),
        h.errors.clone(),
    )
}

#[test]
fn bulk_flows_fill_a_1mbit_bottleneck() {
    for cc in [CcMode::NewReno, CcMode::Cm] {
        let (bps, _, errors) = run(cc, None);
        eprintln!("{cc:?}: {bps:.0} bit/s");
        assert!(errors.is_empty(), "{errors:?}");
        assert!(bps > 600_000.0 && bps < 1_000_000.0, "{cc:?}: {bps}");
    }
}

#[test]
fn finite_transfers_finish() {
    for cc in [CcMode::NewReno, CcMode::Cm] {
        let (_, t, errors) = run(cc, Some(100_000));
        eprintln!("{cc:?}: {t:?}");
        assert!(errors.is_empty(), "{errors:?}");
        assert!(t.is_some_and(|t| t > 0.8 && t < 3.0), "{cc:?}: {t:?}");
    }
}

#[test]
#[ignore]
fn debug_stats() {
    let (sim, d, c) = simulate(CcMode::NewReno, None, true);
    let src = d.left_hosts[0];
    let h = sim.host::<CmHost>(src).expect("host");
    let conn = h.conn(c).expect("c");
    eprintln!("{:?}", conn.tcp.stats());
    eprintln!("{:?}", sim.link_stats(d.bottleneck));
    for p in conn.record.window.iter().step_by(50).take(40) {
        eprint!("({:.2},{}) ", p.t, p.v);
    }
}
