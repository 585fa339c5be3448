//! Regressions in the core's window control found by running the CM over
//! real loopback sockets (the daemon, `cm flow`, the libcm API benchmark):
//!
//! - exponential aging must start only when feedback is late
//!   beyond the RTT's expected spread (srtt + max(G, 4 rttvar)), not the
//!   moment one srtt has passed. With the bare srtt, a loopback flow
//!   (srtt ≈ 100 µs) was aged on every scheduler hiccup and its window stayed
//!   at a few segments although every packet was acknowledged (found by
//!   `cm flow` with a rate limit and the libcm API benchmark).
//! - a macroflow whose requests wait on the window is
//!   window-limited (RFC 7661 §3) even when its bytes in flight are few.
//!   Grants reserve whole MTUs, so a sender of 64-byte datagrams (one per
//!   granted MTU) was held to the initial window forever: the "grow only when
//!   used" test looked at bytes in flight alone (found by the API benchmark:
//!   64-byte ALF through the daemon at 45 µs per packet).
//! - the aging half-life must not be shorter than the clock granularity G,
//!   and aging must stop stepping once the open-loop rate is zero. With a
//!   half-life of the minimum RTT alone (a few µs on loopback), a 1 ms
//!   scheduling stall halved the window some hundred times, and the timer
//!   kept firing every few µs after the rate reached zero: over 45,000 steps
//!   in one daemon benchmark run (found by the libcm API benchmark).
//! - with that floor, the open loop must not start from window / srtt:
//!   halving every 1 ms from a rate of window / 10 µs sends some hundred
//!   windows open loop where the paper's half-life of one RTT sends about
//!   one. A loopback receiver descheduled for a few ms lost thousands of
//!   datagrams to its full socket buffer (found by `cm flow` in CI: 13% of
//!   a one-second flow lost, every loss a `RcvbufErrors` at the receiver).

#![allow(clippy::unwrap_used)]

use cm_core::{Bytes, CongestionManager, Duration, Event, Feedback, FlowId, Instant, LossMode};

mod common;
use common::{one_flow, one_flow_with};

/// Ask for `k` MTUs and send each grant at once (one notify per grant: each
/// answers the oldest one). Returns the bytes sent.
fn send_round(cm: &mut CongestionManager, f: FlowId, now: Instant, k: u32) -> u64 {
    cm.request_mtus(now, f, k).unwrap();
    let mut sent = 0;
    while let Some(ev) = cm.poll_event() {
        if let Event::Grant { bytes, .. } = ev {
            cm.notify(now, f, bytes).unwrap();
            sent += bytes.get();
        }
    }
    sent
}

/// `rounds` round trips of `k` MTUs each on a steady path: everything sent
/// is acknowledged `rtt` later. Advances `now`.
fn steady_rounds(
    cm: &mut CongestionManager,
    f: FlowId,
    now: &mut Instant,
    rounds: usize,
    k: u32,
    rtt: Duration,
) {
    for _ in 0..rounds {
        let sent = send_round(cm, f, *now, k);
        *now += rtt;
        cm.update(*now, f, Feedback::acked(sent, rtt)).unwrap();
    }
}

#[test]
fn regression_aging_waits_past_srtt_plus_grace() {
    let (mut cm, f) = one_flow();
    let mut now = Instant::ZERO;
    let rtt = Duration::from_micros(100);
    // Build an estimate: many exchanges with a steady 100 µs RTT.
    steady_rounds(&mut cm, f, &mut now, 50, 1, rtt);
    let mf = cm.macroflow_of(f).unwrap();
    let before = cm.macroflow_info(mf).unwrap();
    assert_eq!(before.srtt, Some(rtt));
    // One more packet whose ack is 600 µs late: jitter, not silence.
    send_round(&mut cm, f, now, 1);
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

#[test]
fn regression_small_packets_blocked_by_grants_grow_the_window() {
    let (mut cm, f) = one_flow();
    let mut now = Instant::ZERO;
    let mf = cm.macroflow_of(f).unwrap();
    let initial = cm.macroflow_info(mf).unwrap().window;
    let rtt = Duration::from_millis(10);
    // A standing backlog, and notifications sent in one batch per round
    // (as libcm batches them to the daemon): the window's room is held by
    // grants, not by bytes in flight.
    // Each round: the grants the window allows are taken, their 64-byte
    // datagrams go out, and the notifications reach the CM one batch later
    // (as calls batched to the daemon do), with the acknowledgements.
    let mut backlog = 0u64;
    let mut held: Vec<u64> = Vec::new();
    let take = |cm: &mut CongestionManager, held: &mut Vec<u64>| {
        while let Some(ev) = cm.poll_event() {
            if let Event::Grant { bytes, .. } = ev {
                held.push(bytes.get() / 1460);
            }
        }
    };
    for _ in 0..40 {
        backlog += 64;
        cm.request_mtus(now, f, 64).unwrap();
        take(&mut cm, &mut held);
        now += rtt;
        let mut sent = 0;
        for mtus in std::mem::take(&mut held) {
            backlog -= mtus;
            cm.notify(now, f, Bytes(mtus * 64)).unwrap();
            sent += mtus * 64;
        }
        // Grants issued as the notifications free room wait for the next
        // batch, like the first ones.
        let mut later = Vec::new();
        take(&mut cm, &mut later);
        cm.update(now, f, Feedback::acked(sent, rtt)).unwrap();
        take(&mut cm, &mut later);
        cm.handle_timeout(now);
        take(&mut cm, &mut later);
        held = later;
    }
    assert!(
        backlog > 0,
        "the window, not the application, was the limit"
    );
    let w = cm.macroflow_info(mf).unwrap().window;
    assert!(
        w.get() >= 2 * initial.get(),
        "window {w} did not grow from {initial} while grants were the limit"
    );
}

#[test]
fn regression_aging_half_life_is_at_least_the_grace_and_stops_at_zero_rate() {
    let (mut cm, f) = one_flow();
    let mut now = Instant::ZERO;
    // A loopback path: 10 µs RTT samples, so min RTT and srtt are 10 µs.
    let rtt = Duration::from_micros(10);
    steady_rounds(&mut cm, f, &mut now, 50, 1, rtt);
    // Leave one packet unacknowledged, then go silent.
    cm.request(now, f).unwrap();
    while cm.poll_event().is_some() {}
    cm.notify(now, f, Bytes(1000)).unwrap();
    let mf = cm.macroflow_of(f).unwrap();
    // Aging starts about srtt + G (1 ms) later; 3 ms after that, a half-life
    // floored at G = 1 ms allows about 4 steps, where a 10 µs one took 300.
    let mut t = now;
    let end = now + Duration::from_millis(4);
    while t < end {
        t += Duration::from_micros(10);
        cm.handle_timeout(t);
    }
    let steps = cm.macroflow_info(mf).unwrap().aging_steps;
    assert!((1..=5).contains(&steps), "{steps} aging steps in 4 ms");
    // Ten seconds of silence: the steps stop once the open-loop rate is
    // zero, and no aging deadline is left to wake the timer.
    let mut calls = 0;
    while let Some(d) = cm.poll_timeout() {
        if d > now + Duration::from_secs(10) || calls > 100_000 {
            break;
        }
        cm.handle_timeout(d);
        calls += 1;
    }
    let info = cm.macroflow_info(mf).unwrap();
    assert!(info.aging_steps <= 64, "{} steps", info.aging_steps);
    assert!(calls < 200, "{calls} timer wake-ups in 10 s of silence");
}

#[test]
fn regression_open_loop_sends_about_one_window_when_the_half_life_is_floored() {
    let (mut cm, f) = one_flow();
    let mut now = Instant::ZERO;
    // A loopback path: 10 µs RTT samples; the window grows meanwhile.
    steady_rounds(&mut cm, f, &mut now, 200, 4, Duration::from_micros(10));
    let mf = cm.macroflow_of(f).unwrap();
    let window = cm.macroflow_info(mf).unwrap().window.get();
    // The receiver stops answering (descheduled) with one window in flight;
    // the sender keeps asking. sigcomm1999 §4.4: the rate halves every
    // half-life, so the open loop adds a geometric series of about one
    // window, whatever the half-life (here floored at G = 1 ms, a hundred
    // RTTs).
    let mut open_loop = 0u64;
    let end = now + Duration::from_millis(50);
    while now < end {
        cm.request_mtus(now, f, 64).unwrap();
        let aging = cm.macroflow_info(mf).unwrap().aging_steps > 0;
        while let Some(ev) = cm.poll_event() {
            if let Event::Grant { bytes, .. } = ev {
                cm.notify(now, f, bytes).unwrap();
                if aging {
                    open_loop += bytes.get();
                }
            }
        }
        now += Duration::from_micros(10);
        cm.handle_timeout(now);
    }
    let steps = cm.macroflow_info(mf).unwrap().aging_steps;
    assert!(steps >= 1, "aging engaged");
    // Plus what the shaper's bucket (1 ms of the rate) holds when the
    // first step comes: half a window at window / (2 half-lives).
    assert!(
        open_loop <= window + window / 2 + 2 * 1460,
        "{open_loop} B sent open loop in 50 ms of silence, window {window} B"
    );
}

/// Regression (found by `scalability-t1`): a rate-based flow at a low rate
/// is not aged between its own packets. A streaming flow at the 14 kbit/s
/// base layer sends a bunch of three 1472-byte packets every 2.5 s; when one
/// is lost, it stays in flight until the next bunch reveals the gap, and
/// aging after srtt + 4 rttvar halved the rate a dozen times in between,
/// pinning the flow at its floor. Aging now waits four packet times at the
/// controller's rate for rate-based controllers; a window-based flow keeps
/// the papers' rule.
#[test]
fn regression_a_slow_rate_based_flow_is_not_aged_between_its_packets() {
    let aging_steps = |spec: &str| {
        let (mut cm, f, mf) = one_flow_with(spec);
        let t = |ms: u64| Instant::from_micros(ms * 1000);
        // A first report gives an RTT sample of 100 ms.
        send_round(&mut cm, f, t(0), 1);
        cm.update(t(100), f, Feedback::acked(1472, Duration::from_millis(100)))
            .unwrap();
        // A bunch of three (as the shaper releases it); the report 100 ms
        // after the last covers two of them.
        cm.request_mtus(t(200), f, 3).unwrap();
        let (mut sent, mut ms) = (0, 200);
        while sent < 3 * 1472 && ms < 5_000 {
            cm.handle_timeout(t(ms));
            while let Some(ev) = cm.poll_event() {
                if let Event::Grant { bytes, .. } = ev {
                    cm.notify(t(ms), f, bytes).unwrap();
                    sent += bytes.get();
                }
            }
            ms += 10;
        }
        assert_eq!(sent, 3 * 1472);
        let start = cm.macroflow_info(mf).unwrap().aging_steps;
        cm.update(
            t(ms + 100),
            f,
            Feedback::acked(2 * 1472, Duration::from_millis(100)),
        )
        .unwrap();
        for later in (ms + 100..=ms + 2_500).step_by(50) {
            cm.handle_timeout(t(later));
        }
        assert_eq!(start, 0);
        cm.macroflow_info(mf).unwrap().aging_steps
    };
    let base = "min_rate=14k,initial_rate=14k,slow_start=false";
    assert_eq!(
        aging_steps(&format!("iscc:capacity=1544k,{base}")),
        0,
        "iscc"
    );
    assert_eq!(
        aging_steps(&format!("aimd:mode=rate,mtu_rtt=1k,{base}")),
        0,
        "rate-based aimd"
    );
    assert!(aging_steps("aimd") > 0, "window-based AIMD ages as before");
}

/// A rate-based flow's receiver reports once per control interval (one
/// RTT), so its report for data sent just after the last one comes up to
/// two RTTs later: aging waits RFC 5348 §4.4's four RTTs for it, where a
/// window-based flow ages past srtt + 4 rttvar as sigcomm1999 §4.4 says.
#[test]
fn a_rate_based_flow_is_aged_only_after_four_rtts_without_a_report() {
    let first_aging_after = |spec: &str| {
        let (mut cm, f, mf) = one_flow_with(spec);
        let rtt = Duration::from_millis(100);
        let mut now = Instant::ZERO;
        // Steady 100 ms samples, one packet per round (granted as the
        // shaper allows), then one more packet with no report for it.
        let send_one = |cm: &mut CongestionManager, now: &mut Instant| {
            cm.request_mtus(*now, f, 1).unwrap();
            for _ in 0..1000 {
                cm.handle_timeout(*now);
                while let Some(ev) = cm.poll_event() {
                    if let Event::Grant { bytes, .. } = ev {
                        cm.notify(*now, f, bytes).unwrap();
                        return bytes.get();
                    }
                }
                *now += Duration::from_millis(1);
            }
            panic!("no grant in a second");
        };
        for _ in 0..8 {
            let sent = send_one(&mut cm, &mut now);
            now += rtt;
            cm.update(now, f, Feedback::acked(sent, rtt)).unwrap();
        }
        let last_report = now;
        send_one(&mut cm, &mut now);
        assert_eq!(cm.macroflow_info(mf).unwrap().aging_steps, 0);
        while cm.macroflow_info(mf).unwrap().aging_steps == 0 {
            now += Duration::from_millis(5);
            cm.handle_timeout(now);
            assert!(now < last_report + Duration::from_secs(2), "never aged");
        }
        now.saturating_since(last_report)
    };
    let iscc = first_aging_after("iscc:capacity=1544k,initial_rate=1000k,slow_start=false");
    assert!(
        iscc >= Duration::from_millis(400) && iscc <= Duration::from_millis(450),
        "iscc aged {iscc:?} after its last report"
    );
    let aimd = first_aging_after("aimd");
    assert!(
        aimd < Duration::from_millis(200),
        "window-based AIMD aged {aimd:?} after its last report"
    );
}

/// A macroflow that resumes another CM's window (libcm standing in for a
/// daemon that went away) starts there, in congestion avoidance, with the
/// RTT it was given, so its rate is that window per RTT at once (not an
/// initial window's).
/// A rate-based macroflow (binomial in rate mode, ISCC) resumes at the
/// rate `window / srtt` out of slow start, not from its initial two MTUs
/// a second: libcm's failover moves such flows between CMs.
#[test]
fn a_resumed_rate_based_macroflow_starts_from_window_over_srtt() {
    let (mut cm, f) = one_flow();
    let mf = cm.macroflow_of(f).unwrap();
    for spec in ["aimd:mode=rate", "iscc:l=2"] {
        let cfg: cm_core::controller::ControllerConfig = spec.parse().unwrap();
        cm.set_controller(Instant::ZERO, mf, &cfg).unwrap();
        let mtu = cm.mtu(f).unwrap().get();
        let before = cm.macroflow_info(mf).unwrap().rate.unwrap().bytes_per_sec();
        let (w, rtt) = (100 * mtu, Duration::from_millis(30));
        cm.resume_macroflow(Instant::ZERO, mf, Bytes(w), Some(rtt))
            .unwrap();
        let info = cm.macroflow_info(mf).unwrap();
        let rate = info.rate.unwrap().bytes_per_sec();
        let want = w * 1_000_000 / rtt.as_micros();
        assert!(before < want / 10, "{spec}: {before}");
        assert!(
            rate.abs_diff(want) <= want / 100,
            "{spec}: {rate} B/s, want {want}"
        );
        assert!(!info.slow_start, "{spec}: resumed into slow start");
    }
}

#[test]
fn a_resumed_macroflow_starts_from_the_window_in_congestion_avoidance() {
    let (mut cm, f) = one_flow();
    let mf = cm.macroflow_of(f).unwrap();
    let mtu = cm.mtu(f).unwrap().get();
    let before = cm.macroflow_info(mf).unwrap();
    assert!(before.slow_start);
    let w = 100 * mtu;
    let rtt = Duration::from_millis(30);
    cm.resume_macroflow(Instant::ZERO, mf, Bytes(w), Some(rtt))
        .unwrap();
    let info = cm.macroflow_info(mf).unwrap();
    assert!(before.window.get() < w / 4, "{:?}", before.window);
    assert_eq!(info.window, Bytes(w));
    assert!(!info.slow_start, "resumed into slow start");
    assert_eq!(info.srtt, Some(rtt));
    let rate = info.rate.unwrap().bytes_per_sec();
    let want = w * 1_000_000 / rtt.as_micros();
    assert!(rate.abs_diff(want) <= want / 100, "{rate} B/s, want {want}");
}

/// `cm stat`'s CUTS and RTOS: a loss event counts once however many
/// signals report it (RFC 6582: one reduction per window of data), and
/// every timeout counts.
#[test]
fn congestion_counters_count_loss_events_and_timeouts() {
    use cm_core::{CongestionCounters, LossMode};
    let (mut cm, f) = one_flow();
    let mf = cm.macroflow_of(f).unwrap();
    let mut now = Instant::ZERO;
    let rtt = Duration::from_millis(50);
    steady_rounds(&mut cm, f, &mut now, 5, 4, rtt);
    let counters = |cm: &CongestionManager| cm.macroflow_info(mf).unwrap().congestion;
    assert_eq!(counters(&cm), CongestionCounters::default());
    let mtu = cm.macroflow_info(mf).unwrap().mtu.get();
    let sent = send_round(&mut cm, f, now, 8);
    // Three losses of one window, reported one by one: one event.
    for _ in 0..3 {
        now += Duration::from_millis(5);
        cm.update(now, f, Feedback::lossy(mtu, 0, LossMode::Transient))
            .unwrap();
    }
    let c = counters(&cm);
    assert_eq!((c.reductions, c.timeouts), (1, 0));
    // The rest of that window times out: a timeout, not another event.
    now += Duration::from_secs(1);
    cm.update(
        now,
        f,
        Feedback::lossy(sent - 3 * mtu, 0, LossMode::Persistent),
    )
    .unwrap();
    let c = counters(&cm);
    assert_eq!((c.reductions, c.timeouts), (1, 1));
    // New data, a new loss event.
    steady_rounds(&mut cm, f, &mut now, 3, 4, rtt);
    send_round(&mut cm, f, now, 4);
    now += rtt;
    cm.update(now, f, Feedback::lossy(mtu, 0, LossMode::Transient))
        .unwrap();
    assert_eq!(counters(&cm).reductions, 2);
}

/// The kernel TCP bridge's pattern (`cmd --kernel-tcp`): four connections
/// of one macroflow, each sending its share of the window and reporting
/// it only at its next ACK, which with a small window (two segments and a
/// delayed ACK) has acknowledged all of it. Each report is a `cm_notify`
/// and the `cm_update` of the same bytes, so the bytes in flight the core
/// counts never exceed one connection's share. Read alone, that flight
/// looks application-limited and the window does not grow; with the
/// kernel's "cwnd-limited" verdict passed on (`window_limited`), it grows
/// as one flow's would. Without it, `kernel-ensemble` saw a macroflow stay
/// at 11 KB for 16 s beside a Reno flow at 7.8 Mbit/s.
#[test]
fn regression_notify_only_flows_that_say_the_window_held_them_grow_it() {
    let run = |limited: bool| {
        let mut cm = CongestionManager::new(cm_core::Config::default()).unwrap();
        let c = cm.register_client(Instant::ZERO).unwrap();
        let dst = "192.0.2.7:80".parse().unwrap();
        let flows: Vec<FlowId> = (0..4)
            .map(|_| {
                cm.open(Instant::ZERO, c, cm_core::OpenParams::to(dst))
                    .unwrap()
            })
            .collect();
        let mf = cm.macroflow_of(flows[0]).unwrap();
        let initial = cm.macroflow_info(mf).unwrap().window.get();
        let rtt = Duration::from_millis(60);
        let mut now = Instant::ZERO;
        for _ in 0..10 {
            let share = cm.macroflow_info(mf).unwrap().window.get() / 4;
            for &f in &flows {
                now += Duration::from_millis(15);
                cm.notify(now, f, Bytes(share)).unwrap();
                if limited {
                    cm.window_limited(now, f).unwrap();
                }
                cm.update(now, f, Feedback::acked(share, rtt)).unwrap();
            }
        }
        (initial, cm.macroflow_info(mf).unwrap().window.get())
    };
    let (initial, unlimited) = run(false);
    assert_eq!(
        unlimited, initial,
        "a flight of one share reads as application-limited"
    );
    let (_, limited) = run(true);
    assert!(
        limited >= 4 * initial,
        "window {limited} did not grow from {initial} though the kernel said the window held it"
    );
}

/// A loss found by data sent after the last reduction, of a datagram sent
/// before it, is part of that reduction when `cm_update` says when the
/// lost data left (`Feedback::lost_sent`, RFC 6582 §3.2); by byte count
/// alone the report looks like a new congestion event, because the data
/// that revealed the loss was resolved in the same report (found by
/// `real-layered`: the CM halved twice, one to two RTTs apart, where Linux
/// Reno entered recovery once).
#[test]
fn regression_a_loss_of_data_sent_before_the_reduction_does_not_reduce_again() {
    let ms = |v: u64| Instant::from_micros(v * 1000);
    let rtt = Duration::from_millis(100);
    let run = |lost_sent: Option<Instant>| {
        let (mut cm, f) = one_flow();
        let mf = cm.macroflow_of(f).unwrap();
        let mtu = cm.macroflow_info(mf).unwrap().mtu.get();
        cm.notify(ms(0), f, Bytes(10 * mtu)).unwrap();
        cm.update(ms(100), f, Feedback::acked(mtu, rtt)).unwrap();
        cm.update(ms(100), f, Feedback::lossy(mtu, 0, LossMode::Transient))
            .unwrap();
        let halved = cm.macroflow_info(mf).unwrap().window;
        // Sent after the reduction; the old window acknowledged but one
        // datagram, whose loss the new data reveals past one RTT.
        cm.notify(ms(150), f, Bytes(4 * mtu)).unwrap();
        cm.update(ms(240), f, Feedback::acked(7 * mtu, rtt))
            .unwrap();
        let mut fb = Feedback::lossy(4 * mtu, 3 * mtu, LossMode::Transient);
        fb.lost_sent = lost_sent;
        cm.update(ms(260), f, fb).unwrap();
        (halved, cm.macroflow_info(mf).unwrap().window)
    };
    let (halved, after) = run(Some(ms(0)));
    assert_eq!(after, halved, "the lost datagram left before the reduction");
    let (halved, after) = run(None);
    assert!(
        after < halved,
        "without the send time the report reads as a new event"
    );
    let (halved, after) = run(Some(ms(150)));
    assert!(after < halved, "sent after the reduction: a new event");
}
