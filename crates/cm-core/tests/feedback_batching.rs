//! One `cm_update` per receive batch (issue 20): a transport that folds
//! the acknowledgements of one batch into one update
//! ([`Feedback::absorb`]) must grow the window as one that reports every
//! acknowledgement, because the controller counts bytes (RFC 3465;
//! cm-implementation-linux §5 "byte-counting to prevent ACK division").
//! Losses are never folded.

#![allow(clippy::unwrap_used)]

use cm_core::{Bytes, CongestionManager, Duration, Event, Feedback, FlowId, Instant, LossMode};

const MTU: u64 = 1460;

mod common;
use common::one_flow;

fn window(cm: &CongestionManager, f: FlowId) -> u64 {
    cm.macroflow_info(cm.macroflow_of(f).unwrap())
        .unwrap()
        .window
        .get()
}

/// A window-limited sender on a path of `rtt` whose bottleneck spaces
/// segments `gap` apart, run for `secs` seconds of simulated time. Every
/// grant is sent at once; each segment's acknowledgement arrives one RTT
/// after it left the bottleneck. The transport wakes `coalesce` after the
/// first arrival (as TCP/CM's sender coalesces its wake-ups) and reads
/// every acknowledgement that arrived by then as one receive batch, which
/// it reports either as one update each (`fold` false) or folded into one
/// update ([`Feedback::absorb`]). Segment `lose` (if any) is lost and
/// reported on its own. Returns the window every 100 ms.
fn simulate(coalesce: Duration, fold: bool, secs: u64, lose: Option<u64>) -> Vec<u64> {
    type Acks = std::collections::VecDeque<(Instant, u64)>;
    let (mut cm, f) = one_flow();
    let rtt = Duration::from_millis(20);
    let gap = Duration::from_micros(100);
    let mut acks: Acks = Default::default();
    let mut next_seg = 0u64;
    let mut link_free = Instant::ZERO;
    let mut send = |cm: &mut CongestionManager, now: Instant, acks: &mut Acks| {
        cm.request_mtus(now, f, 64).unwrap();
        while let Some(ev) = cm.poll_event() {
            if let Event::Grant { bytes, .. } = ev {
                cm.notify(now, f, bytes).unwrap();
                for _ in 0..bytes.get() / MTU {
                    link_free = link_free.max(now) + gap;
                    acks.push_back((link_free + rtt, next_seg));
                    next_seg += 1;
                }
            }
        }
    };
    let mut now = Instant::ZERO;
    send(&mut cm, now, &mut acks);
    let end = Instant::ZERO + Duration::from_secs(secs);
    let mut samples = Vec::new();
    let mut next_sample = Instant::ZERO + Duration::from_millis(100);
    while now < end && !acks.is_empty() {
        // The wake-up: the CM's timer (pacing, aging) or the batch's last
        // arrival, whichever is first.
        let last = acks.front().map(|&(at, _)| at + coalesce);
        let timer = cm.poll_timeout();
        while next_sample <= last.unwrap_or(end).min(timer.unwrap_or(end)) {
            samples.push(window(&cm, f));
            next_sample += Duration::from_millis(100);
        }
        if let (Some(t), Some(l)) = (timer, last) {
            if t < l {
                now = now.max(t);
                cm.handle_timeout(now);
                send(&mut cm, now, &mut acks);
                continue;
            }
        }
        now = now.max(last.unwrap_or(now));
        let mut folded: Option<Feedback> = None;
        while acks.front().is_some_and(|&(at, _)| at <= now) {
            let Some((_, seg)) = acks.pop_front() else {
                break;
            };
            if Some(seg) == lose {
                if let Some(fb) = folded.take() {
                    cm.update(now, f, fb).unwrap();
                }
                cm.update(now, f, Feedback::lossy(MTU, 0, LossMode::Transient))
                    .unwrap();
                continue;
            }
            let fb = Feedback::acked(MTU, rtt);
            if !fold {
                cm.update(now, f, fb).unwrap();
                continue;
            }
            match &mut folded {
                Some(p) => assert!(p.absorb(&fb)),
                None => folded = Some(fb),
            }
        }
        if let Some(fb) = folded {
            cm.update(now, f, fb).unwrap();
        }
        send(&mut cm, now, &mut acks);
    }
    samples
}

/// The reference: every acknowledgement reported as it arrives.
fn reference(lose: Option<u64>) -> Vec<u64> {
    simulate(Duration::ZERO, false, 3, lose)
}

#[test]
fn folded_updates_in_congestion_avoidance_grow_as_per_ack_updates() {
    // A loss early in slow start, then congestion avoidance for ~3 s
    // (about 150 RTTs of 20 ms): one MTU per RTT.
    let lose = Some(300);
    let r = reference(lose);
    let growth = |w: &[u64]| w[w.len() - 1] - w[2];
    for us in [200, 800, 2500] {
        let c = Duration::from_micros(us);
        let f = simulate(c, true, 3, lose);
        let each = simulate(c, false, 3, lose);
        assert_eq!(f.len(), r.len());
        // Folding never leaves a smaller window than updates made one by
        // one at the same wake-ups.
        let (fe, ee) = (f[f.len() - 1], each[each.len() - 1]);
        assert!(
            fe >= ee,
            "coalescing {us} µs: folded ends at {fe} B, one by one at {ee} B"
        );
        // With wake-ups up to 1/25 RTT apart, the windows stay within two
        // MTUs of per-arrival feedback from 200 ms on (the loss's recovery
        // over). Longer coalescing delays feedback itself (by up to the
        // coalescing time: the sender's wake-up policy, not the folding),
        // which lengthens the feedback loop's RTT by as much.
        if us <= 800 {
            let worst = r
                .iter()
                .zip(&f)
                .skip(2)
                .map(|(a, b)| a.abs_diff(*b))
                .max()
                .unwrap();
            assert!(
                worst <= 2 * MTU,
                "coalescing {us} µs: folded windows stray {worst} B from per-ack ones"
            );
            assert!(growth(&r).abs_diff(growth(&f)) <= MTU);
        }
    }
}

#[test]
fn folded_updates_in_slow_start_grow_as_per_ack_updates() {
    let r = reference(None);
    for us in [200, 800, 2500] {
        let f = simulate(Duration::from_micros(us), true, 3, None);
        // Slow start doubles per RTT up to the bottleneck's rate, then
        // grows by what the bottleneck carries. Folded: never more than
        // 10% behind per-arrival feedback, at most a quarter ahead early
        // on (slow-start rounds begin at different feedback), and within
        // 1% at the end.
        for (i, (a, b)) in r.iter().zip(&f).enumerate() {
            let ratio = *b as f64 / *a as f64;
            assert!(
                (0.9..=1.25).contains(&ratio),
                "coalescing {us} µs, sample {i}: folded {b} B, per ack {a} B"
            );
        }
        let (a, b) = (r[r.len() - 1], f[f.len() - 1]);
        assert!(a.abs_diff(b) * 100 <= a, "end: folded {b} B, per ack {a} B");
    }
}

#[test]
fn losses_are_never_folded() {
    let rtt = Duration::from_millis(5);
    let mut a = Feedback::acked(MTU, rtt);
    let lost = Feedback::lossy(MTU, 0, LossMode::Transient);
    assert!(!a.absorb(&lost));
    assert_eq!(a, Feedback::acked(MTU, rtt), "unchanged");
    let mut l = lost;
    assert!(!l.absorb(&Feedback::acked(MTU, rtt)));
    for mode in [LossMode::Persistent, LossMode::Ecn, LossMode::NotCongestion] {
        assert!(!a.absorb(&Feedback::lossy(MTU, MTU, mode)));
    }
    // Lossless ones add up, and the later RTT sample wins.
    let mut b = Feedback::acked(100, Duration::from_millis(9));
    assert!(b.absorb(&Feedback::acked(200, Duration::from_millis(7))));
    assert_eq!(b.nsent, Bytes(300));
    assert_eq!(b.nrecd, Bytes(300));
    assert_eq!(b.rtt, Some(Duration::from_millis(7)));
}
