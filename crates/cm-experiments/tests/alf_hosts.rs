//! The ALF hosts of the simulator: late starts and packet bunches.

use cm_core::{Config, Duration, Instant};
use cm_experiments::alf::{AlfApp, AlfPacket, AlfReceiver, AlfSender, Reporting};
use cm_sim::{DumbbellConfig, FlowTag, Sim, dumbbell};

#[test]
fn an_app_that_starts_after_a_minute_still_sends_and_bunches_are_sampled() {
    // Regression: the host's CM client was reclaimed by the core's silence
    // timeout (60 s) before the first app started, every `cm_open` failed,
    // and the host's start timer fired forever at the same instant.
    let d = dumbbell(&DumbbellConfig::sigcomm1999(
        1,
        1_000_000,
        Duration::from_millis(30),
    ))
    .expect("dumbbell");
    let (tx, rx) = (d.left_hosts[0], d.right_hosts[0]);
    let mut sim = Sim::<AlfPacket>::new(d.topology, 1).expect("sim");
    let start = Instant::ZERO + Duration::from_secs(90);
    let app = AlfApp::new(rx, FlowTag(1), start, 1)
        .with_bursts(3)
        .expect("burst length")
        .with_timeouts();
    sim.attach(
        tx,
        AlfSender::new(Config::default(), vec![app]).expect("host"),
    )
    .expect("attach");
    sim.attach(
        rx,
        AlfReceiver::new(Reporting::Every(Duration::from_millis(60))),
    )
    .expect("attach");
    sim.run_until(Instant::ZERO + Duration::from_secs(100));
    let h: &AlfSender = sim.host(tx).expect("sender");
    assert_eq!(h.apps[0].open_error, None);
    assert!(
        h.apps[0].sent_bytes > 100_000,
        "sent {}",
        h.apps[0].sent_bytes
    );
    let r: &AlfReceiver = sim.host(rx).expect("receiver");
    assert!(!r.samples.is_empty(), "no packet-bunch sample");
    // One estimate for the macroflow, at the bottleneck's rate (1 Mbit/s).
    let m = h.cm().macroflow_ids()[0];
    let c = h.cm().capacity(m).expect("macroflow").expect("an estimate");
    let ratio = c.bits_per_sec() as f64 / 1e6;
    assert!((0.98..=1.02).contains(&ratio), "estimate {c:?}");
}
