//! Turning acknowledgements into `cm_update` (sans-IO): the sender's
//! record of every datagram it sent and what became of it
//! (cm-implementation-linux §2.1.3, §3.3; RFC 3124 §4.2).
//!
//! Every datagram that leaves the socket is reported to the CM exactly
//! once, as received or as lost, so the macroflow's bytes in flight stay
//! right:
//!
//! - **received**: its bit is set in an ack's mask, or it fell out of the
//!   window of every ack that arrived and the peer's cumulative byte count says
//!   it arrived (acks themselves may be lost);
//! - **lost, transient** (`CM_LOSS_FEEDBACK`): it is not in an ack's mask
//!   although [`REORDER`] later datagrams are (RFC 5681 §3.2: three
//!   duplicate ACKs), or it fell out of the window and the cumulative count
//!   says it did not arrive;
//! - **lost, persistent** (`CM_NO_FEEDBACK`, the paper's
//!   `CM_LOST_FEEDBACK`): no ack resolved anything for a retransmission
//!   timeout (RFC 6298 §2, backed off exponentially §5.5) while datagrams
//!   were in flight.
//!
//! A datagram declared lost that is acknowledged later is counted as
//! *spurious* and not reported again.

use std::collections::{HashMap, VecDeque};

use cm_core::{Bytes, Duration, Feedback, Instant, LossMode};

use super::wire::{self, Ack};
use crate::tcp::RttEstimator;

/// Later datagrams received before a missing one is lost (RFC 5681 §3.2).
pub const REORDER: u64 = 3;
/// Initial retransmission timeout (RFC 6298 §2.1).
pub const INITIAL_RTO: Duration = Duration::from_secs(1);
/// Smallest timeout (Linux's 200 ms rather than RFC 6298's 1 s: the acks
/// are not delayed by a timer).
pub const MIN_RTO: Duration = Duration::from_millis(200);
/// Largest timeout after backoff (RFC 6298 §2.5).
pub const MAX_RTO: Duration = Duration::from_secs(60);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Pending,
    Received,
    Lost,
}

#[derive(Clone, Copy, Debug)]
struct Slot {
    bytes: u32,
    /// When it left the socket (`None`: still queued in the CM).
    departed: Option<Instant>,
    state: State,
}

/// What the sender has learnt, cumulatively.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Datagrams reported received.
    pub acked: u64,
    /// Datagrams reported lost.
    pub lost: u64,
    /// Of the lost, acknowledged later (reordering or ack loss).
    pub spurious: u64,
    /// Acks that resolved nothing (duplicates, reordered acks).
    pub stale_acks: u64,
    /// Acks that contradict what was sent (ignored).
    pub bogus_acks: u64,
    /// Retransmission timeouts (persistent-loss reports).
    pub timeouts: u64,
}

/// The sender's accounting for one connection.
#[derive(Clone, Debug)]
pub struct Accounting {
    /// Sequence number of `slots[0]`.
    base: u64,
    slots: VecDeque<Slot>,
    /// Datagrams known to have left the socket: seqs below this.
    departed: u64,
    /// Bytes credited as received (to compare with the peer's count).
    credited: u64,
    /// The peer's cumulative received bytes, highest seen.
    peer_bytes: u64,
    /// SRTT, RTTVAR and the backed-off timeout (RFC 6298).
    rtt: RttEstimator,
    /// Start of the running timeout, if datagrams are in flight.
    timer: Option<Instant>,
    /// How long the peer may hold its acknowledgements back, added to the
    /// timeout ([`Accounting::with_feedback_hold`]).
    hold: Duration,
    /// The peer acknowledges once per RTT: the timeout also waits one
    /// smoothed RTT longer ([`Accounting::acks_once_per_rtt`]).
    per_rtt: bool,
    /// Recently declared lost and already dropped from `slots`: seq →
    /// bytes, to recognise a late arrival (oldest evicted first).
    recent_lost: HashMap<u64, u32>,
    recent_lost_order: VecDeque<u64>,
    /// Cumulative counters.
    pub counters: Counters,
}

/// Lost datagrams remembered for late acknowledgement.
const RECENT_LOST: usize = 1024;

impl Default for Accounting {
    fn default() -> Self {
        Accounting::new()
    }
}

impl Accounting {
    /// Nothing sent yet.
    pub fn new() -> Self {
        Accounting {
            base: 0,
            slots: VecDeque::new(),
            departed: 0,
            credited: 0,
            peer_bytes: 0,
            rtt: RttEstimator::new(MIN_RTO, MAX_RTO, INITIAL_RTO),
            timer: None,
            hold: Duration::ZERO,
            per_rtt: false,
            recent_lost: HashMap::new(),
            recent_lost_order: VecDeque::new(),
            counters: Counters::default(),
        }
    }

    /// Nothing sent yet, for a peer that holds its acknowledgements back
    /// for up to `hold` (it reports in batches, cm-implementation-linux
    /// Fig 10): the timeout runs `hold` longer than the RTT-based one, so
    /// a batch that is merely late is not taken for persistent congestion.
    /// (The RTT samples leave the hold out: the ack echoes it.)
    pub fn with_feedback_hold(hold: Duration) -> Self {
        Accounting::new().feedback_hold(hold)
    }

    /// The same accounting, for a peer that holds its acknowledgements
    /// back for up to `hold` ([`Accounting::with_feedback_hold`]); it
    /// keeps every other setting, so the builders compose in any order.
    pub fn feedback_hold(mut self, hold: Duration) -> Self {
        self.hold = hold;
        self
    }

    /// The same accounting, for a peer that acknowledges once per round
    /// trip instead of at each arrival (a NACK-based receiver reporting
    /// once per control interval `R = RTT`, iscc §II): an acknowledgement
    /// may wait up to one RTT at the peer, so the timeout waits one smoothed
    /// RTT longer than RFC 6298's. Without it, a timeout floored at 200 ms
    /// on a 100 ms path expires on acknowledgements that are on their way,
    /// and each such expiry is reported to the CM as persistent congestion.
    pub fn acks_once_per_rtt(mut self) -> Self {
        self.per_rtt = true;
        self
    }

    /// The sequence number the next datagram gets.
    pub fn next_seq(&self) -> u64 {
        self.base + self.slots.len() as u64
    }

    /// Datagrams that have left the socket so far.
    pub fn departed(&self) -> u64 {
        self.departed
    }

    /// The current retransmission timeout.
    pub fn rto(&self) -> Duration {
        self.rtt.rto()
    }

    /// The smoothed RTT of this connection's own samples.
    pub fn srtt(&self) -> Option<Duration> {
        self.rtt.srtt()
    }

    /// Datagram [`Accounting::next_seq`] of `bytes` (header included) was
    /// queued for sending. Returns its sequence number.
    pub fn on_queued(&mut self, bytes: usize) -> u64 {
        let seq = self.next_seq();
        self.slots.push_back(Slot {
            bytes: u32::try_from(bytes).unwrap_or(u32::MAX),
            departed: None,
            state: State::Pending,
        });
        seq
    }

    /// The next queued datagram (seq [`Accounting::departed`]) left the
    /// socket at `at`. Ignored if nothing is queued.
    pub fn on_departed(&mut self, at: Instant) {
        let Some(i) = self.index(self.departed) else {
            return;
        };
        self.slots[i].departed = Some(at);
        self.departed += 1;
        if self.timer.is_none() {
            self.timer = Some(at);
        }
    }

    fn index(&self, seq: u64) -> Option<usize> {
        let i = usize::try_from(seq.checked_sub(self.base)?).ok()?;
        (i < self.slots.len()).then_some(i)
    }

    /// An acknowledgement arrived at `now`. Returns the feedback for
    /// `cm_update`, or `None` if the ack resolved nothing.
    pub fn on_ack(&mut self, now: Instant, ack: &Ack) -> Option<Feedback> {
        if ack.highest >= self.departed {
            // Acknowledges what never left: not the peer's ack.
            self.counters.bogus_acks += 1;
            return None;
        }
        self.peer_bytes = self.peer_bytes.max(ack.recv_bytes);
        let (mut nsent, mut nrecd, mut nlost) = (0u64, 0u64, 0u64);
        // When the most recently sent of the datagrams found lost left.
        let mut lost_sent: Option<Instant> = None;
        let mut echo_new = false;
        // 1. What the mask says arrived.
        for back in 0..64u64 {
            if ack.mask & (1 << back) == 0 {
                continue;
            }
            let Some(seq) = ack.highest.checked_sub(back) else {
                break;
            };
            let Some(i) = self.index(seq) else {
                if let Some(b) = self.recent_lost.remove(&seq) {
                    self.credited += u64::from(b);
                    self.counters.spurious += 1;
                }
                continue;
            };
            let s = &mut self.slots[i];
            match s.state {
                State::Pending => {
                    s.state = State::Received;
                    nsent += u64::from(s.bytes);
                    nrecd += u64::from(s.bytes);
                    self.credited += u64::from(s.bytes);
                    self.counters.acked += 1;
                    echo_new |= seq == ack.echo_seq;
                }
                State::Lost => {
                    s.state = State::Received;
                    self.credited += u64::from(s.bytes);
                    self.counters.spurious += 1;
                }
                State::Received => {}
            }
        }
        // 2. What is missing: datagrams outside this ack's window were
        // resolved by acks that never arrived; trust the cumulative count. Inside
        // the window, a hole with REORDER later arrivals is a loss.
        let window_start = ack.highest.saturating_sub(63);
        let last = ack.highest.checked_sub(REORDER - 1);
        for (seq, s) in (self.base..).zip(self.slots.iter_mut()) {
            if last.is_none_or(|l| seq >= l) {
                break;
            }
            if s.state == State::Pending {
                let b = u64::from(s.bytes);
                let received =
                    seq < window_start && self.peer_bytes.saturating_sub(self.credited) >= b;
                nsent += b;
                if received {
                    s.state = State::Received;
                    nrecd += b;
                    self.credited += b;
                    self.counters.acked += 1;
                } else {
                    s.state = State::Lost;
                    nlost += 1;
                    self.counters.lost += 1;
                    lost_sent = lost_sent.max(s.departed);
                }
            }
        }
        // 3. An RTT sample from the echoed datagram, if this ack is the
        // first to report it (no sample from duplicate or stale acks).
        let rtt = if echo_new {
            self.rtt_sample(now, ack)
        } else {
            None
        };
        self.pop_resolved();
        if nsent == 0 {
            self.counters.stale_acks += 1;
            return None;
        }
        if let Some(r) = rtt {
            self.rtt.on_sample(r);
        }
        // Progress: the timeout restarts (RFC 6298 §5.3) and, once the RTT
        // is known, its backoff ends (nothing is retransmitted, so an ack
        // is never ambiguous).
        self.timer = self.in_flight().then_some(now);
        if self.rtt.srtt().is_some() {
            self.rtt.end_backoff();
        }
        Some(Feedback {
            nsent: Bytes(nsent),
            nrecd: Bytes(nrecd),
            loss: if nlost > 0 {
                LossMode::Transient
            } else {
                LossMode::None
            },
            rtt,
            lost_sent,
        })
    }

    fn rtt_sample(&self, now: Instant, ack: &Ack) -> Option<Duration> {
        let delay = u64::from(ack.echo_delay_us);
        // The time it left the socket, not when it was queued: queueing in
        // the CM is not round-trip time (libcm's `buffered_send_time`).
        let raw = match self
            .index(ack.echo_seq)
            .and_then(|i| self.slots[i].departed)
        {
            Some(t) => now.saturating_since(t).as_micros(),
            None => u64::from(wire::timestamp(now).wrapping_sub(ack.echo_ts)),
        };
        // A wrapped or nonsensical echo (over 2^31 µs) gives no sample.
        (raw < 1 << 31).then(|| Duration::from_micros(raw.saturating_sub(delay).max(1)))
    }

    fn pop_resolved(&mut self) {
        while let Some(s) = self.slots.front() {
            if s.state == State::Pending {
                break;
            }
            if s.state == State::Lost {
                if self.recent_lost_order.len() == RECENT_LOST {
                    if let Some(old) = self.recent_lost_order.pop_front() {
                        self.recent_lost.remove(&old);
                    }
                }
                self.recent_lost.insert(self.base, s.bytes);
                self.recent_lost_order.push_back(self.base);
            }
            self.slots.pop_front();
            self.base += 1;
        }
    }

    /// Whether any datagram that left the socket is still unresolved.
    pub fn in_flight(&self) -> bool {
        self.slots
            .iter()
            .take(usize::try_from(self.departed - self.base).unwrap_or(usize::MAX))
            .any(|s| s.state == State::Pending)
    }

    /// Bytes and datagrams in flight (left the socket, unresolved).
    pub fn in_flight_bytes(&self) -> (u64, u64) {
        let n = usize::try_from(self.departed.saturating_sub(self.base)).unwrap_or(usize::MAX);
        self.slots
            .iter()
            .take(n)
            .filter(|s| s.state == State::Pending)
            .fold((0, 0), |(b, c), s| (b + u64::from(s.bytes), c + 1))
    }

    /// When [`Accounting::handle_timeout`] is next due.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let report_wait = match (self.per_rtt, self.rtt.srtt()) {
            (true, Some(srtt)) => srtt,
            _ => Duration::ZERO,
        };
        self.timer
            .map(|t| t.saturating_add(self.rtt.rto() + self.hold + report_wait))
    }

    /// If the timeout has passed at `now`: everything in flight is lost to
    /// persistent congestion, and the timeout backs off (RFC 6298 §5.5).
    pub fn handle_timeout(&mut self, now: Instant) -> Option<Feedback> {
        let due = self.poll_timeout()?;
        if now < due {
            return None;
        }
        let n = usize::try_from(self.departed - self.base).unwrap_or(usize::MAX);
        let mut nsent = 0u64;
        let mut lost_sent: Option<Instant> = None;
        for s in self.slots.iter_mut().take(n) {
            if s.state == State::Pending {
                s.state = State::Lost;
                nsent += u64::from(s.bytes);
                self.counters.lost += 1;
                lost_sent = lost_sent.max(s.departed);
            }
        }
        self.pop_resolved();
        self.rtt.back_off();
        self.timer = None;
        if nsent == 0 {
            return None;
        }
        self.counters.timeouts += 1;
        Some(Feedback {
            nsent: Bytes(nsent),
            nrecd: Bytes(0),
            loss: LossMode::Persistent,
            rtt: None,
            lost_sent,
        })
    }
}
