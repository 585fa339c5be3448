//! The daemon driven in process (`cm_daemon::Harness`, the `session` fuzz
//! target's entry point): the regressions its fuzzing found, and a
//! client's loss feedback reaching the core through the protocol.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use cm_core::{Duration, Feedback, Instant, LossMode};
use cm_daemon::{DaemonConfig, Harness};
use cm_ipc::{Frame, ToClient, ToDaemon};

const SEC: u64 = 1_000_000;

fn send(h: &mut Harness, t: u64, m: &ToDaemon, now: u64) -> Vec<ToClient> {
    let mut f = Frame::new();
    f.push(m);
    h.frame(t, &f.finish(), Instant::from_micros(now));
    h.advance(Instant::from_micros(now));
    h.check().unwrap();
    h.output(t).unwrap()
}

/// Found by the `session` target: the owner the daemon remembers for each
/// macroflow made by `SetMacroflow` (no target) outlived the macroflow, so
/// the map grew by one entry per call for the daemon's lifetime. Owners of
/// expired macroflows are now swept.
#[test]
fn owners_of_expired_macroflows_are_forgotten() {
    cm_daemon::log::set_quiet(true);
    let mut h = Harness::new(DaemonConfig::default()).unwrap();
    let mut now = SEC;
    let t = h
        .connect(1000, 1, Instant::from_micros(now))
        .unwrap()
        .unwrap();
    let hello = ToDaemon::Hello {
        version: cm_ipc::VERSION,
    };
    assert!(matches!(
        send(&mut h, t, &hello, now)[..],
        [ToClient::Welcome { .. }]
    ));
    let open = ToDaemon::Open {
        seq: 1,
        src: None,
        dst: "192.0.2.1:80".parse().unwrap(),
    };
    let [ToClient::Opened { flow, .. }] = send(&mut h, t, &open, now)[..] else {
        panic!("not opened");
    };
    let mut peak = 0;
    for seq in 0..200 {
        let m = ToDaemon::SetMacroflow {
            seq,
            flow,
            target: None,
        };
        assert!(matches!(
            send(&mut h, t, &m, now)[..],
            [ToClient::Macroflow { .. }]
        ));
        peak = peak.max(h.macroflow_count());
        // Past the linger: the macroflow the flow left expires.
        now += 601 * SEC;
        h.advance(Instant::from_micros(now));
        h.check().unwrap();
    }
    assert!(peak <= 2, "one macroflow in use, one lingering: {peak}");
    assert!(
        h.macroflow_owners() <= 2 * peak + Harness::OWNER_SLACK,
        "{} owners remembered for at most {peak} macroflows",
        h.macroflow_owners()
    );
    h.disconnect(t, Instant::from_micros(now));
    assert_eq!(h.flow_count(), 0);
}

/// One user cannot make the daemon hold macroflows without bound: each
/// `SetMacroflow` with no target makes one, and an empty one lingers, so a
/// loop of them is refused with `LimitReached` at `max_macroflows_per_user`
/// live ones (reported by the `session` fuzz target's author as unbounded),
/// while another user is not affected, and the lingering ones expiring
/// frees the quota again.
#[test]
fn macroflows_one_user_makes_are_limited() {
    cm_daemon::log::set_quiet(true);
    let cfg = DaemonConfig {
        max_macroflows_per_user: 20,
        ..DaemonConfig::default()
    };
    let mut h = Harness::new(cfg).unwrap();
    let now = SEC;
    let hello = ToDaemon::Hello {
        version: cm_ipc::VERSION,
    };
    let client = |h: &mut Harness, uid: u32| {
        let t = h
            .connect(uid, uid, Instant::from_micros(now))
            .unwrap()
            .unwrap();
        assert!(matches!(
            send(h, t, &hello, now)[..],
            [ToClient::Welcome { .. }]
        ));
        let open = ToDaemon::Open {
            seq: 1,
            src: None,
            dst: "192.0.2.1:80".parse().unwrap(),
        };
        let [ToClient::Opened { flow, .. }] = send(h, t, &open, now)[..] else {
            panic!("not opened");
        };
        (t, flow)
    };
    let (a, fa) = client(&mut h, 1000);
    let set = |flow, seq| ToDaemon::SetMacroflow {
        seq,
        flow,
        target: None,
    };
    let mut made = 0;
    let refused = loop {
        match send(&mut h, a, &set(fa, made + 2), now)[..] {
            [ToClient::Macroflow { .. }] => made += 1,
            [ToClient::Refused { code, ref why, .. }] => {
                assert!(why.contains("max_macroflows_per_user = 20"), "{why}");
                break code;
            }
            ref other => panic!("{other:?}"),
        }
        assert!(made <= 20, "limit not enforced");
    };
    assert_eq!(refused, cm_ipc::ErrorCode::LimitReached);
    assert_eq!(made, 20);
    h.check().unwrap();
    // Another user still may.
    let (b, fb) = client(&mut h, 1001);
    assert!(matches!(
        send(&mut h, b, &set(fb, 2), now)[..],
        [ToClient::Macroflow { .. }]
    ));
    // Once the lingering ones expire, the first user may again.
    let later = now + 601 * SEC;
    h.advance(Instant::from_micros(later));
    assert!(matches!(
        send(&mut h, a, &set(fa, 99), later)[..],
        [ToClient::Macroflow { .. }]
    ));
}

/// `cm_update` through the daemon carries when the lost data left, as an
/// age (`lost_age_us`, protocol version 7), and the daemon puts it on its
/// own clock: a loss of data sent before the macroflow's last reduction,
/// found by data sent after it, does not reduce the window again. Without
/// the send time the same report reduces it (the byte count alone), and so
/// does a loss of data sent after the reduction. The client's clock has
/// another epoch than the daemon's (its zero is the daemon's 1 s).
#[test]
fn a_lost_data_age_reaches_the_core_on_the_daemons_clock() {
    cm_daemon::log::set_quiet(true);
    let daemon = |ms: u64| SEC + ms * 1000;
    let client = |ms: u64| Instant::from_micros(ms * 1000);
    let run = |lost_sent_ms: Option<u64>| {
        let mut h = Harness::new(DaemonConfig::default()).unwrap();
        let t = h
            .connect(1000, 1, Instant::from_micros(daemon(0)))
            .unwrap()
            .unwrap();
        let hello = ToDaemon::Hello {
            version: cm_ipc::VERSION,
        };
        send(&mut h, t, &hello, daemon(0));
        let open = ToDaemon::Open {
            seq: 1,
            src: None,
            dst: "192.0.2.1:80".parse().unwrap(),
        };
        let [ToClient::Opened { flow, .. }] = send(&mut h, t, &open, daemon(0))[..] else {
            panic!("not opened");
        };
        // Each call at `ms` on both clocks; returns the macroflow's window.
        let mut call = |m: ToDaemon, ms: u64| {
            send(&mut h, t, &m, daemon(ms));
            send(&mut h, t, &ToDaemon::Stat { seq: 9 }, daemon(ms))
                .iter()
                .find_map(|m| match m {
                    ToClient::StatMacroflow { stat, .. } => Some(stat.window),
                    _ => None,
                })
                .unwrap()
        };
        let update = |fb: Feedback, ms: u64| ToDaemon::update(flow, &fb, client(ms));
        let (mtu, rtt) = (1460, Duration::from_millis(100));
        call(
            ToDaemon::Notify {
                flow,
                nsent: 10 * mtu,
            },
            0,
        );
        call(update(Feedback::acked(mtu, rtt), 100), 100);
        let halved = call(
            update(Feedback::lossy(mtu, 0, LossMode::Transient), 100),
            100,
        );
        call(
            ToDaemon::Notify {
                flow,
                nsent: 4 * mtu,
            },
            150,
        );
        call(update(Feedback::acked(7 * mtu, rtt), 240), 240);
        // At 260 ms the last datagram of the old window is found lost by
        // three sent after the reduction.
        let fb = Feedback {
            lost_sent: lost_sent_ms.map(client),
            ..Feedback::lossy(4 * mtu, 3 * mtu, LossMode::Transient)
        };
        (halved, call(update(fb, 260), 260))
    };
    let (halved, after) = run(Some(0));
    assert_eq!(after, halved, "sent at 0 ms, before the reduction");
    let (halved, after) = run(None);
    assert!(after < halved, "by byte count alone: {after} vs {halved}");
    let (halved, after) = run(Some(150));
    assert!(
        after < halved,
        "sent at 150 ms, after the reduction: {after}"
    );
}
