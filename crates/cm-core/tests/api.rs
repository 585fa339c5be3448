//! API semantics of the congestion manager, one test per claim, citing the
//! paper section or RFC each comes from.

#![allow(clippy::unwrap_used)]

use cm_core::{
    Aging, Bytes, ClientId, Config, CongestionManager, Duration, Error, Event, Feedback, FlowId,
    Instant, LossMode, OpenParams, Thresholds,
};

const MTU: u64 = 1000;

fn cfg() -> Config {
    Config {
        mtu: Bytes(MTU),
        ..Config::default()
    }
}

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

fn at(v: u64) -> Instant {
    Instant::from_micros(v * 1000)
}

fn addr(host: u8, port: u16) -> OpenParams {
    OpenParams::to(format!("192.0.2.{host}:{port}").parse().unwrap())
}

fn setup() -> (CongestionManager, ClientId) {
    setup_with(cfg())
}

/// A manager with `config` and one client registered at time zero.
fn setup_with(config: Config) -> (CongestionManager, ClientId) {
    let mut cm = CongestionManager::new(config).unwrap();
    let c = cm.register_client(Instant::ZERO).unwrap();
    (cm, c)
}

/// [`cfg`] with an initial window of one MTU: one grant fills the window.
fn one_mtu_window() -> Config {
    Config {
        controller: cm_core::controller::ControllerConfig::Aimd(cm_core::controller::AimdConfig {
            initial_window: Some(Bytes(MTU)),
            ..Default::default()
        }),
        ..cfg()
    }
}

fn grants(cm: &mut CongestionManager) -> Vec<(FlowId, Bytes)> {
    let mut v = Vec::new();
    while let Some(e) = cm.poll_event() {
        if let Event::Grant { flow, bytes } = e {
            v.push((flow, bytes));
        }
    }
    v
}

fn window(cm: &CongestionManager, f: FlowId) -> Bytes {
    cm.macroflow_info(cm.macroflow_of(f).unwrap())
        .unwrap()
        .window
}

/// Advance time in 1 ms steps for `d`, running timers and sending (notifying)
/// every grant; returns the bytes sent.
fn run_for(cm: &mut CongestionManager, now: &mut Instant, d: Duration) -> u64 {
    let end = *now + d;
    let mut sent = 0;
    loop {
        for (g, b) in grants(cm) {
            cm.notify(*now, g, b).unwrap();
            sent += b.get();
        }
        if *now >= end {
            return sent;
        }
        *now += ms(1);
        cm.handle_timeout(*now);
    }
}

/// Send one MTU on `f` and acknowledge it `rtt` later.
fn round_trip(cm: &mut CongestionManager, now: Instant, f: FlowId, rtt: Duration) {
    cm.request(now, f).unwrap();
    let g = grants(cm);
    assert!(g.iter().any(|&(x, _)| x == f), "grant expected, got {g:?}");
    cm.notify(now, f, Bytes(MTU)).unwrap();
    cm.update(now + rtt, f, Feedback::acked(MTU, rtt)).unwrap();
}

#[test]
fn flows_to_one_host_share_a_macroflow_others_do_not() {
    // cm-implementation-linux §2: the default macroflow is the destination host.
    let (mut cm, c) = setup();
    let a = cm.open(at(0), c, addr(1, 80)).unwrap();
    let b = cm.open(at(0), c, addr(1, 443)).unwrap();
    let other = cm.open(at(0), c, addr(2, 80)).unwrap();
    assert_eq!(cm.macroflow_of(a).unwrap(), cm.macroflow_of(b).unwrap());
    assert_ne!(cm.macroflow_of(a).unwrap(), cm.macroflow_of(other).unwrap());
    // Different partitions (the daemon uses uids) do not share either.
    let mut p = addr(1, 80);
    p.partition = 1000;
    let d = cm.open(at(0), c, p).unwrap();
    assert_ne!(cm.macroflow_of(a).unwrap(), cm.macroflow_of(d).unwrap());
}

#[test]
fn a_new_flow_inherits_what_its_siblings_learned() {
    // sigcomm1999 §1 "shared state learning": no slow start for the 5th connection.
    let (mut cm, c) = setup();
    let a = cm.open(at(0), c, addr(1, 1)).unwrap();
    let mut now = at(0);
    for _ in 0..3 {
        let w = window(&cm, a).get() / MTU;
        cm.request_mtus(now, a, w as u32).unwrap();
        let g = run_for(&mut cm, &mut now, ms(50));
        cm.update(now, a, Feedback::acked(g, ms(50))).unwrap();
    }
    let learned = window(&cm, a);
    assert!(learned.get() >= 40 * MTU, "window grew to {learned}");
    let b = cm.open(now, c, addr(1, 2)).unwrap();
    assert_eq!(window(&cm, b), learned);
    assert_eq!(cm.query(b).unwrap().srtt, Some(ms(50)));
}

#[test]
fn query_distinguishes_no_estimate_from_zero() {
    // RFC 3124's unsigned cm_query cannot say "no estimate"; the core can.
    let (mut cm, c) = setup();
    let f = cm.open(at(0), c, addr(1, 1)).unwrap();
    let q = cm.query(f).unwrap();
    assert_eq!((q.rate, q.srtt, q.rttvar, q.loss), (None, None, None, None));
    round_trip(&mut cm, at(0), f, ms(100));
    let q = cm.query(f).unwrap();
    assert_eq!(q.srtt, Some(ms(100)));
    assert_eq!(q.rttvar, Some(ms(50)));
    assert_eq!(q.loss, Some(0.0));
    assert!(q.rate.unwrap().bytes_per_sec() > 0);
}

#[test]
fn rate_is_shared_by_weight() {
    // sigcomm1999 §3.1: a flow's share of the available rate.
    let (mut cm, c) = setup();
    let a = cm.open(at(0), c, addr(1, 1)).unwrap();
    let b = cm.open(at(0), c, addr(1, 2)).unwrap();
    round_trip(&mut cm, at(0), a, ms(100));
    cm.set_weight(at(200), b, 3).unwrap();
    let (ra, rb) = (
        cm.query(a).unwrap().rate.unwrap(),
        cm.query(b).unwrap().rate.unwrap(),
    );
    assert_eq!(rb.bytes_per_sec(), 3 * ra.bytes_per_sec());
    assert_eq!(cm.set_weight(at(200), b, 0), Err(Error::InvalidWeight(0)));
}

#[test]
fn window_limits_grants_and_feedback_releases_more() {
    let (mut cm, c) = setup();
    let f = cm.open(at(0), c, addr(1, 1)).unwrap();
    cm.request_mtus(at(0), f, 64).unwrap();
    let mut now = at(0);
    // RFC 6928 initial window of 10 MTU (no RTT yet: unpaced beyond the bucket).
    assert_eq!(run_for(&mut cm, &mut now, ms(10)), 10 * MTU);
    assert_eq!(
        run_for(&mut cm, &mut now, ms(90)),
        0,
        "window full, no feedback"
    );
    cm.update(now, f, Feedback::acked(2 * MTU, ms(100)))
        .unwrap();
    // Slow start: 2 MTU acked -> window 12 MTU, 8 in flight, room for 4.
    assert_eq!(run_for(&mut cm, &mut now, ms(50)), 4 * MTU);
}

#[test]
fn notify_zero_declines_a_grant_so_another_flow_can_send() {
    // cm-implementation-linux §2.1.3: cm_notify(dst, 0) lets other flows send.
    let (mut cm, c) = setup_with(one_mtu_window());
    let a = cm.open(at(0), c, addr(1, 1)).unwrap();
    let b = cm.open(at(0), c, addr(1, 2)).unwrap();
    cm.request(at(0), a).unwrap();
    cm.request(at(0), b).unwrap();
    assert_eq!(grants(&mut cm), vec![(a, Bytes(MTU))], "window of one MTU");
    cm.notify(at(1), a, Bytes::ZERO).unwrap();
    assert_eq!(grants(&mut cm), vec![(b, Bytes(MTU))]);
}

#[test]
fn an_unused_grant_expires_and_unwedges_the_macroflow() {
    // RFC 3124 §3: a client that never notifies must not wedge its macroflow.
    let (mut cm, c) = setup_with(one_mtu_window());
    let lazy = cm.open(at(0), c, addr(1, 1)).unwrap();
    let good = cm.open(at(0), c, addr(1, 2)).unwrap();
    cm.request(at(0), lazy).unwrap();
    cm.request(at(0), good).unwrap();
    assert_eq!(grants(&mut cm), vec![(lazy, Bytes(MTU))]);
    let deadline = cm.poll_timeout().unwrap();
    assert_eq!(
        deadline,
        at(200),
        "max(srtt, grant_timeout) with no srtt yet"
    );
    cm.handle_timeout(at(199));
    assert!(cm.poll_event().is_none());
    cm.handle_timeout(deadline);
    assert_eq!(
        cm.poll_event(),
        Some(Event::GrantExpired {
            flow: lazy,
            bytes: Bytes(MTU)
        })
    );
    assert_eq!(
        cm.poll_event(),
        Some(Event::Grant {
            flow: good,
            bytes: Bytes(MTU)
        })
    );
    assert_eq!(cm.flow_info(lazy).unwrap().counters.expired, 1);
}

#[test]
fn losses_halve_timeouts_collapse_non_congestion_losses_do_not() {
    // sigcomm1999 §4.1 and RFC 3124 lossmode semantics.
    let (mut cm, c) = setup();
    let f = cm.open(at(0), c, addr(1, 1)).unwrap();
    cm.request_mtus(at(0), f, 10).unwrap();
    grants(&mut cm);
    cm.notify(at(0), f, Bytes(10 * MTU)).unwrap();
    cm.update(
        at(100),
        f,
        Feedback {
            rtt: Some(ms(100)),
            ..Feedback::lossy(MTU, 0, LossMode::NotCongestion)
        },
    )
    .unwrap();
    assert_eq!(window(&cm, f), Bytes(10 * MTU));
    cm.update(at(101), f, Feedback::lossy(MTU, 0, LossMode::Transient))
        .unwrap();
    assert_eq!(window(&cm, f), Bytes(5 * MTU));
    cm.update(at(102), f, Feedback::lossy(MTU, 0, LossMode::Ecn))
        .unwrap();
    assert_eq!(window(&cm, f), Bytes(5 * MTU), "at most once per RTT");
    cm.update(at(103), f, Feedback::lossy(MTU, 0, LossMode::Persistent))
        .unwrap();
    assert_eq!(window(&cm, f), Bytes(MTU));
    let loss = cm.query(f).unwrap().loss.unwrap();
    assert!(loss > 0.5, "all reported bytes were lost: {loss}");
}

#[test]
fn bad_input_is_a_typed_error_and_changes_nothing() {
    let (mut cm, c) = setup();
    let f = cm.open(at(0), c, addr(1, 1)).unwrap();
    let ghost = FlowId::from_u64(0xdead_beef);
    assert_eq!(cm.request(at(0), ghost), Err(Error::UnknownFlow(ghost)));
    assert_eq!(cm.request_mtus(at(0), f, 0), Err(Error::InvalidRequest(0)));
    assert!(matches!(
        cm.update(at(0), f, Feedback::lossy(1, 2, LossMode::None)),
        Err(Error::ReceivedMoreThanSent { .. })
    ));
    assert_eq!(
        cm.update(at(0), f, Feedback::acked(1, Duration::ZERO)),
        Err(Error::InvalidRtt(Duration::ZERO))
    );
    assert!(matches!(
        cm.update(at(0), f, Feedback::acked(1, Duration::from_secs(3600))),
        Err(Error::InvalidRtt(_))
    ));
    assert!(matches!(
        cm.notify(at(0), f, Bytes(u64::MAX)),
        Err(Error::TooLarge(_))
    ));
    let nan = Thresholds {
        rate_down: f64::NAN,
        ..Thresholds::default()
    };
    assert!(matches!(
        cm.set_thresholds(at(0), f, nan),
        Err(Error::InvalidThreshold(_))
    ));
    let half = Thresholds {
        rate_up: 0.5,
        ..Thresholds::default()
    };
    assert!(matches!(
        cm.set_thresholds(at(0), f, half),
        Err(Error::InvalidThreshold(_))
    ));
    assert_eq!(
        cm.query(f).unwrap().srtt,
        None,
        "rejected samples left no trace"
    );
    cm.close(at(0), f).unwrap();
    assert_eq!(cm.close(at(0), f), Err(Error::UnknownFlow(f)));
    assert!(matches!(
        cm.open(at(0), ClientId::from_u64(77), addr(1, 1)),
        Err(Error::UnknownClient(_))
    ));
}

#[test]
fn rate_updates_fire_only_when_a_threshold_is_crossed() {
    // cm-implementation-linux §2.1.2 (iii): cm_thresh(down, up).
    let (mut cm, c) = setup();
    let f = cm.open(at(0), c, addr(1, 1)).unwrap();
    let t = Thresholds {
        rate_down: 2.0,
        rate_up: 2.0,
        rtt_down: 100.0,
        rtt_up: 100.0,
    };
    cm.set_thresholds(at(0), f, t).unwrap();
    assert!(
        cm.poll_event().is_none(),
        "no estimate yet: nothing to report"
    );
    cm.request_mtus(at(0), f, 10).unwrap();
    grants(&mut cm);
    cm.notify(at(0), f, Bytes(10 * MTU)).unwrap();
    cm.update(at(100), f, Feedback::acked(MTU, ms(100)))
        .unwrap();
    let first = std::iter::from_fn(|| cm.poll_event())
        .filter_map(|e| match e {
            Event::RateUpdate { estimate, .. } => estimate.rate,
            _ => None,
        })
        .collect::<Vec<_>>();
    assert_eq!(first.len(), 1, "first estimate reported once");
    // 11 MTU / 100 ms: a transient loss halves it -> crosses "down by 2"? 5.5 MTU: yes.
    cm.update(at(101), f, Feedback::lossy(MTU, 0, LossMode::Transient))
        .unwrap();
    let ups: Vec<_> = std::iter::from_fn(|| cm.poll_event())
        .filter(|e| matches!(e, Event::RateUpdate { .. }))
        .collect();
    assert_eq!(ups.len(), 1);
    // Small growth does not cross the factor-2 threshold.
    cm.update(at(150), f, Feedback::acked(MTU, ms(100)))
        .unwrap();
    assert!(!std::iter::from_fn(|| cm.poll_event()).any(|e| matches!(e, Event::RateUpdate { .. })));
}

#[test]
fn set_macroflow_moves_a_flow_with_its_bytes_in_flight() {
    // RFC 3124 cm_setmacroflow; a new macroflow when none is given.
    let (mut cm, c) = setup();
    let a = cm.open(at(0), c, addr(1, 1)).unwrap();
    let b = cm.open(at(0), c, addr(1, 2)).unwrap();
    let shared = cm.macroflow_of(a).unwrap();
    cm.request_mtus(at(0), b, 3).unwrap();
    grants(&mut cm);
    cm.notify(at(0), b, Bytes(3 * MTU)).unwrap();
    let own = cm.set_macroflow(at(1), b, None).unwrap();
    assert_ne!(own, shared);
    assert_eq!(cm.macroflow_info(shared).unwrap().in_flight, Bytes::ZERO);
    assert_eq!(cm.macroflow_info(own).unwrap().in_flight, Bytes(3 * MTU));
    assert_eq!(cm.set_macroflow(at(2), b, Some(shared)).unwrap(), shared);
    assert_eq!(cm.macroflow_info(shared).unwrap().in_flight, Bytes(3 * MTU));
    assert_eq!(cm.macroflow_info(shared).unwrap().flows.len(), 2);
    // The cheap accessor agrees with the snapshot.
    for m in [shared, own] {
        let info = cm.macroflow_info(m).unwrap();
        assert_eq!(
            cm.macroflow_window(m).unwrap(),
            (info.window, info.flows.len())
        );
    }
}

#[test]
fn a_vanished_clients_flows_are_reclaimed_and_others_keep_going() {
    // sigcomm1999 §3.1: state of a client that forgets cm_close is cleaned up.
    let mut cm = CongestionManager::new(Config {
        client_timeout: Some(ms(500)),
        ..cfg()
    })
    .unwrap();
    let dead = cm.register_client(at(0)).unwrap();
    let alive = cm.register_client(at(0)).unwrap();
    let d = cm.open(at(0), dead, addr(1, 1)).unwrap();
    let l = cm.open(at(0), alive, addr(1, 2)).unwrap();
    cm.request_mtus(at(0), d, 4).unwrap();
    grants(&mut cm);
    cm.notify(at(0), d, Bytes(4 * MTU)).unwrap();
    let mut now = at(0);
    while now < at(1000) {
        now += ms(100);
        cm.handle_timeout(now);
        cm.client_heartbeat(now, alive).unwrap();
        let _ = std::iter::from_fn(|| cm.poll_event()).count();
    }
    assert_eq!(cm.query(d), Err(Error::UnknownFlow(d)));
    let mf = cm.macroflow_of(l).unwrap();
    assert_eq!(
        cm.macroflow_info(mf).unwrap().in_flight,
        Bytes::ZERO,
        "dead flow's bytes released"
    );
    round_trip(&mut cm, now, l, ms(20));
    assert!(cm.client_flows(dead).is_err());
}

/// Drive an open-loop sender that gets no feedback after `silent_from`;
/// returns the bytes granted during the silence.
fn open_loop_bytes(aging: Aging, srtt_inflated: bool) -> u64 {
    let (mut cm, c) = setup_with(Config {
        aging,
        client_timeout: None,
        ..cfg()
    });
    let f = cm.open(at(0), c, addr(1, 1)).unwrap();
    let mut now = at(0);
    // Establish min RTT 20 ms; then (optionally) queueing inflates srtt to 200 ms.
    for i in 0..60 {
        let rtt = if srtt_inflated && i > 5 {
            ms(200)
        } else {
            ms(20)
        };
        cm.request(now, f).unwrap();
        for (g, b) in grants(&mut cm) {
            cm.notify(now, g, b).unwrap();
            cm.update(now, g, Feedback::acked(b.get(), rtt)).unwrap();
        }
        now += ms(5);
    }
    // Silence: requests keep coming, feedback never does.
    let mut sent = 0;
    let end = now + Duration::from_secs(2);
    while now < end {
        cm.request(now, f).unwrap();
        sent += run_for(&mut cm, &mut now, ms(1));
    }
    sent
}

#[test]
fn aging_keeps_sending_open_loop_at_a_decaying_rate() {
    // sigcomm1999 §4.4: without feedback the rate halves each half-life
    // instead of stalling (Aging::Off is the "clamp" alternative).
    let off = open_loop_bytes(Aging::Off, false);
    let min = open_loop_bytes(Aging::MinRtt, false);
    assert_eq!(off, 10 * MTU, "clamp: one window, then a stall");
    assert!(
        min > off,
        "aging continues to transmit past the window: {min}"
    );
    // Halving every 20 ms from window/srtt (10 MTU per 20 ms): a geometric
    // series of about one window more, however long the silence lasts.
    assert!(min <= off + 12 * MTU, "decays: {min} bytes in 2 s");
}

#[test]
fn minimum_rtt_half_life_sends_less_than_srtt_when_queues_inflate_rtt() {
    // sigcomm1999 §4.4 / Fig 12: srtt grows with queueing at the onset of
    // congestion, so aging on srtt decays too slowly.
    let min = open_loop_bytes(Aging::MinRtt, true);
    let srtt = open_loop_bytes(Aging::Srtt, true);
    assert!(
        min < srtt,
        "min-RTT aging sent {min} B, srtt aging {srtt} B"
    );
}

#[test]
fn shaper_paces_grants_at_about_window_over_srtt() {
    // sigcomm1999 §4.1: grants are spread over the RTT, not burst.
    let (mut cm, c) = setup();
    let f = cm.open(at(0), c, addr(1, 1)).unwrap();
    round_trip(&mut cm, at(0), f, ms(100));
    cm.update(at(100), f, Feedback::lossy(0, 0, LossMode::Transient))
        .unwrap();
    // Congestion avoidance, window 5 MTU (after halving 10 + ...), srtt 100 ms.
    let w = window(&cm, f).get();
    cm.request_mtus(at(200), f, 64).unwrap();
    let mut times = Vec::new();
    let mut now = at(200);
    while now < at(400) {
        for (g, b) in grants(&mut cm) {
            times.push(now);
            cm.notify(now, g, b).unwrap();
            cm.update(now, g, Feedback::acked(b.get(), ms(100)))
                .unwrap();
        }
        now += Duration::from_micros(100);
        cm.handle_timeout(now);
    }
    // Pacing rate = 1.2 * window / 100 ms (the window grows by one MTU per
    // window acked, so bound with the final one): over 200 ms about 2.4
    // windows plus the shaper's 2-MTU bucket.
    let w = window(&cm, f).get().max(w);
    let bytes = times.len() as u64 * MTU;
    let bound = 12 * w * 2 / 10 + 2 * MTU + MTU;
    assert!(bytes <= bound, "{bytes} B granted, bound {bound}");
    assert!(bytes >= bound / 2, "pacing, not starving: {bytes}");
}

#[test]
fn empty_macroflows_linger_then_are_collected() {
    let (mut cm, c) = setup_with(Config {
        macroflow_linger: Duration::from_secs(1),
        ..cfg()
    });
    let f = cm.open(at(0), c, addr(1, 1)).unwrap();
    round_trip(&mut cm, at(0), f, ms(10));
    let mf = cm.macroflow_of(f).unwrap();
    cm.close(at(20), f).unwrap();
    // Reopened within the linger time: same macroflow, same learning.
    let g = cm.open(at(500), c, addr(1, 1)).unwrap();
    assert_eq!(cm.macroflow_of(g).unwrap(), mf);
    cm.close(at(600), g).unwrap();
    while let Some(t) = cm.poll_timeout() {
        cm.handle_timeout(t);
        if cm.macroflow_count() == 0 {
            break;
        }
    }
    assert_eq!(cm.macroflow_count(), 0);
    assert_eq!(
        cm.macroflow_info(mf).err(),
        Some(Error::UnknownMacroflow(mf))
    );
}

/// A macroflow that never got an RTT sample must not age into an unpaced
/// open loop, where request → grant → request is granted without end at
/// one instant. Open loop must be paced (sigcomm1999 §4.4): window over the
/// initial RTO (RFC 6298 §2.1) when there is no srtt.
#[test]
fn aging_without_any_rtt_sample_stays_paced() {
    let (mut cm, c) = setup();
    let f = cm.open(at(0), c, addr(1, 1)).unwrap();
    cm.request(at(0), f).unwrap();
    let mut now = at(0);
    let mut granted = 0u64;
    // No feedback ever: aging starts after the initial RTO (1 s).
    while now < at(3_000) {
        for (g, b) in grants(&mut cm) {
            cm.notify(now, g, b).unwrap();
            cm.request(now, g).unwrap();
            granted += b.get();
            assert!(granted < 1_000_000, "unpaced open loop at {now}");
        }
        now += ms(1);
        cm.handle_timeout(now);
    }
    let info = cm.macroflow_info(cm.macroflow_of(f).unwrap()).unwrap();
    assert!(info.aging_steps > 0, "aging engaged");
    // Initial window, then at most window/1s halving every second.
    assert!(granted <= 10 * MTU + 10 * MTU, "granted {granted}");
}
