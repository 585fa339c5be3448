//! NewReno around a retransmission timeout, driven by hand (no pipe): the
//! ssthresh rule ([`SsthreshRule`]), ssthresh when the timeout comes inside
//! a SACK recovery, and cwnd growth from ACKs of segments sent before the
//! timeout (issue 22: a late RTO inside SACK recovery, then ACKs of the
//! old flight took cwnd from 2 to about 100 segments within one round
//! trip and the burst filled the bottleneck queue).
#![allow(clippy::unwrap_used)]

mod common;

use cm_core::{Duration, Instant};
use cm_transport::tcp::SsthreshRule;
use cm_transport::{Flags, TcpConfig, TcpSegment, TcpSender};

const MSS: u64 = 1460;
/// Sequence number of the first data byte.
const FIRST: u64 = 1;

fn ms(n: u64) -> Instant {
    Instant::from_micros(n * 1000)
}

fn ack_seg(ack: u64, flags: Flags, sack: &[(u64, u64)]) -> TcpSegment {
    common::ack_segment(ack, flags, sack)
}

/// Start of the `i`-th full segment.
fn seg(i: u64) -> u64 {
    FIRST + i * MSS
}

/// A sender with `iw` segments of initial window, established at 100 ms
/// (one RTT sample of 100 ms, RTO 300 ms), its first window sent.
fn established(iw: u32, sack: bool, rule: SsthreshRule, total: Option<u64>) -> (TcpSender, usize) {
    let cfg = TcpConfig {
        initial_window: iw,
        sack,
        ssthresh_rule: rule,
        total,
        ..TcpConfig::default()
    };
    let mut s = TcpSender::new(cfg, Instant::ZERO).unwrap();
    assert!(
        s.poll_transmit(Instant::ZERO)
            .unwrap()
            .flags
            .contains(Flags::SYN)
    );
    let flags = if sack {
        Flags::SYN | Flags::ACK | Flags::SACK_OK
    } else {
        Flags::SYN | Flags::ACK
    };
    s.handle_segment(ms(100), &ack_seg(FIRST, flags, &[]));
    assert!(s.is_established());
    let sent = drain(&mut s, ms(100));
    (s, sent)
}

/// Every segment the sender wants to send at `now`.
fn drain(s: &mut TcpSender, now: Instant) -> usize {
    let mut n = 0;
    while s.poll_transmit(now).is_some() {
        n += 1;
        assert!(n < 10_000, "sender does not stop");
    }
    n
}

/// Let the retransmission timer fire; returns when.
fn fire_rto(s: &mut TcpSender) -> Instant {
    let at = s.poll_timeout().unwrap();
    s.handle_timeout(at);
    drain(s, at);
    at
}

/// A timeout while 40 segments are in flight, none of them lost (a delay
/// spike); then their ACKs arrive 1 ms apart, all within one RTT of the
/// timeout. They acknowledge segments sent before the timeout, not the
/// post-timeout window of one segment, so slow start must not grow cwnd
/// by one SMSS for each of them: cwnd may at most double in that round
/// trip. Before the fix cwnd reached ssthresh (20 segments) at once.
#[test]
fn acks_of_segments_sent_before_a_timeout_do_not_grow_cwnd() {
    for sack in [false, true] {
        let (mut s, sent) = established(40, sack, SsthreshRule::FlightSize, None);
        assert_eq!(sent, 40);
        let t = fire_rto(&mut s);
        assert_eq!(
            t,
            ms(400),
            "RTO = 100 ms + 4 x 50 ms after the 100 ms sample"
        );
        assert_eq!(s.cwnd(), Some(MSS));
        let mut max_cwnd = 0;
        for k in 1..=40 {
            let now = t + Duration::from_millis(k);
            s.handle_segment(now, &ack_seg(seg(k), Flags::ACK, &[]));
            drain(&mut s, now);
            max_cwnd = max_cwnd.max(s.cwnd().unwrap());
        }
        assert!(
            max_cwnd <= 2 * MSS,
            "sack = {sack}: cwnd grew to {} segments on ACKs of the pre-timeout flight",
            max_cwnd / MSS
        );
        // ACKs of what was sent after the timeout, one RTT apart, grow it
        // again (slow start towards ssthresh = 20 segments).
        let mut una = seg(40);
        for round in 1..=3 {
            let now = t + Duration::from_millis(100 + 100 * round);
            let top = una + s.bytes_outstanding();
            while una < top {
                una = (una + MSS).min(top);
                s.handle_segment(now, &ack_seg(una, Flags::ACK, &[]));
                drain(&mut s, now);
            }
        }
        assert!(
            s.cwnd().unwrap() >= 4 * MSS,
            "sack = {sack}: slow start resumes"
        );
        assert_eq!(s.stats().ssthresh, Some(20 * MSS));
    }
}

/// Segment 0 of a 40-segment window is lost; SACKs of the other 39 start
/// and drive SACK recovery (ssthresh = cwnd = FlightSize / 2 = 20
/// segments) and new data; the retransmission is lost too and the timer
/// fires with FlightSize near 60 segments, half of them SACKed. The
/// timeout must not raise ssthresh above the recovery's.
#[test]
fn a_timeout_inside_sack_recovery_does_not_raise_ssthresh() {
    let (mut s, _) = established(40, true, SsthreshRule::FlightSize, None);
    let mut entry = None;
    for i in 1..40 {
        let now = ms(200 + i);
        s.handle_segment(now, &ack_seg(FIRST, Flags::ACK, &[(seg(1), seg(i + 1))]));
        drain(&mut s, now);
        if s.in_recovery() && entry.is_none() {
            entry = s.stats().ssthresh;
        }
    }
    assert_eq!(entry, Some(20 * MSS));
    let flight = s.bytes_outstanding();
    assert!(flight > 50 * MSS, "flight {} segments", flight / MSS);
    fire_rto(&mut s);
    let after = s.stats().ssthresh.unwrap();
    assert!(
        after <= 20 * MSS,
        "the timeout raised ssthresh from 20 to {} segments (FlightSize/2 of {} segments)",
        after / MSS,
        flight / MSS
    );
    assert_eq!(s.cwnd(), Some(MSS));
}

/// What each rule halves when the third SACKed duplicate ACK starts
/// recovery: 30 segments outstanding of a 40-segment cwnd (the
/// application had no more), 3 SACKed, 1 lost.
#[test]
fn the_ssthresh_rule_picks_what_is_halved() {
    for (rule, want) in [
        (SsthreshRule::FlightSize, 15),
        (SsthreshRule::Pipe, 13),
        (SsthreshRule::Cwnd, 20),
    ] {
        let (mut s, sent) = established(40, true, rule, Some(30 * MSS));
        assert_eq!(sent, 30);
        for i in 1..=3 {
            s.handle_segment(
                ms(200 + i),
                &ack_seg(FIRST, Flags::ACK, &[(seg(1), seg(i + 1))]),
            );
        }
        assert!(s.in_recovery(), "{rule}");
        assert_eq!(s.stats().ssthresh, Some(want * MSS), "{rule}");
    }
}

#[test]
fn ssthresh_rules_parse_by_name() {
    for r in [
        SsthreshRule::FlightSize,
        SsthreshRule::Pipe,
        SsthreshRule::Cwnd,
    ] {
        assert_eq!(r.name().parse::<SsthreshRule>(), Ok(r));
    }
    let e = "half".parse::<SsthreshRule>().unwrap_err();
    assert!(e.to_string().contains("flightsize, pipe or cwnd"), "{e}");
    assert_eq!(TcpConfig::default().ssthresh_rule, SsthreshRule::FlightSize);
}
