//! TCP NewReno over the test pipe: handshake, growth, loss recovery, RTO,
//! Karn, delayed ACKs.
#![allow(clippy::unwrap_used)]

mod common;

use cm_core::{Duration, Instant};
use cm_transport::{TcpConfig, TcpReceiver, TcpReceiverConfig, TcpSender};
use common::{Conn, Pipe, secs};

const MSS: u64 = 1460;

fn conn(cfg: TcpConfig, rcfg: TcpReceiverConfig, pipe: Pipe) -> Conn {
    let snd = TcpSender::new(cfg, Instant::ZERO).unwrap();
    let rcv = TcpReceiver::new(rcfg).unwrap();
    Conn::new(snd, rcv, pipe, None)
}

fn bulk(total: u64) -> TcpConfig {
    TcpConfig {
        total: Some(total),
        ..TcpConfig::default()
    }
}

/// 10 Mbit/s, 20 ms each way, a queue larger than the 64 KB receive window.
fn clean_pipe() -> Pipe {
    Pipe::new(20, 1_250_000, 100)
}

#[test]
fn handshake_then_bulk_transfer_delivers_every_byte() {
    let total = 1_000_000;
    let mut c = conn(
        TcpConfig {
            send_fin: true,
            ..bulk(total)
        },
        TcpReceiverConfig::default(),
        Pipe::new(20, 125_000, 10), // 1 Mbit/s, small queue: some drops
    );
    assert!(c.run_until(secs(60), |c| c.snd.is_complete()));
    assert_eq!(c.rcv.bytes_delivered(), total);
    assert!(c.rcv.fin_received());
    let st = c.snd.stats();
    assert_eq!(st.bytes_acked, total);
    // The handshake RTT (2 * 20 ms plus two header-only transmissions) seeded
    // the estimate before any data was sent.
    let first_data = c.pipe.log[0].at;
    assert_eq!(Some(first_data), c.established_at);
    assert!(first_data >= Instant::from_micros(40_000));
    assert!(first_data < Instant::from_micros(41_000));
    // Every byte was delivered in order: nothing left buffered.
    assert!(c.rcv.buffered_ranges().is_empty());
    // A 10-packet queue against a growing window must overflow at least once.
    assert!(c.pipe.queue_drops > 0);
    assert!(st.fast_retransmits >= 1);
}

#[test]
fn slow_start_doubles_per_rtt_then_avoidance_adds_one_mss_per_rtt() {
    let cfg = TcpConfig {
        total: None,
        initial_window: 2,
        initial_ssthresh: Some(32 * MSS),
        ..TcpConfig::default()
    };
    let rcfg = TcpReceiverConfig {
        rcv_wnd: 1 << 30,
        ..TcpReceiverConfig::default()
    };
    // 1 Gbit/s: serialisation is negligible, RTT = 100 ms.
    let mut c = conn(cfg, rcfg, Pipe::new(50, 125_000_000, 10_000));
    assert!(c.run_until(secs(2), |c| c.established_at.is_some()));
    let t0 = c.established_at.unwrap();
    let mut per_rtt = Vec::new();
    for k in 0..9 {
        let at = t0 + Duration::from_millis(50 + 100 * k);
        c.run_until(at, |c| c.now >= at);
        per_rtt.push(c.snd.cwnd().unwrap());
    }
    // Slow start: 2, 4, 8, 16, 32 segments.
    let segs: Vec<u64> = per_rtt.iter().map(|w| w / MSS).collect();
    assert_eq!(&segs[..5], &[2, 4, 8, 16, 32], "{per_rtt:?}");
    // Congestion avoidance: about one MSS per RTT.
    for w in per_rtt[4..].windows(2) {
        let growth = w[1] - w[0];
        assert!(
            (MSS * 9 / 10..=MSS * 11 / 10).contains(&growth),
            "growth {growth} in {per_rtt:?}"
        );
    }
    assert_eq!(c.snd.stats().timeouts, 0);
}

#[test]
fn single_drop_one_fast_retransmit_one_halving_no_timeout() {
    let total = 300 * MSS;
    let mut c = conn(
        bulk(total),
        TcpReceiverConfig::default(),
        clean_pipe().drop(&[40]),
    );
    assert!(c.run_until(secs(30), |c| c.snd.is_complete()));
    assert_eq!(c.rcv.bytes_delivered(), total);
    let st = c.snd.stats();
    assert_eq!(st.fast_retransmits, 1);
    assert_eq!(st.retransmits, 1);
    assert_eq!(st.timeouts, 0);
    assert_eq!(c.pipe.queue_drops, 0);
    // ssthresh was set exactly once (from "infinite"), to half the flight.
    let mut thresholds: Vec<u64> = c.trace.iter().filter_map(|t| t.2).collect();
    thresholds.dedup();
    assert_eq!(thresholds.len(), 2, "{thresholds:?}");
    let cwnd_before = c
        .trace
        .iter()
        .take_while(|t| t.2 == Some(thresholds[0]))
        .filter_map(|t| t.1)
        .last()
        .unwrap();
    let halved = thresholds[1];
    assert!(halved <= cwnd_before / 2 + MSS && halved >= cwnd_before / 2 - 2 * MSS);
    // The retransmission is the dropped segment, sent right after 3 dupacks.
    let lost = c.pipe.log[40];
    assert!(lost.dropped);
    assert_eq!(c.sends_of(lost.seq).len(), 2);
}

#[test]
fn multiple_drops_in_one_window_recover_with_partial_acks_without_rto() {
    let total = 300 * MSS;
    let mut c = conn(
        bulk(total),
        TcpReceiverConfig::default(),
        clean_pipe().drop(&[40, 42, 45]),
    );
    assert!(c.run_until(secs(30), |c| c.snd.is_complete()));
    assert_eq!(c.rcv.bytes_delivered(), total);
    let st = c.snd.stats();
    assert_eq!(st.fast_retransmits, 1, "{st:?}");
    assert_eq!(st.partial_acks, 2, "{st:?}");
    assert_eq!(st.retransmits, 3, "{st:?}");
    assert_eq!(st.timeouts, 0, "{st:?}");
}

#[test]
fn burst_of_losses_times_out_with_exponential_backoff() {
    // 20 segments; the last 10 and then the first retransmission are lost:
    // no duplicate ACKs can arrive, so only the timer recovers.
    let total = 20 * MSS;
    let mut drops: Vec<u64> = (10..20).collect();
    drops.push(20);
    let mut c = conn(
        bulk(total),
        TcpReceiverConfig::default(),
        clean_pipe().drop(&drops),
    );
    assert!(c.run_until(secs(10), |c| c.snd.stats().timeouts >= 1));
    let rto_after_one = c.snd.stats().rto;
    assert!(c.run_until(secs(10), |c| c.snd.stats().timeouts >= 2));
    let rto_after_two = c.snd.stats().rto;
    assert_eq!(rto_after_two, rto_after_one.saturating_mul(2));
    assert!(c.run_until(secs(30), |c| c.snd.is_complete()));
    assert_eq!(c.rcv.bytes_delivered(), total);
    let hole = c.pipe.log[10].seq;
    let sends = c.sends_of(hole);
    assert_eq!(sends.len(), 3, "{sends:?}");
    // The second retransmission waited exactly the doubled RTO.
    assert_eq!(sends[2] - sends[1], rto_after_one);
    let st = c.snd.stats();
    assert_eq!(st.timeouts, 2);
    assert_eq!(st.fast_retransmits, 0);
    assert!(rto_after_one >= Duration::from_millis(400));
}

/// Lose the last segment so that only the timer repairs it; count RTT samples.
fn tail_loss(timestamps: bool) -> (u64, u64) {
    let total = 10 * MSS;
    let cfg = TcpConfig {
        timestamps,
        ..bulk(total)
    };
    let mut c = conn(cfg, TcpReceiverConfig::default(), clean_pipe().drop(&[9]));
    assert!(c.run_until(secs(10), |c| c.snd.stats().timeouts >= 1));
    let before = c.snd.stats().rtt_samples;
    assert!(c.run_until(secs(10), |c| c.snd.is_complete()));
    (before, c.snd.stats().rtt_samples)
}

#[test]
fn karn_takes_no_rtt_sample_from_a_retransmitted_segment() {
    let (before, after) = tail_loss(false);
    assert!(before >= 2);
    assert_eq!(after, before);
    // With timestamps the echo makes the same ACK a valid sample.
    let (before, after) = tail_loss(true);
    assert_eq!(after, before + 1);
}

#[test]
fn delayed_acks_acknowledge_every_second_segment() {
    let total = 40 * MSS;
    let rcfg = TcpReceiverConfig {
        delayed_ack: Some(Duration::from_millis(200)),
        ..TcpReceiverConfig::default()
    };
    let mut c = conn(bulk(total), rcfg, clean_pipe());
    assert!(c.run_until(secs(30), |c| c.snd.is_complete()));
    let rs = c.rcv.stats();
    assert_eq!(rs.segments, 40);
    // SYN-ACK + one ACK per two segments (+ at most a few timer-driven ones
    // for an odd segment at the end of a flight).
    let acks = rs.acks_sent - 1;
    assert!((20..=23).contains(&acks), "{acks} ACKs for 40 segments");
}

#[test]
fn a_lone_segment_is_acked_by_the_delayed_ack_timer() {
    use cm_transport::{Flags, TcpSegment};
    let mut r = TcpReceiver::new(TcpReceiverConfig {
        delayed_ack: Some(Duration::from_millis(40)),
        ..TcpReceiverConfig::default()
    })
    .unwrap();
    let t = Instant::ZERO;
    r.handle_segment(
        t,
        &TcpSegment {
            flags: Flags::SYN,
            ..Default::default()
        },
    );
    assert!(r.poll_transmit(t).is_some());
    let seg = TcpSegment {
        seq: 1,
        len: 1460,
        flags: Flags::ACK,
        ..Default::default()
    };
    r.handle_segment(t, &seg);
    assert_eq!(r.poll_transmit(t), None);
    assert_eq!(r.poll_timeout(), Some(Instant::from_micros(40_000)));
    r.handle_timeout(Instant::from_micros(40_000));
    assert_eq!(r.poll_transmit(t).map(|a| a.ack), Some(1461));
}

#[test]
fn write_adds_data_after_completion() {
    let mut c = conn(bulk(5 * MSS), TcpReceiverConfig::default(), clean_pipe());
    assert!(c.run_until(secs(5), |c| c.snd.is_complete()));
    c.snd.write(7 * MSS).unwrap();
    assert!(!c.snd.is_complete());
    assert!(c.run_until(secs(10), |c| c.snd.is_complete()));
    assert_eq!(c.rcv.bytes_delivered(), 12 * MSS);
}

#[test]
fn receiver_window_limits_the_flight() {
    let rcfg = TcpReceiverConfig {
        rcv_wnd: 4 * MSS as u32,
        ..TcpReceiverConfig::default()
    };
    let mut c = conn(bulk(100 * MSS), rcfg, clean_pipe());
    let mut max_out = 0;
    assert!(c.run_until(secs(30), |c| {
        max_out = max_out.max(c.snd.bytes_outstanding());
        c.snd.is_complete()
    }));
    assert_eq!(max_out, 4 * MSS);
}

#[test]
fn many_holes_in_one_window_end_in_a_timeout_not_one_rtt_per_hole() {
    // RFC 6582 §3.2 step 5 / §4 (Impatient): only the first partial ACK
    // restarts the retransmission timer, so twenty holes in one window are
    // repaired by a timeout and go-back-N, not by twenty round trips of
    // partial ACKs (which "Slow-but-Steady" would take).
    let total = 400 * MSS;
    let drops: Vec<u64> = (60..100).step_by(2).collect();
    let mut c = conn(
        bulk(total),
        TcpReceiverConfig::default(),
        clean_pipe().drop(&drops),
    );
    assert!(c.run_until(secs(60), |c| c.snd.is_complete()));
    assert_eq!(c.rcv.bytes_delivered(), total);
    let st = c.snd.stats();
    // Twenty holes at one per 40 ms round trip outlast the 200 ms RTO that
    // only the first partial ACK restarted.
    assert_eq!(st.timeouts, 1, "{st:?}");
}
