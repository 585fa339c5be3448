//! SACK (RFC 2018 blocks, RFC 6675 recovery) over the test pipe, for
//! NewReno and TCP/CM, each compared with the same run without SACK.
#![allow(clippy::unwrap_used)]

mod common;

use cm_core::{Bytes, Duration, Instant, LossMode};
use cm_transport::{CcMode, CmCall, Flags, TcpConfig, TcpReceiver, TcpReceiverConfig, TcpSender};
use common::{Cm, Conn, Pipe, secs};

const MSS: u64 = 1460;

fn cfg(total: u64, sack: bool, cc: CcMode) -> TcpConfig {
    TcpConfig {
        total: Some(total),
        send_fin: true,
        sack,
        cc,
        ..TcpConfig::default()
    }
}

fn conn(cfg: TcpConfig, pipe: Pipe) -> Conn {
    let cm = (cfg.cc == CcMode::Cm).then(Cm::new);
    let snd = TcpSender::new(cfg, Instant::ZERO).unwrap();
    // A window that never limits (so NextSeg rule 2 always has new data).
    let rcv = TcpReceiver::new(TcpReceiverConfig {
        rcv_wnd: 1 << 24,
        ..TcpReceiverConfig::default()
    })
    .unwrap();
    Conn::new(snd, rcv, pipe, cm)
}

/// Transmissions of bytes whose earlier copy was not dropped (the
/// receiver already had them, or would have).
fn needless_copies(c: &Conn) -> usize {
    let mut delivered: Vec<(u64, u64)> = Vec::new();
    let mut n = 0;
    for s in &c.pipe.log {
        let (a, b) = (s.seq, s.seq + u64::from(s.len));
        if delivered.iter().any(|&(x, y)| x <= a && b <= y) {
            n += 1;
        }
        if !s.dropped {
            delivered.push((a, b));
        }
    }
    n
}

/// Times of the retransmissions (second and later copies of a sequence number).
fn retransmission_times(c: &Conn) -> Vec<Instant> {
    let mut seen = std::collections::BTreeSet::new();
    c.pipe
        .log
        .iter()
        .filter(|s| !seen.insert(s.seq))
        .map(|s| s.at)
        .collect()
}

fn assert_cm_conserved(c: &Conn) {
    let cm = c.cm.as_ref().unwrap();
    let (mut notified, mut reported) = (0, 0);
    for call in &cm.calls {
        match call {
            CmCall::Notify(n) => notified += n.get(),
            CmCall::Update(fb) => {
                assert!(fb.nrecd <= fb.nsent);
                reported += fb.nsent.get();
            }
            CmCall::Request | CmCall::RequestMtus(_) => {}
        }
    }
    assert_eq!(notified, reported, "every notified byte reported once");
    assert_eq!(c.snd.cm_bytes(), Some((Bytes(notified), Bytes(reported))));
    assert_eq!(cm.in_flight(), 0, "the CM's in-flight returns to zero");
}

#[test]
fn sack_is_negotiated_on_the_syn_only_when_asked() {
    for (ask, cc) in [
        (true, CcMode::NewReno),
        (false, CcMode::NewReno),
        (true, CcMode::Cm),
    ] {
        let mut s = TcpSender::new(cfg(10 * MSS, ask, cc), Instant::ZERO).unwrap();
        let syn = s.poll_transmit(Instant::ZERO).unwrap();
        assert_eq!(syn.flags.contains(Flags::SACK_OK), ask);
        let mut r = TcpReceiver::new(TcpReceiverConfig::default()).unwrap();
        r.handle_segment(Instant::ZERO, &syn);
        let synack = r.poll_transmit(Instant::ZERO).unwrap();
        assert_eq!(synack.flags.contains(Flags::SACK_OK), ask);
        assert_eq!(r.sack_enabled(), ask);
        s.handle_segment(Instant::from_micros(1000), &synack);
        assert!(s.is_established());
        assert_eq!(s.sack_enabled(), ask);
    }
    // A receiver that does not agree (a SYN-ACK without SACK_OK): no SACK.
    let mut s = TcpSender::new(cfg(10 * MSS, true, CcMode::NewReno), Instant::ZERO).unwrap();
    let _syn = s.poll_transmit(Instant::ZERO).unwrap();
    let synack = cm_transport::TcpSegment {
        flags: Flags::SYN | Flags::ACK,
        ack: 1,
        wnd: 65_535,
        ..Default::default()
    };
    s.handle_segment(Instant::from_micros(1000), &synack);
    assert!(s.is_established() && !s.sack_enabled());
}

/// Four holes in one window (10 Mbit/s, 20 ms each way). With SACK all four
/// are retransmitted within one round trip of the fast retransmit; NewReno
/// repairs one hole per round trip (partial ACKs).
#[test]
fn several_holes_repaired_in_one_rtt_with_sack_one_per_rtt_without() {
    let total = 200 * MSS;
    let drops = [40, 43, 46, 49];
    let run = |sack| {
        let mut c = conn(
            cfg(total, sack, CcMode::NewReno),
            Pipe::new(20, 1_250_000, 100).drop(&drops),
        );
        assert!(c.run_until(secs(30), |c| c.snd.is_complete()));
        assert_eq!(c.rcv.bytes_delivered(), total);
        assert_eq!(c.pipe.queue_drops, 0);
        c
    };
    let with = run(true);
    let without = run(false);
    let (sw, sn) = (with.snd.stats(), without.snd.stats());
    let rtt = sw.srtt.unwrap();
    assert_eq!((sw.fast_retransmits, sw.timeouts), (1, 0), "{sw:?}");
    assert_eq!(sw.retransmits, 4, "only the four holes: {sw:?}");
    let r = retransmission_times(&with);
    assert_eq!(r.len(), 4);
    assert!(r[3] - r[0] < rtt, "SACK: {r:?}, rtt {rtt:?}");
    assert_eq!(needless_copies(&with), 0);
    // NewReno: one hole per RTT, the last one at least 3 RTTs after the first.
    assert_eq!(sn.fast_retransmits, 1, "{sn:?}");
    assert!(sn.partial_acks >= 3, "{sn:?}");
    let r = retransmission_times(&without);
    assert!(r.len() >= 4);
    assert!(
        r[3] - r[0] >= Duration::from_micros(rtt.as_micros() * 11 / 4),
        "NewReno: {r:?}, rtt {rtt:?}"
    );
    // And SACK finishes sooner.
    assert!(with.now < without.now);
}

/// A loss at the tail of the transfer with too little SACKed above it to
/// trigger fast recovery: the timeout fires. RFC 6675 §5.1: only the
/// un-SACKed segments are retransmitted, never the SACKed one; go-back-N
/// (no SACK) resends it too.
#[test]
fn no_retransmission_of_sacked_data_after_a_timeout() {
    let total = 50 * MSS;
    for cc in [CcMode::NewReno, CcMode::Cm] {
        let run = |sack| {
            // No FIN: its out-of-order arrival would be a third duplicate
            // ACK for NewReno without SACK.
            let cfg = TcpConfig {
                send_fin: false,
                ..cfg(total, sack, cc)
            };
            let mut c = conn(cfg, Pipe::new(20, 1_250_000, 100).drop(&[45, 47, 49]));
            assert!(c.run_until(secs(30), |c| c.snd.is_complete()));
            assert_eq!(c.rcv.bytes_delivered(), total);
            c
        };
        let with = run(true);
        let st = with.snd.stats();
        assert_eq!((st.timeouts, st.fast_retransmits), (1, 0), "{cc:?} {st:?}");
        assert_eq!(st.retransmits, 3, "{cc:?} {st:?}");
        assert_eq!(needless_copies(&with), 0, "{cc:?}");
        for k in [46, 48] {
            assert_eq!(with.sends_of(1 + k * MSS).len(), 1, "{cc:?} segment {k}");
        }
        let without = run(false);
        assert_eq!(without.snd.stats().timeouts, 1);
        // Go-back-N resends segment 48 (46 is skipped: the cumulative
        // ACK for the retransmitted 45 covers it).
        assert!(needless_copies(&without) >= 1, "{cc:?} go-back-N");
        if cc == CcMode::Cm {
            assert_cm_conserved(&with);
            assert_cm_conserved(&without);
        }
    }
}

/// A fast recovery whose retransmission is lost again ends in a timeout;
/// after it, SACKed data is not sent again.
#[test]
fn lost_retransmission_then_timeout_skips_sacked_data() {
    let total = 100 * MSS;
    // Ordinal 40 is lost; its fast retransmission is the transmission after
    // the third duplicate ACK. Find it from a run without that second drop.
    let probe = {
        let mut c = conn(
            cfg(total, true, CcMode::NewReno),
            Pipe::new(20, 1_250_000, 100).drop(&[40, 42]),
        );
        assert!(c.run_until(secs(30), |c| c.snd.is_complete()));
        c.pipe
            .log
            .iter()
            .position(|s| s.seq == 1 + 40 * MSS && s.at > c.pipe.log[40].at)
            .unwrap() as u64
    };
    let mut c = conn(
        cfg(total, true, CcMode::NewReno),
        Pipe::new(20, 1_250_000, 100).drop(&[40, 42, probe]),
    );
    assert!(c.run_until(secs(30), |c| c.snd.is_complete()));
    assert_eq!(c.rcv.bytes_delivered(), total);
    let st = c.snd.stats();
    assert_eq!(st.timeouts, 1, "{st:?}");
    // Segment 40 is sent three times (original, fast retransmit, after the
    // RTO); everything else at most twice (42: original and retransmission),
    // and nothing that had arrived is sent again.
    assert_eq!(c.sends_of(1 + 40 * MSS).len(), 3);
    assert_eq!(needless_copies(&c), 0);
}

/// A 1 Mbit/s path with a 10-packet queue: slow start overflows it and
/// loses many segments per window. SACK sends far fewer copies of data the
/// receiver already had, and no more timeouts.
#[test]
fn queue_overflow_fewer_needless_retransmissions_with_sack() {
    let total = 600 * MSS;
    for cc in [CcMode::NewReno, CcMode::Cm] {
        let run = |sack| {
            let mut c = conn(cfg(total, sack, cc), Pipe::new(30, 125_000, 10));
            assert!(c.run_until(secs(200), |c| c.snd.is_complete()));
            assert_eq!(c.rcv.bytes_delivered(), total);
            if cc == CcMode::Cm {
                assert_cm_conserved(&c);
            }
            c
        };
        let (with, without) = (run(true), run(false));
        let (nw, nn) = (needless_copies(&with), needless_copies(&without));
        let (sw, sn) = (with.snd.stats(), without.snd.stats());
        assert!(
            with.pipe.queue_drops > 5,
            "{cc:?}: drops {}",
            with.pipe.queue_drops
        );
        // Not zero: after a timeout every un-SACKed byte below
        // RecoveryPoint is resent, including segments still in flight.
        assert!(nw * 2 <= nn, "{cc:?}: needless {nw} with SACK vs {nn}");
        assert!(sw.timeouts <= sn.timeouts, "{cc:?}: {sw:?} vs {sn:?}");
        assert!(
            with.now <= without.now,
            "{cc:?}: {:?} vs {:?}",
            with.now,
            without.now
        );
    }
}

/// TCP/CM with SACK and a CM in the loop: several holes in one window are
/// repaired in one round trip (without SACK: one per round trip), the CM hears of the loss once per recovery
/// episode (Transient), newly SACKed bytes are reported as arrived, and
/// every notified byte is reported exactly once.
#[test]
fn tcp_cm_with_sack_reports_one_loss_per_episode_and_conserves_bytes() {
    let total = 300 * MSS;
    let drops = [60, 62, 64, 66, 150];
    let mut c = conn(
        cfg(total, true, CcMode::Cm),
        Pipe::new(20, 1_250_000, 100).drop(&drops),
    );
    assert!(c.run_until(secs(60), |c| c.snd.is_complete()));
    assert_eq!(c.rcv.bytes_delivered(), total);
    let st = c.snd.stats();
    assert!(c.snd.sack_enabled());
    assert_eq!(st.timeouts, 0, "{st:?}");
    assert_eq!(st.fast_retransmits, 2, "{st:?}");
    assert_eq!(st.retransmits, 5, "{st:?}");
    assert_eq!(needless_copies(&c), 0);
    let rtt = st.srtt.unwrap();
    let r = retransmission_times(&c);
    assert!(r[3] - r[0] < rtt, "{r:?}");
    let cm = c.cm.as_ref().unwrap();
    let transient: Vec<usize> = cm
        .calls
        .iter()
        .enumerate()
        .filter(|(_, c)| matches!(c, CmCall::Update(fb) if fb.loss == LossMode::Transient))
        .map(|(i, _)| i)
        .collect();
    assert_eq!(transient.len() as u64, st.fast_retransmits);
    // No timeouts, so never persistent congestion.
    assert!(
        !cm.calls
            .iter()
            .any(|c| matches!(c, CmCall::Update(fb) if fb.loss == LossMode::Persistent))
    );
    // The first episode: the loss report comes before the report of the
    // SACKed (arrived) bytes.
    match cm.calls[transient[0] + 1] {
        CmCall::Update(fb) => {
            assert_eq!(fb.loss, LossMode::None);
            assert!(fb.nrecd.get() >= 3 * MSS && fb.nrecd == fb.nsent, "{fb:?}");
        }
        other => panic!("expected the SACKed bytes, got {other:?}"),
    }
    assert_cm_conserved(&c);
    // Without SACK the same losses take one round trip per hole.
    let mut n = conn(
        cfg(total, false, CcMode::Cm),
        Pipe::new(20, 1_250_000, 100).drop(&drops),
    );
    assert!(n.run_until(secs(60), |c| c.snd.is_complete()));
    let r = retransmission_times(&n);
    assert!(r[3] - r[0] >= rtt.saturating_mul(2), "{r:?}");
}

/// RFC 6675 NextSeg rule (4): when the receiver window stops new data and
/// no hole is left to repair, one "rescue" retransmission of the highest
/// outstanding un-SACKed segment per recovery, once the cumulative ACK
/// passed the first retransmission; never a second one.
#[test]
fn one_rescue_retransmission_when_the_window_stops_new_data() {
    let total = 200 * MSS;
    let snd = TcpSender::new(cfg(total, true, CcMode::NewReno), Instant::ZERO).unwrap();
    // 64 KB receive window: during the recovery the holes pin SND.UNA and
    // the window, not cwnd, limits new data.
    let rcv = TcpReceiver::new(TcpReceiverConfig::default()).unwrap();
    let pipe = Pipe::new(20, 1_250_000, 100).drop(&[40, 43, 46, 49]);
    let mut c = Conn::new(snd, rcv, pipe, None);
    assert!(c.run_until(secs(30), |c| c.snd.is_complete()));
    let st = c.snd.stats();
    assert_eq!((st.fast_retransmits, st.timeouts), (1, 0), "{st:?}");
    assert_eq!(st.retransmits, 5, "four holes and one rescue: {st:?}");
    let mut seen = std::collections::BTreeSet::new();
    let rexmits: Vec<_> = c.pipe.log.iter().filter(|s| !seen.insert(s.seq)).collect();
    let holes: Vec<u64> = rexmits[..4].iter().map(|s| (s.seq - 1) / MSS).collect();
    assert_eq!(holes, vec![40, 43, 46, 49]);
    // The rescue: the highest segment sent before it.
    let rescue = rexmits[4];
    let at = c
        .pipe
        .log
        .iter()
        .position(|s| std::ptr::eq(s, rescue))
        .unwrap();
    let highest = c.pipe.log[..at].iter().map(|s| s.seq).max().unwrap();
    assert_eq!(rescue.seq, highest);
    assert_eq!(needless_copies(&c), 1);
}
