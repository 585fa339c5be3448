//! TCP/CM driven by a real `cm_core::CongestionManager` over the test pipe.
#![allow(clippy::unwrap_used)]

mod common;

use cm_core::controller::{AimdConfig, ControllerConfig};
use cm_core::{Bytes, Config, Instant, LossMode};
use cm_transport::{CcMode, CmCall, TcpConfig, TcpReceiver, TcpReceiverConfig, TcpSender};
use common::{Cm, Conn, Pipe, secs};

const MSS: u64 = 1460;

fn cm_conn(total: u64, pipe: Pipe) -> Conn {
    let cfg = TcpConfig {
        cc: CcMode::Cm,
        total: Some(total),
        send_fin: true,
        ..TcpConfig::default()
    };
    let snd = TcpSender::new(cfg, Instant::ZERO).unwrap();
    let rcv = TcpReceiver::new(TcpReceiverConfig::default()).unwrap();
    Conn::new(snd, rcv, pipe, Some(Cm::new()))
}

/// TCP/CM asking for grants of up to `k` MTUs.
fn burst_conn(total: u64, pipe: Pipe, k: u32) -> Conn {
    let cfg = TcpConfig {
        cc: CcMode::Cm,
        total: Some(total),
        send_fin: true,
        grant_mtus: k,
        ..TcpConfig::default()
    };
    let snd = TcpSender::new(cfg, Instant::ZERO).unwrap();
    // ACKs of two segments each: the window opens two MSS at a time.
    let rcv = TcpReceiver::new(TcpReceiverConfig {
        delayed_ack: Some(cm_core::Duration::from_millis(40)),
        ..TcpReceiverConfig::default()
    })
    .unwrap();
    Conn::new(snd, rcv, pipe, Some(Cm::new()))
}

fn sums(calls: &[CmCall]) -> (u64, u64, u64) {
    let mut notified = 0;
    let mut reported = 0;
    let mut received = 0;
    for c in calls {
        match c {
            CmCall::Notify(n) => notified += n.get(),
            CmCall::Update(fb) => {
                reported += fb.nsent.get();
                received += fb.nrecd.get();
                assert!(fb.nrecd <= fb.nsent);
            }
            CmCall::Request | CmCall::RequestMtus(_) => {}
        }
    }
    (notified, reported, received)
}

fn assert_conserved(c: &Conn) {
    let cm = c.cm.as_ref().unwrap();
    let (notified, reported, _) = sums(&cm.calls);
    assert_eq!(notified, reported, "every notified byte reported once");
    assert_eq!(c.snd.cm_bytes(), Some((Bytes(notified), Bytes(reported))));
    assert_eq!(cm.in_flight(), 0, "the CM's in-flight returns to zero");
}

#[test]
fn transfer_over_a_clean_pipe_uses_only_grants() {
    let total = 200 * MSS;
    let mut c = cm_conn(total, Pipe::new(20, 1_250_000, 100));
    assert!(c.run_until(secs(30), |c| c.snd.is_complete()));
    assert_eq!(c.rcv.bytes_delivered(), total);
    assert_eq!(c.snd.cwnd(), None);
    let cm = c.cm.as_ref().unwrap();
    // The handshake seeded the CM's RTT estimate with a sample-only update.
    let first_update = cm.calls.iter().find_map(|c| match c {
        CmCall::Update(fb) => Some(*fb),
        _ => None,
    });
    let fb = first_update.unwrap();
    assert_eq!(fb.nsent, Bytes::ZERO);
    assert!(fb.rtt.is_some());
    // Every data transmission answered a grant: one Notify per segment.
    let notifies = cm
        .calls
        .iter()
        .filter(|c| matches!(c, CmCall::Notify(n) if n.get() > 0))
        .count();
    assert_eq!(notifies, c.pipe.log.len());
    // Request discipline: never two requests without a grant between them.
    let info = cm.cm.flow_info(cm.flow).unwrap();
    assert_eq!(info.pending, Bytes::ZERO);
    assert_conserved(&c);
    let (_, _, received) = sums(&cm.calls);
    assert_eq!(received, total);
}

#[test]
fn transfer_over_a_lossy_pipe_conserves_bytes() {
    let total = 400 * MSS;
    // Single drops, a window with several drops, and a small queue.
    let pipe = Pipe::new(20, 250_000, 15).drop(&[30, 100, 102, 105, 250]);
    let mut c = cm_conn(total, pipe);
    assert!(c.run_until(secs(120), |c| c.snd.is_complete()));
    assert_eq!(c.rcv.bytes_delivered(), total);
    let st = c.snd.stats();
    assert!(st.fast_retransmits >= 2, "{st:?}");
    assert!(st.retransmits >= 5, "{st:?}");
    let cm = c.cm.as_ref().unwrap();
    let transient = cm
        .calls
        .iter()
        .filter(|c| matches!(c, CmCall::Update(fb) if fb.loss == LossMode::Transient))
        .count() as u64;
    assert_eq!(transient, st.fast_retransmits);
    assert_conserved(&c);
}

#[test]
fn timeout_reports_persistent_congestion_and_conserves_bytes() {
    let total = 20 * MSS;
    let drops: Vec<u64> = (10..21).collect();
    let mut c = cm_conn(total, Pipe::new(20, 1_250_000, 100).drop(&drops));
    assert!(c.run_until(secs(60), |c| c.snd.is_complete()));
    assert_eq!(c.rcv.bytes_delivered(), total);
    let st = c.snd.stats();
    assert_eq!(st.timeouts, 2, "{st:?}");
    let cm = c.cm.as_ref().unwrap();
    let persistent: Vec<_> = cm
        .calls
        .iter()
        .filter_map(|c| match c {
            CmCall::Update(fb) if fb.loss == LossMode::Persistent => Some(*fb),
            _ => None,
        })
        .collect();
    assert_eq!(persistent.len(), 2);
    assert!(persistent[0].nsent.get() > 0 && persistent[0].nrecd == Bytes::ZERO);
    assert_conserved(&c);
}

/// Regression (issue 3, layered-audio q4 control at 0.48x NewReno): at the
/// third duplicate ACK TCP/CM reported only the lost segment, so the three
/// segments whose arrival caused the duplicate ACKs stayed "in flight" in
/// the CM. With a window under 8 segments the halved window then had no
/// room left to grant the retransmission and the flow stalled until its
/// RTO, after every single loss. RFC 5681 §3.2 step 3 counts exactly those
/// three segments as having left the network.
#[test]
fn regression_third_dupack_reports_the_three_departed_segments() {
    let total = 40 * MSS;
    // Slow start from 2 segments: the 3rd data segment is lost while the
    // window is 4 segments; halved to 2, it had no room for the
    // retransmission while the three departed segments still counted.
    let cfg = Config {
        controller: ControllerConfig::Aimd(AimdConfig {
            initial_window: Some(Bytes(2 * MSS)),
            ..AimdConfig::default()
        }),
        ..Config::default()
    };
    let snd = TcpSender::new(
        TcpConfig {
            cc: CcMode::Cm,
            total: Some(total),
            send_fin: true,
            ..TcpConfig::default()
        },
        Instant::ZERO,
    )
    .unwrap();
    let rcv = TcpReceiver::new(TcpReceiverConfig::default()).unwrap();
    let pipe = Pipe::new(20, 1_250_000, 100).drop(&[2]);
    let mut c = Conn::new(snd, rcv, pipe, Some(Cm::with_config(cfg)));
    assert!(c.run_until(secs(30), |c| c.snd.is_complete()));
    let st = c.snd.stats();
    assert_eq!(st.fast_retransmits, 1, "{st:?}");
    assert_eq!(
        st.timeouts, 0,
        "the retransmission waited for the RTO: {st:?}"
    );
    let cm = c.cm.as_ref().unwrap();
    // The third duplicate ACK: the hole lost, then three segments arrived.
    let i = cm
        .calls
        .iter()
        .position(|c| matches!(c, CmCall::Update(fb) if fb.loss == LossMode::Transient))
        .unwrap();
    match cm.calls[i + 1] {
        CmCall::Update(fb) => {
            assert_eq!((fb.nsent, fb.nrecd), (Bytes(3 * MSS), Bytes(3 * MSS)));
            assert_eq!(fb.loss, LossMode::None);
        }
        other => panic!("expected the departed segments, got {other:?}"),
    }
    assert_conserved(&c);
}

#[test]
fn newreno_mode_never_yields_cm_calls_and_ignores_grants() {
    let mut s = TcpSender::new(TcpConfig::default(), Instant::ZERO).unwrap();
    assert!(s.poll_transmit(Instant::ZERO).is_some());
    assert_eq!(s.on_grant(Instant::ZERO, Bytes(MSS)), None);
    assert_eq!(s.poll_cm(), None);
}

#[test]
fn multi_mtu_grants_become_several_full_segments_and_conserve_bytes() {
    for (pipe, name) in [
        (Pipe::new(20, 1_250_000, 100), "clean"),
        (
            Pipe::new(20, 250_000, 15).drop(&[30, 100, 102, 105, 250]),
            "lossy",
        ),
    ] {
        let total = 400 * MSS + 700;
        let mut c = burst_conn(total, pipe, 8);
        assert!(c.run_until(secs(120), |c| c.snd.is_complete()), "{name}");
        assert_eq!(c.rcv.bytes_delivered(), total, "{name}");
        let cm = c.cm.as_ref().unwrap();
        assert!(
            cm.calls.iter().any(|c| matches!(c, CmCall::RequestMtus(8))),
            "{name}: k-MTU requests"
        );
        let grants = cm
            .calls
            .iter()
            .filter(|c| matches!(c, CmCall::Notify(n) if n.get() > 0))
            .count();
        let data: Vec<_> = c.pipe.log.iter().filter(|s| s.len > 0).collect();
        // Each ACK of two segments opens two MSS: on the clean pipe most
        // grants cover two. In loss recovery every duplicate ACK (sent at
        // once for out-of-order data) opens one.
        let most = if name == "clean" {
            3 * grants < 2 * data.len()
        } else {
            grants < data.len()
        };
        assert!(most, "{name}: {grants} grants for {} segments", data.len());
        // No runts: a grant's leftover below one MSS is not sent.
        let short = data.iter().filter(|s| u64::from(s.len) < MSS).count();
        assert!(short <= 1 + 5, "{name}: {short} short segments");
        assert_conserved(&c);
    }
}

/// A k-MTU TCP/CM sender held by the receiver's window (16 segments) on a
/// fast pipe, where the CM's window would allow far more.
fn window_limited(k: u32) -> Conn {
    let cfg = TcpConfig {
        cc: CcMode::Cm,
        total: Some(600 * MSS),
        send_fin: true,
        grant_mtus: k,
        ..TcpConfig::default()
    };
    let snd = TcpSender::new(cfg, Instant::ZERO).unwrap();
    let rcv = TcpReceiver::new(TcpReceiverConfig {
        rcv_wnd: 16 * MSS as u32,
        delayed_ack: Some(cm_core::Duration::from_millis(40)),
        ..TcpReceiverConfig::default()
    })
    .unwrap();
    Conn::new(snd, rcv, Pipe::new(20, 12_500_000, 1000), Some(Cm::new()))
}

#[test]
fn k_mtu_requests_ask_only_for_what_the_receive_window_lets_out() {
    let mut c = window_limited(44);
    assert!(c.run_until(secs(60), |c| c.snd.is_complete()));
    assert_eq!(c.rcv.bytes_delivered(), 600 * MSS);
    let cm = c.cm.as_ref().unwrap();
    // A request the sender could not fill would come back as grants it
    // declines (`Notify(0)`), each a wasted event and call.
    let declined = cm
        .calls
        .iter()
        .filter(|c| matches!(c, CmCall::Notify(n) if n.get() == 0))
        .count();
    assert_eq!(declined, 0, "declined grants");
    let most = cm
        .calls
        .iter()
        .filter_map(|c| match c {
            CmCall::RequestMtus(k) => Some(*k),
            CmCall::Request => Some(1),
            _ => None,
        })
        .max()
        .unwrap();
    assert!(
        most <= 16,
        "asked for {most} MTUs at once, the window holds 16"
    );
    // Requested and granted MTUs balance: nothing is left asked for.
    let requested: u64 = cm
        .calls
        .iter()
        .map(|c| match c {
            CmCall::RequestMtus(k) => u64::from(*k),
            CmCall::Request => 1,
            _ => 0,
        })
        .sum();
    // The pipe's CM has an MTU of one MSS: a grant's MTUs are its bytes
    // over the MSS.
    let granted: u64 = cm
        .calls
        .iter()
        .map(|c| match c {
            CmCall::Notify(n) => n.get().div_ceil(MSS),
            _ => 0,
        })
        .sum();
    assert!(
        requested <= granted + 1,
        "{requested} MTUs requested, {granted} granted"
    );
    assert_conserved(&c);
}

#[test]
fn a_sender_whose_cm_lost_its_requests_asks_again() {
    for told in [true, false] {
        let mut c = window_limited(44);
        assert!(c.run_until(secs(60), |c| c.rcv.bytes_delivered() > 200 * MSS));
        // The handle moved to a CM that holds none of its requests.
        c.cm = Some(Cm::new());
        if told {
            c.snd.cm_requests_lost();
        }
        assert!(
            c.run_until(secs(120), |c| c.snd.is_complete()),
            "told: {told}"
        );
        assert_eq!(c.rcv.bytes_delivered(), 600 * MSS);
        if told {
            assert_eq!(c.snd.stats().timeouts, 0, "no timeout when told");
        }
    }
}

#[test]
fn the_receiver_measures_the_round_trip_from_timestamp_echoes() {
    for timestamps in [true, false] {
        let cfg = TcpConfig {
            cc: CcMode::Cm,
            total: Some(200 * MSS),
            send_fin: true,
            timestamps,
            ..TcpConfig::default()
        };
        let snd = TcpSender::new(cfg, Instant::ZERO).unwrap();
        let rcv = TcpReceiver::new(TcpReceiverConfig::default()).unwrap();
        // 20 ms each way, 10 Mbit/s: about 1.2 ms per segment.
        let mut c = Conn::new(snd, rcv, Pipe::new(20, 1_250_000, 100), Some(Cm::new()));
        assert!(c.run_until(secs(30), |c| c.snd.is_complete()));
        // Every segment carries the timestamp fields (the sender's option
        // only chooses how it samples the RTT itself), so the receiver
        // measures either way: at least the 40 ms of propagation, and near
        // what the sender measures (both include the queue the window
        // builds).
        let rtt = c.rcv.rtt_estimate().expect("an estimate");
        let ms = rtt.as_micros() as f64 / 1000.0;
        let srtt = c.snd.stats().srtt.unwrap().as_micros() as f64 / 1000.0;
        assert!(ms >= 40.0, "receiver's RTT {ms} ms");
        assert!(
            (ms - srtt).abs() <= 0.25 * srtt,
            "timestamps {timestamps}: receiver's RTT {ms} ms, sender's {srtt} ms"
        );
    }
}
