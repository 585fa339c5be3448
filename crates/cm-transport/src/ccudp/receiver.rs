//! The receiving side's bookkeeping (sans-IO): which data datagrams of the
//! peer's current session arrived, and the acknowledgements that say so.
//!
//! By default ([`AckPolicy::Every`]) acks go out for every second new
//! datagram (RFC 5681 §4.2's delayed ACK) and whenever the socket has been
//! drained ([`AckState::take_ack`] with anything unacknowledged), so no
//! datagram waits for a timer to be acknowledged. A receiver that reports
//! only now and then ([`AckPolicy::Period`], sigcomm1999 §4.2.1: infrequent
//! feedback) acks on a timer instead: [`AckState::poll_timeout`] and
//! [`AckState::handle_timeout`].

use cm_core::{Duration, Instant};

use super::wire::{Ack, DataHeader};

/// New datagrams per ack.
pub const ACK_EVERY: u32 = 2;

/// When the receiver acknowledges.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AckPolicy {
    /// After this many new datagrams ([`AckState::ack_due`]), and whenever
    /// the driver has drained its socket.
    Every(u32),
    /// Once per period, if anything arrived since the last ack. The period
    /// starts with the first datagram and then runs on whether data arrives
    /// or not.
    Period(Duration),
}

impl Default for AckPolicy {
    fn default() -> Self {
        AckPolicy::Every(ACK_EVERY)
    }
}

/// What an arriving data datagram is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arrival {
    /// Not seen before: deliver it.
    New,
    /// Already received (within the last 64): drop it.
    Duplicate,
}

/// Receive state for the peer's data.
#[derive(Debug, Default)]
pub struct AckState {
    session: Option<u16>,
    highest: u64,
    mask: u64,
    recv_count: u64,
    recv_bytes: u64,
    /// New datagrams since the last ack.
    unacked: u32,
    /// The newest arrival: (seq, its send time, when it arrived).
    echo: Option<(u64, u32, Instant)>,
    /// Duplicates dropped.
    pub duplicates: u64,
    policy: AckPolicy,
    /// [`AckPolicy::Period`]: when the next ack is due.
    next_ack: Option<Instant>,
}

impl AckState {
    /// Nothing received yet; acks as `policy` says.
    pub fn new(policy: AckPolicy) -> Self {
        AckState {
            policy,
            ..AckState::default()
        }
    }

    /// Record a data datagram of `wire_len` bytes (header included).
    pub fn on_data(&mut self, h: &DataHeader, wire_len: usize, now: Instant) -> Arrival {
        if self.session != Some(h.session) {
            // A new connection from the peer: its numbering starts afresh.
            *self = AckState {
                session: Some(h.session),
                duplicates: self.duplicates,
                policy: self.policy,
                next_ack: self.next_ack,
                ..AckState::default()
            };
            self.highest = h.seq;
            self.mask = 1;
        } else if h.seq > self.highest {
            let shift = h.seq - self.highest;
            self.mask = if shift >= 64 { 0 } else { self.mask << shift };
            self.mask |= 1;
            self.highest = h.seq;
        } else {
            let back = self.highest - h.seq;
            if back < 64 {
                if self.mask & (1 << back) != 0 {
                    self.duplicates += 1;
                    return Arrival::Duplicate;
                }
                self.mask |= 1 << back;
            }
            // Older than the mask: too old to tell a duplicate, delivered
            // (UDP semantics) and counted.
        }
        self.recv_count += 1;
        self.recv_bytes += wire_len as u64;
        self.unacked += 1;
        if h.seq == self.highest {
            self.echo = Some((h.seq, h.ts, now));
        }
        if let AckPolicy::Period(p) = self.policy {
            self.next_ack.get_or_insert(now + p);
        }
        Arrival::New
    }

    /// Whether an ack is due now: [`AckPolicy::Every`]`(n)` after `n` new
    /// datagrams; never with [`AckPolicy::Period`] (its timer says when).
    pub fn ack_due(&self) -> bool {
        match self.policy {
            AckPolicy::Every(n) => self.unacked >= n,
            AckPolicy::Period(_) => false,
        }
    }

    /// [`AckPolicy::Period`]: when [`AckState::handle_timeout`] is next due.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.next_ack
    }

    /// [`AckPolicy::Period`]: if the period has passed at `now`, the ack
    /// for what arrived since the last one (if anything did), and the next
    /// period starts.
    pub fn handle_timeout(&mut self, now: Instant) -> Option<Ack> {
        let (AckPolicy::Period(p), Some(due)) = (self.policy, self.next_ack) else {
            return None;
        };
        if now < due {
            return None;
        }
        self.next_ack = Some(now + p);
        self.take_ack(now)
    }

    /// The ack for everything received so far, if anything is
    /// unacknowledged.
    pub fn take_ack(&mut self, now: Instant) -> Option<Ack> {
        if self.unacked == 0 {
            return None;
        }
        let session = self.session?;
        self.unacked = 0;
        let (echo_seq, echo_ts, at) = self.echo.unwrap_or((self.highest, 0, now));
        Some(Ack {
            session,
            highest: self.highest,
            mask: self.mask,
            recv_count: self.recv_count,
            recv_bytes: self.recv_bytes,
            echo_seq,
            echo_ts,
            echo_delay_us: u32::try_from(now.saturating_since(at).as_micros()).unwrap_or(u32::MAX),
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn h(seq: u64) -> DataHeader {
        DataHeader {
            session: 1,
            seq,
            ts: seq as u32,
        }
    }

    #[test]
    fn acks_every_second_and_reports_gaps() {
        let t = Instant::from_micros(1000);
        let mut r = AckState::default();
        assert_eq!(r.on_data(&h(0), 100, t), Arrival::New);
        assert!(!r.ack_due());
        assert_eq!(r.on_data(&h(2), 100, t), Arrival::New); // 1 lost
        assert!(r.ack_due());
        let a = r.take_ack(Instant::from_micros(1500)).unwrap();
        assert_eq!(
            (a.highest, a.mask, a.recv_count, a.recv_bytes),
            (2, 0b101, 2, 200)
        );
        assert_eq!((a.echo_seq, a.echo_ts, a.echo_delay_us), (2, 2, 500));
        assert!(r.take_ack(t).is_none());
        // Late arrival fills the gap; a duplicate is dropped.
        assert_eq!(r.on_data(&h(1), 100, t), Arrival::New);
        assert_eq!(r.on_data(&h(1), 100, t), Arrival::Duplicate);
        let a = r.take_ack(t).unwrap();
        assert_eq!((a.mask, a.recv_count, a.echo_seq), (0b111, 3, 2));
        assert_eq!(r.duplicates, 1);
        // A jump past the mask forgets the old bits.
        r.on_data(&h(100), 100, t);
        assert_eq!(r.take_ack(t).unwrap().mask, 1);
    }

    #[test]
    fn periodic_acks_run_on_a_timer() {
        let ms = |v: u64| Instant::from_micros(v * 1000);
        let mut r = AckState::new(AckPolicy::Period(Duration::from_millis(100)));
        assert_eq!(r.poll_timeout(), None);
        r.on_data(&h(0), 100, ms(10));
        r.on_data(&h(1), 100, ms(20));
        assert!(!r.ack_due());
        assert_eq!(r.poll_timeout(), Some(ms(110)));
        assert!(r.handle_timeout(ms(109)).is_none());
        let a = r.handle_timeout(ms(110)).unwrap();
        assert_eq!((a.highest, a.recv_count, a.echo_delay_us), (1, 2, 90_000));
        // Nothing new: the period runs on, no ack.
        assert!(r.handle_timeout(ms(210)).is_none());
        assert_eq!(r.poll_timeout(), Some(ms(310)));
        r.on_data(&h(2), 100, ms(300));
        assert_eq!(r.handle_timeout(ms(310)).unwrap().highest, 2);
    }

    #[test]
    fn new_session_starts_afresh() {
        let t = Instant::ZERO;
        let mut r = AckState::default();
        r.on_data(&h(50), 10, t);
        let mut h2 = h(0);
        h2.session = 2;
        assert_eq!(r.on_data(&h2, 10, t), Arrival::New);
        let a = r.take_ack(t).unwrap();
        assert_eq!((a.session, a.highest, a.recv_count), (2, 0, 1));
    }
}
