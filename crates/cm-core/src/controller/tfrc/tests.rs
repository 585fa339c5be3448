//! [`Tfrc`] against RFC 5348: the loss history's average (§5.4), loss
//! events (§5.2), slow start (§4.2–§4.3), convergence to the equation's
//! rate (§3.1), the equation's packet size (iscc §VI-C), the no-feedback
//! and idle rules (§4.4), and robustness to any sequence of events.

use proptest::prelude::*;

use super::history::{LossHistory, weight, weighted_mean};
use super::*;

const MTU: Bytes = Bytes(1460);
const RTT: Duration = Duration::from_millis(100);

fn t(us: u64) -> Instant {
    Instant::from_micros(us)
}

fn tfrc() -> Tfrc {
    Tfrc::new(TfrcConfig::default(), MTU)
}

fn ack(c: &mut Tfrc, now: Instant, acked: u64, lost: u64) {
    let ev = AckEvent::new(now, Bytes(acked), Bytes(acked + lost), Some(RTT))
        .with_lost_in_report(Bytes(lost));
    c.on_ack(&ev);
}

fn loss(c: &mut Tfrc, now: Instant, kind: CongestionKind, lost: u64) {
    c.on_congestion(&CongestionEvent::new(
        now,
        kind,
        Bytes(lost),
        Bytes::ZERO,
        Some(RTT),
    ));
}

/// A report at `now`: `acked` bytes received and `lost` lost, as the
/// manager delivers it (`on_ack`, then `on_congestion` if anything was lost).
fn report(c: &mut Tfrc, now: Instant, acked: u64, lost: u64) {
    if acked > 0 {
        ack(c, now, acked, lost);
    }
    if lost > 0 {
        loss(c, now, CongestionKind::Transient, lost);
    }
}

fn rate(c: &Tfrc) -> f64 {
    c.rate(Some(RTT)).map_or(0.0, |r| r.bytes_per_sec() as f64)
}

#[test]
fn weights_are_rfc5348s() {
    // RFC 5348 §5.4: for n = 8, 1, 1, 1, 1, 0.8, 0.6, 0.4, 0.2.
    let w: Vec<f64> = (1..=8).map(|i| weight(i, 8)).collect();
    let want = [1.0, 1.0, 1.0, 1.0, 0.8, 0.6, 0.4, 0.2];
    for (a, b) in w.iter().zip(want) {
        assert!((a - b).abs() < 1e-12, "{w:?}");
    }
}

#[test]
fn weighted_average_includes_the_open_interval_only_if_it_raises_it() {
    // RFC 5348 §5.4 by hand. Closed I_1..I_8 = 100, 90, ..., 30, W_tot = 6:
    // I_tot1 = 100+90+80+70 + 0.8*60 + 0.6*50 + 0.4*40 + 0.2*30 = 440,
    // so without I_0 the mean is 440 / 6 = 73.33.
    let closed = [100.0, 90.0, 80.0, 70.0, 60.0, 50.0, 40.0, 30.0];
    // A short open interval, I_0 = 10: I_tot0 = 10+100+90+80 + 0.8*70
    // + 0.6*60 + 0.4*50 + 0.2*40 = 400 < 440, so it is left out.
    let m = weighted_mean(10.0, closed.iter().copied(), 8);
    assert!((m - 440.0 / 6.0).abs() < 1e-9, "{m}");
    // A long one, I_0 = 200: I_tot0 = 590 > 440, so it counts: 98.33.
    let m = weighted_mean(200.0, closed.iter().copied(), 8);
    assert!((m - 590.0 / 6.0).abs() < 1e-9, "{m}");
    // Older intervals than the 8 most recent are ignored.
    let more = closed.iter().copied().chain([1e9, 1e9]);
    assert!((weighted_mean(10.0, more, 8) - 440.0 / 6.0).abs() < 1e-9);
    // Fewer than n: the k there are, with w_1..w_k (here 100 and 90;
    // I_tot0 = 10 + 100 < I_tot1 = 190).
    assert!((weighted_mean(10.0, [100.0, 90.0].into_iter(), 8) - 95.0).abs() < 1e-9);
}

#[test]
fn losses_within_one_rtt_are_one_loss_event() {
    // RFC 5348 §5.2, at the sender: a loss reported within one RTT of the
    // start of the current loss event belongs to it.
    let mut h = LossHistory::new(8);
    let mss = MTU;
    assert!(
        h.on_loss(t(0), mss, RTT, mss, || 50.0),
        "the first loss event"
    );
    assert!(!h.on_loss(t(30_000), mss, RTT, mss, || 0.0));
    assert!(!h.on_loss(t(99_999), mss, RTT, mss, || 0.0));
    // The synthetic interval (50 packets) is the only closed one so far:
    // the open one holds 3 lost packets, less than 50.
    assert_eq!(h.mean_interval(mss), Some(50.0));
    h.on_received(Bytes(97 * 1460));
    assert!(
        h.on_loss(t(100_000), mss, RTT, mss, || 0.0),
        "one RTT later"
    );
    // The interval it closed: 3 lost + 97 received = 100 packets.
    // Mean of (100, 50) with I_0 = 1 left out: 75.
    assert_eq!(h.mean_interval(mss), Some(75.0));

    // The same through the controller: a burst of losses in one RTT
    // moves p once.
    let mut c = tfrc();
    for i in 0..10 {
        report(&mut c, t(i * 10_000), 10 * 1460, 1460);
    }
    let p = c.loss_event_rate().expect("a loss event");
    report(&mut c, t(150_000), 10 * 1460, 0);
    report(&mut c, t(160_000), 0, 1460);
    assert_ne!(c.loss_event_rate(), Some(p), "a second loss event");
}

#[test]
fn initial_rate_and_window_follow_section_4_2() {
    let c = tfrc();
    // W_init = min(4 s, max(2 s, 4380)) = 4380 B = 3 packets of 1460.
    assert_eq!(c.initial_window(), Bytes(4380));
    assert_eq!(c.window(), Bytes(4380));
    assert_eq!(c.rate(None), None, "no RTT: unpaced, window-limited");
    assert_eq!(c.rate(Some(RTT)), Some(Rate::from_bytes_per_sec(43_800)));
    assert!(c.in_slow_start());
    assert_eq!(c.name(), "tfrc");
    // The first report: X = W_init / R.
    let mut c = tfrc();
    report(&mut c, t(0), 4380, 0);
    assert_eq!(c.rate(None), Some(Rate::from_bytes_per_sec(43_800)));
    assert_eq!(c.pacing_rate(None), c.rate(None));
    // The window: max(4 MTU, X * max(R, 100 ms) * 4) = 17,520 B.
    assert_eq!(c.window(), Bytes(17_520));
}

#[test]
fn slow_start_doubles_per_rtt() {
    // Every byte sent in a round trip is reported received at its end:
    // X_recv keeps up with X, and X doubles each RTT (RFC 5348 §4.3).
    let mut c = tfrc();
    let r = RTT.as_micros();
    report(&mut c, t(0), 4380, 0);
    let mut x = rate(&c);
    for k in 1..=8 {
        let sent = (x * RTT.as_secs_f64()) as u64;
        report(&mut c, t(k * r), sent, 0);
        let next = rate(&c);
        assert!((next / x - 2.0).abs() < 0.01, "round {k}: {x} -> {next}");
        x = next;
    }
    assert!(c.in_slow_start());
    // Reports within the same RTT do not double again.
    report(&mut c, t(8 * r + 50_000), 1000, 0);
    assert_eq!(rate(&c), x);
}

#[test]
fn slow_start_is_limited_to_twice_the_receive_rate() {
    // A path that delivers 100 kB/s: X stops at 2 X_recv = 200 kB/s.
    let mut c = tfrc();
    let r = RTT.as_micros();
    report(&mut c, t(0), 4380, 0);
    for k in 1..=20 {
        let sent = (rate(&c) * 0.1) as u64;
        report(&mut c, t(k * r), sent.min(10_000), 0);
        assert!(rate(&c) <= 200_000.0 + 1.0, "round {k}: {}", rate(&c));
    }
    assert_eq!(c.x_recv(), Some(Rate::from_bytes_per_sec(100_000)));
    assert!((rate(&c) - 200_000.0).abs() < 1.0);
}

/// A fluid path: each quarter RTT the sender sends X * R / 4 bytes, which
/// are reported one RTT later; one packet in every `loss_every` is lost.
/// Returns the mean rate over the last `tail` round trips.
fn run_path(c: &mut Tfrc, rounds: u64, loss_every: f64, tail: u64) -> f64 {
    let slot = RTT.as_micros() / 4;
    let mut in_flight: std::collections::VecDeque<(u64, u64)> = Default::default();
    let (mut sent_pkts, mut next_loss) = (0.0, loss_every);
    let (mut sum, mut n) = (0.0, 0);
    for k in 0..rounds * 4 {
        let now = t(k * slot);
        if in_flight.len() == 4 {
            if let Some((acked, lost)) = in_flight.pop_front() {
                report(c, now, acked, lost);
            }
        }
        let x = c.rate(Some(RTT)).map_or(0.0, |r| r.bytes_per_sec() as f64);
        let bytes = x * RTT.as_secs_f64() / 4.0;
        sent_pkts += bytes / MTU.0 as f64;
        let mut lost = 0;
        while sent_pkts >= next_loss {
            lost += MTU.0;
            next_loss += loss_every;
        }
        let bytes = (bytes as u64).max(lost);
        in_flight.push_back((bytes - lost, lost));
        if k >= (rounds - tail) * 4 {
            sum += x;
            n += 1;
        }
    }
    sum / f64::from(n)
}

#[test]
fn steady_one_percent_loss_converges_to_the_equation() {
    // One loss in every 100 packets: p = 1% and X -> X_calc(1%), 164 kB/s
    // for s = 1460 B and R = 100 ms (RFC 5348 §3.1).
    let mut c = tfrc();
    let mean = run_path(&mut c, 1000, 100.0, 200);
    let want = equation::throughput(1460.0, 0.1, 0.01);
    let p = c.loss_event_rate().expect("losses");
    assert!((p - 0.01).abs() < 0.001, "p = {p}");
    assert!((mean - want).abs() / want < 0.10, "{mean} vs {want}");
    assert!(!c.in_slow_start());
}

#[test]
fn a_smaller_equation_packet_size_gives_a_proportionally_smaller_rate() {
    // iscc §VI-C: TFRC with 180 B in the equation, 1460 B on the wire.
    // Both controllers see the same reports: 1000 packets per RTT received
    // (so 2 X_recv never binds) and a loss every 100 packets.
    let small = TfrcConfig {
        equation_packet_size: Some(Bytes(180)),
        ..TfrcConfig::default()
    };
    let mut a = tfrc();
    let mut b = Tfrc::new(small, MTU);
    assert_eq!(b.equation_packet_size(), Bytes(180));
    assert_eq!(a.equation_packet_size(), MTU);
    for k in 0..40 {
        for c in [&mut a, &mut b] {
            let now = t(k * RTT.as_micros());
            if k % 10 == 0 {
                report(c, now, 99 * 1460, 1460);
            } else {
                report(c, now, 1000 * 1460, 0);
            }
        }
    }
    let (pa, pb) = (a.loss_event_rate(), b.loss_event_rate());
    assert_eq!(pa, pb, "the same loss event rate");
    let ratio = rate(&b) / rate(&a);
    assert!((ratio - 180.0 / 1460.0).abs() < 1e-3, "{ratio}");
}

#[test]
fn persistent_congestion_is_a_loss_event_and_a_halving() {
    let mut c = tfrc();
    let mut now = 0;
    for _ in 0..10 {
        report(&mut c, t(now), 20 * 1460, 0);
        now += RTT.as_micros();
    }
    loss(&mut c, t(now), CongestionKind::Transient, 1460);
    let before = rate(&c);
    now += 5 * RTT.as_micros();
    loss(&mut c, t(now), CongestionKind::Persistent, 10 * 1460);
    assert!(rate(&c) <= before / 2.0 + 1.0, "{before} -> {}", rate(&c));
    // The halving holds at the next report until X_recv is measured again.
    let halved = rate(&c);
    report(&mut c, t(now + 10), 1460, 0);
    assert!(rate(&c) <= halved + 1.0);
}

#[test]
fn aging_halves_the_rate_down_to_one_packet_per_t_mbi() {
    let mut c = tfrc();
    report(&mut c, t(0), 4380, 0);
    let x = rate(&c);
    c.on_feedback_timeout(&AgingEvent::new(t(200_000), 1));
    assert_eq!(rate(&c), (x / 2.0).floor());
    for step in 2..200 {
        c.on_feedback_timeout(&AgingEvent::new(t(200_000), step));
    }
    // s / t_mbi = 1460 / 64 = 22.8 B/s.
    assert_eq!(c.rate(None), Some(Rate::from_bytes_per_sec(22)));
    assert_eq!(c.window(), MTU.saturating_mul(4));
    // Before any report, aging halves the initial window to one MTU.
    let mut c = tfrc();
    for step in 1..5 {
        c.on_feedback_timeout(&AgingEvent::new(t(0), step));
    }
    assert_eq!(c.window(), MTU);
}

#[test]
fn an_application_floor_holds_against_aging_and_loss() {
    // A layered stream's base layer (iscc §VI-B: 14 kbit/s) is a floor
    // above s / t_mbi.
    let cfg = TfrcConfig {
        min_rate: Some(Rate::from_bits_per_sec(14_000)),
        ..TfrcConfig::default()
    };
    let mut c = Tfrc::new(cfg, MTU);
    report(&mut c, t(0), 4380, 0);
    for step in 1..200 {
        c.on_feedback_timeout(&AgingEvent::new(t(200_000), step));
    }
    assert_eq!(c.rate(None), Some(Rate::from_bytes_per_sec(1750)));
    for k in 1..50u64 {
        report(&mut c, t(k * RTT.as_micros()), 1460, 1460);
    }
    assert!(rate(&c) >= 1750.0, "{}", rate(&c));
}

#[test]
fn idle_restart_caps_the_rate_at_the_initial_rate() {
    let mut c = tfrc();
    for k in 0..10 {
        let sent = (rate(&c) * 0.1) as u64;
        report(&mut c, t(k * RTT.as_micros()), sent.max(4380), 0);
    }
    assert!(rate(&c) > 100_000.0);
    let rto = Duration::from_secs(1);
    c.on_idle_restart(&IdleEvent::new(
        t(2_000_000),
        Duration::from_millis(500),
        rto,
    ));
    assert!(rate(&c) > 100_000.0, "idle shorter than an RTO");
    c.on_idle_restart(&IdleEvent::new(t(3_000_000), Duration::from_secs(2), rto));
    assert_eq!(c.rate(None), Some(Rate::from_bytes_per_sec(43_800)));
}

#[test]
fn set_mtu_changes_the_packet_counts() {
    let mut c = tfrc();
    c.set_mtu(Bytes(0));
    assert_eq!(c.window(), Bytes(4), "W_init of 1-byte packets: 4 bytes");
    c.set_mtu(Bytes(9000));
    assert_eq!(c.initial_window(), Bytes(18_000));
}

#[derive(Clone, Debug)]
enum Op {
    Ack(u64, u64, u64, Option<u64>),
    Loss(u64, u8, u64, Option<u64>),
    Timeout,
    Idle(u64, u64),
    Mtu(u64),
}

fn op() -> impl Strategy<Value = Op> {
    let srtt = prop::option::of(prop_oneof![Just(0u64), 1u64..10_000_000, Just(u64::MAX)]);
    let bytes = prop_oneof![Just(0u64), 1u64..100_000, Just(u64::MAX)];
    let dt = prop_oneof![Just(0u64), 1u64..2_000_000];
    prop_oneof![
        (dt.clone(), bytes.clone(), bytes.clone(), srtt.clone())
            .prop_map(|(d, a, l, r)| Op::Ack(d, a, l, r)),
        (dt.clone(), 0u8..3, bytes.clone(), srtt).prop_map(|(d, k, l, r)| Op::Loss(d, k, l, r)),
        Just(Op::Timeout),
        (dt, 0u64..10_000_000).prop_map(|(i, r)| Op::Idle(i, r)),
        prop_oneof![Just(0u64), 1u64..65_536, Just(u64::MAX)].prop_map(Op::Mtu),
    ]
}

fn config() -> impl Strategy<Value = TfrcConfig> {
    (
        prop::option::of(prop_oneof![Just(0u64), 1u64..10_000]),
        prop_oneof![Just(0u64), 1u64..100_000_000],
        0usize..20,
    )
        .prop_map(|(s, t_mbi, n)| TfrcConfig {
            equation_packet_size: s.map(Bytes),
            t_mbi: Duration::from_micros(t_mbi),
            history_len: n,
            min_rate: None,
        })
}

proptest! {
    #[test]
    fn the_rate_is_never_zero_nan_or_infinite(
        cfg in config(),
        mtu in 0u64..10_000,
        ops in prop::collection::vec(op(), 0..120),
    ) {
        let mut c = Tfrc::new(cfg, Bytes(mtu));
        let mut mtu = Bytes(mtu.max(1));
        let mut now = 0u64;
        for o in ops {
            match o {
                Op::Ack(d, a, l, r) => {
                    now = now.saturating_add(d);
                    let ev = AckEvent::new(t(now), Bytes(a), Bytes(a), r.map(Duration::from_micros))
                        .with_lost_in_report(Bytes(l));
                    c.on_ack(&ev);
                }
                Op::Loss(d, k, l, r) => {
                    now = now.saturating_add(d);
                    let kind = [CongestionKind::Transient, CongestionKind::Ecn, CongestionKind::Persistent]
                        [usize::from(k)];
                    let ev = CongestionEvent::new(t(now), kind, Bytes(l), Bytes::ZERO, r.map(Duration::from_micros));
                    c.on_congestion(&ev);
                }
                Op::Timeout => c.on_feedback_timeout(&AgingEvent::new(t(now), 1)),
                Op::Idle(i, r) => {
                    let ev = IdleEvent::new(t(now), Duration::from_micros(i), Duration::from_micros(r));
                    c.on_idle_restart(&ev);
                }
                Op::Mtu(m) => {
                    c.set_mtu(Bytes(m));
                    mtu = Bytes(m.max(1));
                }
            }
            prop_assert!(c.window() >= mtu, "window {:?} below the MTU {mtu:?}", c.window());
            for srtt in [None, Some(RTT)] {
                if let Some(r) = c.rate(srtt) {
                    prop_assert!(r.bytes_per_sec() >= 1);
                    prop_assert!(r.bytes_per_sec() as f64 <= MAX_RATE);
                }
                prop_assert_eq!(c.pacing_rate(srtt), c.rate(srtt));
            }
            if let Some(p) = c.loss_event_rate() {
                prop_assert!(p > 0.0 && p <= 1.0, "p = {}", p);
                prop_assert!(!c.in_slow_start());
            }
            if let Some(x) = c.x_recv() {
                prop_assert!(x.bytes_per_sec() >= 1);
            }
        }
    }
}

#[test]
fn runs_a_macroflow_through_the_manager() {
    // End to end through `CongestionManager`: a backlogged flow on a 50 ms
    // path that loses one packet in 50 (p = 2%) sends at about X_calc(2%).
    use crate::{Config, CongestionManager, Event, Feedback, LossMode, OpenParams};
    let mtu = 1000;
    let rtt = Duration::from_millis(50);
    let cfg = Config {
        mtu: Bytes(mtu),
        controller: crate::controller::ControllerConfig::Tfrc(TfrcConfig::default()),
        ..Config::default()
    };
    let mut cm = CongestionManager::new(cfg).unwrap();
    let client = cm.register_client(Instant::ZERO).unwrap();
    let addr = "192.0.2.1:80".parse().unwrap();
    let f = cm
        .open(Instant::ZERO, client, OpenParams::to(addr))
        .unwrap();
    let mut acks: std::collections::VecDeque<(Instant, bool)> = Default::default();
    let (mut sent, mut sent_late, mut pending) = (0u64, 0u64, 0u32);
    let end = 30_000;
    for ms in 0..=end {
        let now = t(ms * 1000);
        while acks.front().is_some_and(|&(at, _)| at <= now) {
            let (_, lost) = acks.pop_front().unwrap();
            let fb = if lost {
                Feedback::lossy(mtu, 0, LossMode::Transient)
            } else {
                Feedback::acked(mtu, rtt)
            };
            cm.update(now, f, fb).unwrap();
        }
        cm.handle_timeout(now);
        while pending < 8 {
            cm.request(now, f).unwrap();
            pending += 1;
        }
        while let Some(e) = cm.poll_event() {
            if let Event::Grant { bytes, .. } = e {
                cm.notify(now, f, bytes).unwrap();
                pending = pending.saturating_sub(1);
                sent += 1;
                if ms >= end / 2 {
                    sent_late += 1;
                }
                acks.push_back((now + rtt, sent % 50 == 0));
            }
        }
    }
    let info = cm.macroflow_info(cm.macroflow_of(f).unwrap()).unwrap();
    assert_eq!(info.controller, "tfrc");
    let x = sent_late as f64 * mtu as f64 / (end as f64 / 2e3);
    let want = equation::throughput(1000.0, 0.05, 0.02);
    assert!(
        (x - want).abs() / want < 0.15,
        "{x:.0} B/s vs X_calc {want:.0}"
    );
}
