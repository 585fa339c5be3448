//! Regression: exponential aging must start only when feedback is late
//! beyond the RTT's expected spread (srtt + max(G, 4 rttvar)), not the
//! moment one srtt has passed. With the bare srtt, a loopback flow
//! (srtt ≈ 100 µs) was aged on every scheduler hiccup and its window stayed
//! at a few segments although every packet was acknowledged (found by
//! `cm flow` with a rate limit and the libcm API benchmark).

#![allow(clippy::unwrap_used)]

use cm_core::{Config, CongestionManager, Duration, Event, Feedback, Instant, OpenParams};

#[test]
fn regression_aging_waits_past_srtt_plus_grace() {
    let mut cm = CongestionManager::new(Config::default()).unwrap();
    let mut now = Instant::ZERO;
    let c = cm.register_client(now).unwrap();
    let f = cm
        .open(now, c, OpenParams::to("127.0.0.1:9".parse().unwrap()))
        .unwrap();
    let rtt = Duration::from_micros(100);
    let step = |cm: &mut CongestionManager, now: Instant| {
        cm.request(now, f).unwrap();
        let mut granted = 0;
        while let Some(ev) = cm.poll_event() {
            if let Event::Grant { bytes, .. } = ev {
                granted += bytes.get();
            }
        }
        cm.notify(now, f, cm_core::Bytes(granted)).unwrap();
        granted
    };
    // Build an estimate: many exchanges with a steady 100 µs RTT.
    for _ in 0..50 {
        let g = step(&mut cm, now);
        now += rtt;
        cm.update(now, f, Feedback::acked(g, rtt)).unwrap();
    }
    let mf = cm.macroflow_of(f).unwrap();
    let before = cm.macroflow_info(mf).unwrap();
    assert_eq!(before.srtt, Some(rtt));
    // One more packet whose ack is 600 µs late: jitter, not silence.
    step(&mut cm, now);
    let late = now + Duration::from_micros(600);
    cm.handle_timeout(late);
    let after = cm.macroflow_info(mf).unwrap();
    assert_eq!(after.aging_steps, 0, "aged after {:?}", late - now);
    assert_eq!(after.window, before.window);
    // Silence beyond srtt + 1 ms does start aging (sigcomm1999 §4.4).
    let silent = now + Duration::from_micros(100 + 1000 + 50);
    cm.handle_timeout(silent);
    assert!(cm.macroflow_info(mf).unwrap().aging_steps >= 1);
}
