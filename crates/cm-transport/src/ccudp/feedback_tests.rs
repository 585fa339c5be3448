//! Sans-IO tests of the ack → `cm_update` accounting, end to end through
//! the receiver's [`AckState`]: losses, reordering, duplicate acks, lost
//! acks, timeouts.

#![allow(clippy::unwrap_used)]

use cm_core::{Duration, Feedback, Instant, LossMode};

use super::feedback::{Accounting, INITIAL_RTO, MIN_RTO};
use super::receiver::AckState;
use super::wire::{Ack, DataHeader};

const LEN: usize = 1000;

fn t(ms: u64) -> Instant {
    Instant::from_micros(ms * 1000)
}

/// A sender's accounting and a receiver, with `n` datagrams sent at t=0.
struct Pair {
    tx: Accounting,
    rx: AckState,
}

impl Pair {
    fn sent(n: u64) -> Pair {
        let mut p = Pair {
            tx: Accounting::new(),
            rx: AckState::default(),
        };
        for _ in 0..n {
            p.tx.on_queued(LEN);
            p.tx.on_departed(t(0));
        }
        p
    }

    /// The receiver gets `seq` at `at`.
    fn arrive(&mut self, seq: u64, at: Instant) {
        let h = DataHeader {
            session: 1,
            seq,
            ts: 0,
        };
        self.rx.on_data(&h, LEN, at);
    }

    fn ack(&mut self, at: Instant) -> Ack {
        self.rx.take_ack(at).unwrap()
    }

    fn deliver(&mut self, ack: &Ack, at: Instant) -> Option<Feedback> {
        self.tx.on_ack(at, ack)
    }
}

fn sum(fbs: &[Feedback]) -> (u64, u64) {
    fbs.iter()
        .fold((0, 0), |(s, r), f| (s + f.nsent.get(), r + f.nrecd.get()))
}

#[test]
fn all_received_in_order() {
    let mut p = Pair::sent(4);
    p.arrive(0, t(10));
    p.arrive(1, t(10));
    let a = p.ack(t(10));
    let fb = p.deliver(&a, t(20)).unwrap();
    assert_eq!((fb.nsent.get(), fb.nrecd.get()), (2000, 2000));
    assert_eq!(fb.loss, LossMode::None);
    // Sent at 0, echoed datagram 1 acked at 20 ms without receiver delay.
    assert_eq!(fb.rtt, Some(Duration::from_millis(20)));
    p.arrive(2, t(30));
    p.arrive(3, t(31));
    let a = p.ack(t(33));
    let fb = p.deliver(&a, t(40)).unwrap();
    // The receiver held datagram 3 for 2 ms: not network time.
    assert_eq!(fb.rtt, Some(Duration::from_millis(38)));
    assert!(!p.tx.in_flight());
    assert_eq!(p.tx.counters.acked, 4);
}

#[test]
fn a_gap_with_three_later_arrivals_is_a_transient_loss() {
    let mut p = Pair::sent(6);
    for s in [0, 2, 3] {
        p.arrive(s, t(10));
    }
    // Only two later arrivals: 1 may just be reordered.
    let a = p.ack(t(10));
    let fb = p.deliver(&a, t(10)).unwrap();
    assert_eq!(
        (fb.nsent.get(), fb.nrecd.get(), fb.loss),
        (3000, 3000, LossMode::None)
    );
    p.arrive(4, t(11));
    let a = p.ack(t(11));
    let fb = p.deliver(&a, t(11)).unwrap();
    assert_eq!((fb.nsent.get(), fb.nrecd.get()), (2000, 1000));
    assert_eq!(fb.loss, LossMode::Transient);
    assert_eq!(p.tx.counters.lost, 1);
}

/// A loss report says when the most recently sent of its lost datagrams
/// left, so the CM can tell a loss of data sent before its last reduction
/// from a new one (RFC 6582 §3.2), whatever else the report resolves.
/// A timeout's report says the same of everything it declares lost.
#[test]
fn a_loss_report_carries_when_the_newest_lost_datagram_left() {
    let mut p = Pair {
        tx: Accounting::new(),
        rx: AckState::default(),
    };
    // Datagrams 0..8 leave at 0, 10, ..., 70 ms; 1 and 3 are lost.
    for i in 0..8 {
        p.tx.on_queued(LEN);
        p.tx.on_departed(t(10 * i));
    }
    for s in [0, 2, 4, 5, 6] {
        p.arrive(s, t(100));
    }
    let a = p.ack(t(100));
    let fb = p.deliver(&a, t(100)).unwrap();
    assert_eq!(fb.loss, LossMode::Transient);
    assert_eq!((fb.nsent.get(), fb.nrecd.get()), (7000, 5000));
    assert_eq!(fb.lost_sent, Some(t(30)), "datagram 3's departure");
    // Nothing lost: nothing to date.
    p.arrive(7, t(110));
    let a = p.ack(t(110));
    assert_eq!(p.deliver(&a, t(110)).unwrap().lost_sent, None);
    // A timeout declares what is outstanding lost.
    p.tx.on_queued(LEN);
    p.tx.on_departed(t(200));
    let fb = p.tx.handle_timeout(t(5_000)).unwrap();
    assert_eq!(fb.loss, LossMode::Persistent);
    assert_eq!(fb.lost_sent, Some(t(200)));
}

#[test]
fn reordering_within_the_threshold_is_not_a_loss() {
    let mut p = Pair::sent(4);
    let mut fbs = Vec::new();
    for s in [1, 2, 0, 3] {
        p.arrive(s, t(10));
        let a = p.ack(t(10));
        fbs.extend(p.deliver(&a, t(10)));
    }
    assert!(fbs.iter().all(|f| f.loss == LossMode::None));
    assert_eq!(sum(&fbs), (4000, 4000));
    assert_eq!(p.tx.counters.lost, 0);
}

#[test]
fn reordering_past_the_threshold_is_spurious_and_not_reported_twice() {
    let mut p = Pair::sent(6);
    let mut fbs = Vec::new();
    for s in [1, 2, 3, 4, 0, 5] {
        p.arrive(s, t(10));
        let a = p.ack(t(10));
        fbs.extend(p.deliver(&a, t(10)));
    }
    // 0 was called lost when 3 arrived; its late arrival changes nothing
    // the CM was told.
    assert_eq!(sum(&fbs), (6000, 5000));
    assert_eq!(p.tx.counters.lost, 1);
    assert_eq!(p.tx.counters.spurious, 1);
}

#[test]
fn duplicate_and_reordered_acks_resolve_nothing_twice() {
    let mut p = Pair::sent(4);
    p.arrive(0, t(5));
    p.arrive(1, t(5));
    let a1 = p.ack(t(5));
    p.arrive(2, t(6));
    p.arrive(3, t(6));
    let a2 = p.ack(t(6));
    // The newer ack first, then the older, then the newer again.
    let fb = p.deliver(&a2, t(10)).unwrap();
    assert_eq!(fb.nsent.get(), 4000);
    assert!(p.deliver(&a1, t(11)).is_none());
    assert!(p.deliver(&a2, t(12)).is_none());
    assert_eq!(p.tx.counters.stale_acks, 2);
    assert_eq!(p.tx.counters.acked, 4);
}

#[test]
fn lost_acks_lose_nothing() {
    let mut p = Pair::sent(10);
    for s in 0..10 {
        p.arrive(s, t(10));
        let a = p.ack(t(10));
        // Only every fourth ack gets through.
        if s % 4 == 3 || s == 9 {
            let fb = p.deliver(&a, t(20)).unwrap();
            assert_eq!(fb.loss, LossMode::None);
        }
    }
    assert_eq!(p.tx.counters.acked, 10);
    assert!(!p.tx.in_flight());
}

#[test]
fn beyond_the_mask_the_cumulative_count_decides() {
    // 200 datagrams, 100 and 150 lost, every ack lost until the last.
    let mut p = Pair::sent(200);
    for s in 0..200 {
        if s != 100 && s != 150 {
            p.arrive(s, t(10));
        }
    }
    let a = p.ack(t(10));
    let fb = p.deliver(&a, t(20)).unwrap();
    assert_eq!((fb.nsent.get(), fb.nrecd.get()), (200_000, 198_000));
    assert_eq!(fb.loss, LossMode::Transient);
    assert_eq!((p.tx.counters.acked, p.tx.counters.lost), (198, 2));
}

#[test]
fn a_peer_that_holds_its_acks_back_is_not_timed_out_before_the_hold() {
    let mut p = Pair::sent(3);
    p.tx = Accounting::with_feedback_hold(Duration::from_secs(2));
    for _ in 0..3 {
        p.tx.on_queued(LEN);
        p.tx.on_departed(t(0));
    }
    // 2 s of hold on top of the initial RTO before any RTT sample.
    assert_eq!(p.tx.poll_timeout(), Some(t(3000)));
    assert!(p.tx.handle_timeout(t(2999)).is_none());
    // The batch at 2 s resolves everything (its RTT sample leaves the
    // hold out); the next timeout is the hold on top of the RTT's.
    for seq in 0..3 {
        p.arrive(seq, t(30));
    }
    let a = p.ack(t(2000));
    let fb = p.deliver(&a, t(2030)).unwrap();
    assert_eq!(fb.nrecd.get(), 3000);
    assert_eq!(p.tx.rto(), MIN_RTO);
    p.tx.on_queued(LEN);
    p.tx.on_departed(t(2100));
    assert_eq!(p.tx.poll_timeout(), Some(t(4300)));
}

#[test]
fn a_peer_acking_once_per_rtt_gets_one_more_srtt_before_the_timeout() {
    // A 100 ms path whose receiver holds each ack up to one RTT: the ack
    // for a datagram sent at 0 arrives at 200 ms, which RFC 6298's timeout
    // (200 ms floor) would already have declared lost.
    let mut p = Pair::sent(0);
    p.tx = Accounting::new().acks_once_per_rtt();
    p.tx.on_queued(LEN);
    p.tx.on_departed(t(0));
    p.arrive(0, t(50));
    let a = p.ack(t(150));
    assert!(p.deliver(&a, t(200)).is_some());
    let srtt = p.tx.srtt().unwrap();
    assert_eq!(srtt, Duration::from_millis(100));
    p.tx.on_queued(LEN);
    p.tx.on_departed(t(300));
    let due = p.tx.poll_timeout().unwrap();
    assert_eq!(due, t(300).saturating_add(p.tx.rto() + srtt));
    // The next ack, held a full RTT again, comes in time: no timeout.
    p.arrive(1, t(350));
    assert!(
        p.tx.handle_timeout(t(300).saturating_add(p.tx.rto()))
            .is_none()
    );
    let a = p.ack(t(450));
    let fb = p.deliver(&a, t(500)).unwrap();
    assert_eq!((fb.nrecd.get(), p.tx.counters.timeouts), (1000, 0));
    // Without the report wait, the same timer is due one srtt earlier.
    let mut plain = Accounting::new();
    plain.on_queued(LEN);
    plain.on_departed(t(0));
    assert_eq!(plain.poll_timeout(), Some(t(0).saturating_add(INITIAL_RTO)));
}

#[test]
fn the_hold_and_the_once_per_rtt_wait_add_up_in_either_order() {
    // A peer that batches its acks and reports once per RTT: both waits
    // count, whichever builder came first.
    let hold = Duration::from_millis(500);
    let due = |mut a: Accounting| {
        a.on_queued(LEN);
        a.on_departed(t(0));
        let mut p = Pair::sent(0);
        p.tx = a;
        p.arrive(0, t(50));
        let ack = p.ack(t(150));
        assert!(p.deliver(&ack, t(200)).is_some());
        p.tx.on_queued(LEN);
        p.tx.on_departed(t(300));
        let srtt = p.tx.srtt().unwrap();
        (
            p.tx.poll_timeout().unwrap(),
            t(300).saturating_add(p.tx.rto() + hold + srtt),
        )
    };
    let (a, want) = due(Accounting::with_feedback_hold(hold).acks_once_per_rtt());
    assert_eq!(a, want);
    let (b, want) = due(Accounting::new().acks_once_per_rtt().feedback_hold(hold));
    assert_eq!(b, want);
}

#[test]
fn timeout_without_acks_is_persistent_loss_and_backs_off() {
    let mut p = Pair::sent(3);
    assert_eq!(p.tx.poll_timeout(), Some(t(0).saturating_add(INITIAL_RTO)));
    assert!(p.tx.handle_timeout(t(999)).is_none());
    let fb = p.tx.handle_timeout(t(1000)).unwrap();
    assert_eq!((fb.nsent.get(), fb.nrecd.get()), (3000, 0));
    assert_eq!(fb.loss, LossMode::Persistent);
    assert_eq!(p.tx.rto(), Duration::from_secs(2));
    assert_eq!(p.tx.poll_timeout(), None);
    // A late ack for them is spurious, not reported again.
    p.arrive(0, t(1100));
    let a = p.ack(t(1100));
    assert!(p.deliver(&a, t(1100)).is_none());
    assert_eq!(p.tx.counters.spurious, 1);
    // The next datagram restarts the (backed-off) timer.
    p.tx.on_queued(LEN);
    p.tx.on_departed(t(1200));
    assert_eq!(p.tx.poll_timeout(), Some(t(3200)));
    // Progress ends the backoff.
    p.arrive(3, t(1210));
    let a = p.ack(t(1210));
    let fb = p.deliver(&a, t(1220)).unwrap();
    assert_eq!(fb.nsent.get(), 1000);
    assert_eq!(p.tx.rto(), MIN_RTO);
    assert_eq!(p.tx.poll_timeout(), None);
}

#[test]
fn acks_restart_the_timer_and_queued_data_does_not_run_it() {
    let mut p = Pair::sent(2);
    // A third datagram still queued in the CM: not in flight.
    p.tx.on_queued(LEN);
    p.arrive(0, t(50));
    let a = p.ack(t(50));
    p.deliver(&a, t(50)).unwrap();
    // Datagram 1 still in flight: the timer runs from the ack.
    let rto = p.tx.rto();
    assert_eq!(p.tx.poll_timeout(), Some(t(50).saturating_add(rto)));
    let fb = p.tx.handle_timeout(t(50).saturating_add(rto)).unwrap();
    assert_eq!(fb.nsent.get(), 1000); // only the one that left
    assert!(!p.tx.in_flight());
    assert_eq!(p.tx.next_seq(), 3);
}

#[test]
fn acks_for_what_never_left_are_ignored() {
    let mut p = Pair::sent(1);
    p.tx.on_queued(LEN); // seq 1 queued, not departed
    p.arrive(1, t(1));
    let a = p.ack(t(1));
    assert!(p.deliver(&a, t(2)).is_none());
    assert_eq!(p.tx.counters.bogus_acks, 1);
}

#[test]
fn every_departed_byte_is_reported_exactly_once() {
    // A deterministic mess: 1000 datagrams, a pseudo-random third of them
    // lost or reordered, half the acks lost, and a final timeout.
    let mut p = Pair::sent(1000);
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut rnd = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut late = Vec::new();
    let mut fbs = Vec::new();
    for s in 0..1000u64 {
        match rnd() % 6 {
            0 => continue,
            1 => late.push(s),
            _ => p.arrive(s, t(s)),
        }
        if s % 5 == 0 {
            if let Some(l) = late.pop() {
                p.arrive(l, t(s));
            }
        }
        if let Some(a) = p.rx.take_ack(t(s)) {
            if rnd() % 2 == 0 {
                fbs.extend(p.deliver(&a, t(s)));
            }
        }
    }
    fbs.extend(p.tx.handle_timeout(t(1_000_000)));
    let (nsent, nrecd) = sum(&fbs);
    assert_eq!(nsent, 1000 * LEN as u64);
    assert!(nrecd <= nsent);
    let c = p.tx.counters;
    assert_eq!(c.acked + c.lost, 1000);
    assert_eq!(nrecd, c.acked * LEN as u64);
}
