//! The retransmission timer at a fast retransmit, and ssthresh when the
//! timer fires inside the recovery that followed (issue 22's ns-2
//! referee: without the restart, a NewReno sender timed out one RTO after
//! the last new ACK, before its fast retransmission's ACK could return,
//! and took 3 and 5 timeouts in 20 s on the two-flow 1 Mbit/s dumbbell
//! where ns-2 took 1 and 1).
#![allow(clippy::unwrap_used)]

mod common;

use cm_core::{Duration, Instant};
use cm_transport::tcp::RtoInRecovery;
use cm_transport::{Flags, TcpConfig, TcpSegment, TcpSender};

const MSS: u64 = 1460;
const FIRST: u64 = 1;

fn ms(n: u64) -> Instant {
    Instant::from_micros(n * 1000)
}

fn ack(ack: u64, flags: Flags) -> TcpSegment {
    common::ack_segment(ack, flags, &[])
}

fn drain(s: &mut TcpSender, now: Instant) -> usize {
    let mut n = 0;
    while s.poll_transmit(now).is_some() {
        n += 1;
        assert!(n < 10_000);
    }
    n
}

/// A NewReno sender (no SACK) with `iw` segments sent at 100 ms, after a
/// 100 ms SYN round trip.
fn sender(iw: u32, cfg: TcpConfig) -> TcpSender {
    let mut s = TcpSender::new(
        TcpConfig {
            initial_window: iw,
            ..cfg
        },
        Instant::ZERO,
    )
    .unwrap();
    s.poll_transmit(Instant::ZERO).unwrap();
    s.handle_segment(ms(100), &ack(FIRST, Flags::SYN | Flags::ACK));
    assert_eq!(drain(&mut s, ms(100)), iw as usize);
    s
}

/// Segment 1 is ACKed at 200 ms; segment 2 is lost and three duplicate
/// ACKs arrive at 380-390 ms; returns when the fast retransmission left.
fn fast_retransmit(s: &mut TcpSender) -> Instant {
    s.handle_segment(ms(200), &ack(FIRST + MSS, Flags::ACK));
    drain(s, ms(200));
    for t in [380, 385, 390] {
        s.handle_segment(ms(t), &ack(FIRST + MSS, Flags::ACK));
    }
    assert!(s.in_recovery());
    assert!(drain(s, ms(390)) >= 1, "the fast retransmission goes out");
    ms(390)
}

#[test]
fn the_fast_retransmission_restarts_the_timer() {
    for restart in [true, false] {
        let cfg = TcpConfig {
            rto_restart_on_fast_retransmit: restart,
            ..TcpConfig::default()
        };
        let mut s = sender(10, cfg);
        let t = fast_retransmit(&mut s);
        let due = s.poll_timeout().unwrap();
        // The minimum RTO is 200 ms: a timer restarted at the fast
        // retransmission cannot fire sooner.
        if restart {
            assert!(due >= t + Duration::from_millis(200), "due {due:?}");
        } else {
            assert!(
                due < t + Duration::from_millis(200),
                "RFC 6298 §5.1 leaves the running timer: due {due:?}"
            );
        }
    }
    assert!(TcpConfig::default().rto_restart_on_fast_retransmit);
}

#[test]
fn a_timeout_inside_recovery_keeps_or_halves_ssthresh() {
    for rule in [RtoInRecovery::Keep, RtoInRecovery::Halve] {
        let cfg = TcpConfig {
            rto_in_recovery: rule,
            ..TcpConfig::default()
        };
        let mut s = sender(40, cfg);
        fast_retransmit(&mut s);
        // About 41 segments out (40, one ACKed, two sent for it):
        // ssthresh = FlightSize / 2.
        let entry = s.stats().ssthresh.unwrap();
        assert!((20 * MSS..=21 * MSS).contains(&entry), "{entry}");
        let at = s.poll_timeout().unwrap();
        s.handle_timeout(at);
        let want = match rule {
            RtoInRecovery::Keep => entry,
            RtoInRecovery::Halve => entry / 2,
        };
        assert_eq!(s.stats().ssthresh, Some(want), "{rule}");
        assert_eq!(s.cwnd(), Some(MSS));
    }
    assert_eq!(TcpConfig::default().rto_in_recovery, RtoInRecovery::Keep);
    assert_eq!("halve".parse::<RtoInRecovery>(), Ok(RtoInRecovery::Halve));
    assert!("twice".parse::<RtoInRecovery>().is_err());
}
