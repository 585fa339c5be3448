//! The sender CM for one destination host: the handshake that finds out
//! whether the receiver runs a CM (sigcomm1999 §4.3), the Prober (§2 Fig 2,
//! §4.2.2 Fig 8), and the turning of responses into `cm_update` feedback.
//!
//! - **Handshake.** A SYN carries a random initial sequence number (ISN);
//!   the receiver CM echoes it in a SYN-ACK. Until then data goes out
//!   without a CM header, under the application's own feedback, as slow
//!   start would. No SYN-ACK after [`ProberConfig::syn_attempts`] tries
//!   (or an ICMP unreachable) means no receiver CM: the prober falls back
//!   and tries again after [`ProberConfig::retry_after`], doubling each
//!   time up to [`ProberConfig::max_retry_after`].
//! - **Probes.** While headed data is unresolved, a probe goes out every
//!   `srtt / probes_per_rtt` (twice per RTT by default, §4.2.1), and no
//!   more often than `min_probe_interval` (250 µs) on very short paths. Each
//!   probe's record keeps its time and each flow's cumulative bytes sent
//!   when it left (Fig 8's `nsent`, as a snapshot).
//! - **Responses.** A response names the probe it answers; the bytes sent
//!   before that probe are resolved. The response's cumulative per-flow
//!   counts give the bytes received (capped at what was sent before the
//!   probe) and the packets the receiver declared lost, which is the
//!   congestion signal. One RTT sample per response, less the time the
//!   probe waited at the receiver. A lost probe or response costs nothing
//!   but time: the next response's cumulative counts cover it (Fig 8's
//!   summing from LastProbe, made robust by cumulative counts).
//! - **No response.** Nothing is reported, so the core's exponential
//!   aging runs on the macroflow (§4.4) until a response comes back.
//! - **RST.** A receiver that lost its state answers a probe with RST
//!   echoing the probe's number; the prober resolves what it cannot learn
//!   any more (as lost, not as congestion) and handshakes again.
//! - **Security.** A response must come from the peer (the caller checks
//!   the address) and echo an outstanding probe number, unguessable from
//!   off the path (random ISN); stale and replayed ones name probes already
//!   answered. A response may not claim more bytes than were sent, nor more
//!   lost packets than were sent: such a response is refused whole.

use std::collections::{BTreeMap, VecDeque};

use cm_core::rtt::RttEstimator;
use cm_core::{Bytes, Duration, Feedback, Instant, LossMode};

use crate::wire::{Hint, PACKET_BITS, PROTO_DATAGRAM, Packet};

mod response;
mod types;

pub use types::{PeerState, ProberConfig, ProberCounters, Rejected, Report};

#[derive(Clone, Copy, Debug, Default)]
struct FlowTx {
    /// Headed datagram bytes sent (CM header included), cumulative.
    sent: u64,
    /// Headed packets sent, cumulative (= the next data sequence number).
    packets: u64,
    /// Bytes reported to the core as sent (resolved).
    resolved: u64,
    /// Bytes reported as received.
    credited: u64,
    /// The receiver's cumulative lost-packet count already acted on.
    lost_seen: u32,
    /// The receiver's cumulative byte count, highest seen.
    peer_bytes: u64,
    /// The receiver's cumulative packet count, highest seen.
    peer_packets: u64,
    /// The last hint reported.
    hint: Hint,
    /// `sent` at the last answered probe, and `peer_bytes` then.
    interval_base: (u64, u64),
}

#[derive(Clone, Debug)]
struct ProbeRecord {
    seq: u64,
    sent_at: Instant,
    /// Each flow's `sent` when the probe left.
    snapshot: Vec<(u32, u64)>,
}

/// The sender side of the protocol towards one host.
#[derive(Clone, Debug)]
pub struct Prober {
    cfg: ProberConfig,
    secret: u64,
    epoch: u64,
    state: PeerState,
    isn: u64,
    syn_sent_at: Instant,
    syn_attempt: u32,
    /// The last SYN-ACK or accepted response.
    last_heard: Instant,
    /// When to act next in Handshaking (SYN timeout) or Fallback (retry).
    deadline: Option<Instant>,
    retry_wait: Duration,
    next_probe_seq: u64,
    next_probe_at: Option<Instant>,
    records: VecDeque<ProbeRecord>,
    /// The last probe answered.
    answered: u64,
    flows: BTreeMap<u32, FlowTx>,
    /// Bytes of feedback-less flows sent without a header while the
    /// handshake runs, per flow.
    bare: BTreeMap<u32, u64>,
    rtt: RttEstimator,
    /// Packets sent and declared lost over the association (loss estimate).
    packets_sent: u64,
    /// Packets received on flows since forgotten (closed or abandoned).
    packets_received_gone: u64,
    packets_lost: u64,
    transmit: VecDeque<Packet>,
    reports: VecDeque<Report>,
    /// Counters.
    pub counters: ProberCounters,
}

/// A 64-bit mix (splitmix64's finaliser): ISNs from a secret and a counter,
/// as RFC 6528 derives TCP's from a secret.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl Prober {
    /// Starts the handshake towards a new peer: queues a SYN. `secret` is
    /// random (the ISNs are derived from it); the clock is `now`.
    pub fn new(cfg: ProberConfig, now: Instant, secret: u64) -> Self {
        let mut p = Prober {
            cfg,
            secret,
            epoch: 0,
            state: PeerState::Handshaking,
            isn: 0,
            syn_sent_at: now,
            syn_attempt: 0,
            last_heard: now,
            deadline: None,
            retry_wait: cfg.retry_after,
            next_probe_seq: 0,
            next_probe_at: None,
            records: VecDeque::new(),
            answered: 0,
            flows: BTreeMap::new(),
            bare: BTreeMap::new(),
            rtt: RttEstimator::new(),
            packets_sent: 0,
            packets_received_gone: 0,
            packets_lost: 0,
            transmit: VecDeque::new(),
            reports: VecDeque::new(),
            counters: ProberCounters::default(),
        };
        p.handshake(now);
        p
    }

    /// The peer's state.
    pub fn state(&self) -> PeerState {
        self.state
    }

    /// Smoothed RTT of probes, if any answered.
    pub fn srtt(&self) -> Option<Duration> {
        self.rtt.srtt()
    }

    /// An RTT the driver already knows for this path (the macroflow's,
    /// from its other flows or the application's own feedback): taken as
    /// the first sample if the prober has none yet, so the first probes
    /// are paced by the path's RTT rather than the 1 s initial timeout
    /// (a SYN that had to be sent again gives no sample, by Karn's rule).
    pub fn seed_rtt(&mut self, now: Instant, rtt: Duration) {
        if self.rtt.srtt().is_some() || rtt.is_zero() {
            return;
        }
        self.rtt.on_sample(rtt);
        let sooner = now + self.probe_interval();
        if let Some(t) = &mut self.next_probe_at {
            *t = (*t).min(sooner);
        }
    }

    /// How much later than per-packet acknowledgements a byte is resolved
    /// by this prober's responses, in thousandths of an RTT: it waits on
    /// average half a probe interval for the next probe, 500 / n for n
    /// probes per RTT (for `CongestionManager::set_feedback_lag`).
    pub fn feedback_lag_per_mille(&self) -> u16 {
        let n = if self.cfg.probes_per_rtt > 0.0 {
            self.cfg.probes_per_rtt
        } else {
            2.0
        };
        (500.0 / n).round().clamp(0.0, 1000.0) as u16
    }

    /// Minimum RTT of probes.
    pub fn min_rtt(&self) -> Option<Duration> {
        self.rtt.min_rtt()
    }

    /// Fraction of headed packets the receiver declared lost.
    pub fn loss_estimate(&self) -> Option<f64> {
        (self.packets_sent > 0).then(|| self.packets_lost as f64 / self.packets_sent as f64)
    }

    /// Packets sent with the header and declared lost so far.
    pub fn packet_counts(&self) -> (u64, u64) {
        (self.packets_sent, self.packets_lost)
    }

    /// Headed packets the receiver has reported received, over all flows.
    pub fn packets_received(&self) -> u64 {
        self.flows.values().map(|f| f.peer_packets).sum::<u64>() + self.packets_received_gone
    }

    fn handshake(&mut self, now: Instant) {
        self.epoch += 1;
        self.isn = mix(self.secret ^ mix(self.epoch)) >> 1;
        self.state = PeerState::Handshaking;
        self.syn_attempt = 0;
        self.send_syn(now);
    }

    fn send_syn(&mut self, now: Instant) {
        self.syn_attempt += 1;
        self.syn_sent_at = now;
        self.deadline = Some(
            now + self
                .cfg
                .syn_timeout
                .saturating_mul(1 << (self.syn_attempt - 1).min(6)),
        );
        self.counters.syns += 1;
        self.transmit.push_back(Packet::Syn { isn: self.isn });
    }

    /// A payload of `len` bytes of `flow` is about to leave. Returns the
    /// CM header to put in front of it when the peer is negotiated, or
    /// `None`: send it without one, under the application's own feedback.
    pub fn on_send(&mut self, now: Instant, flow: u32, len: u32) -> Option<Packet> {
        let (pkt, epoch) = self.assign(flow)?;
        self.on_departed(now, flow, len, epoch);
        Some(pkt)
    }

    /// The header for `flow`'s next packet, when the peer is negotiated,
    /// with the association epoch to give back to
    /// [`on_departed`](Self::on_departed). For senders that queue packets
    /// (headed when queued) and count them when they leave.
    pub fn assign(&mut self, flow: u32) -> Option<(Packet, u64)> {
        let (seq, epoch) = self.assign_seq(flow)?;
        Some((
            Packet::Data {
                protocol: PROTO_DATAGRAM,
                flow,
                seq,
            },
            epoch,
        ))
    }

    /// [`assign`](Self::assign) as the sequence number and the epoch only
    /// (the header is then [`crate::wire::datagram_header`]): the per-datagram
    /// path of a sender that heads each datagram as it queues it.
    pub fn assign_seq(&mut self, flow: u32) -> Option<(u64, u64)> {
        if self.state != PeerState::Negotiated {
            return None;
        }
        let f = self.flows.entry(flow).or_default();
        let seq =
            (u64::from(self.isn as u16) << PACKET_BITS) | (f.packets & ((1 << PACKET_BITS) - 1));
        f.packets += 1;
        Some((seq, self.epoch))
    }

    /// The packet last [`assign`](Self::assign)ed to `flow` will not be
    /// sent: its number is given back, so the receiver sees no gap.
    pub fn unassign(&mut self, flow: u32) {
        if let Some(f) = self.flows.get_mut(&flow) {
            f.packets = f.packets.saturating_sub(1);
        }
    }

    /// A packet headed by [`assign`](Self::assign) under `epoch` left with
    /// `len` bytes (the datagram as notified to the CM). Returns `false` if the association it was
    /// headed for is gone (reset or fallback): nobody will report on it,
    /// and the caller resolves it itself (as not received, not as
    /// congestion).
    pub fn on_departed(&mut self, now: Instant, flow: u32, len: u32, epoch: u64) -> bool {
        self.on_departed_run(now, flow, u64::from(len), 1, epoch)
    }

    /// `packets` packets of `flow` headed under `epoch` left, `bytes` in
    /// all: [`on_departed`](Self::on_departed) for a run of them at once
    /// (a sender whose packets leave in batches counts each batch once).
    pub fn on_departed_run(
        &mut self,
        now: Instant,
        flow: u32,
        bytes: u64,
        packets: u64,
        epoch: u64,
    ) -> bool {
        if self.state != PeerState::Negotiated || epoch != self.epoch {
            return false;
        }
        let Some(f) = self.flows.get_mut(&flow) else {
            return false;
        };
        f.sent += bytes;
        self.packets_sent += packets;
        if self.next_probe_at.is_none() {
            self.next_probe_at = Some(now + self.probe_interval());
        }
        true
    }

    /// `len` bytes of `flow`, a flow with no feedback of its own, went out
    /// without a header (the handshake is running, §4.3: "we permit packets
    /// to be sent emulating TCP slow start"). When the SYN-ACK arrives they
    /// are reported delivered, with the handshake's RTT (at most the initial
    /// window, sent in that round trip, which no receiver counted); on a
    /// fallback they are reported as not received, not as congestion.
    /// Flows that give their own feedback must not be reported here.
    pub fn on_send_bare(&mut self, flow: u32, len: u32) {
        if self.state == PeerState::Handshaking {
            *self.bare.entry(flow).or_default() += u64::from(len);
        }
    }

    /// A flow closed: its unresolved bytes are reported at the next
    /// response as usual, then it is forgotten.
    pub fn forget_flow(&mut self, flow: u32) {
        if let Some(f) = self.flows.get(&flow) {
            if f.resolved == f.sent {
                self.packets_received_gone += f.peer_packets;
                self.flows.remove(&flow);
            }
        }
    }

    fn probe_interval(&self) -> Duration {
        let rtt = self.rtt.srtt().unwrap_or(self.cfg.syn_timeout).as_micros() as f64;
        let ppr = if self.cfg.probes_per_rtt > 0.0 {
            self.cfg.probes_per_rtt
        } else {
            2.0
        };
        Duration::from_micros(((rtt / ppr) as u64).max(1)).max(self.cfg.min_probe_interval)
    }

    fn unresolved(&self) -> bool {
        self.flows.values().any(|f| f.resolved < f.sent)
    }

    /// The next control packet to send to the peer's CM.
    pub fn poll_transmit(&mut self) -> Option<Packet> {
        self.transmit.pop_front()
    }

    /// The next report for `cm_update`.
    pub fn poll_report(&mut self) -> Option<Report> {
        self.reports.pop_front()
    }

    /// When [`handle_timeout`](Self::handle_timeout) wants to run.
    pub fn poll_timeout(&self) -> Option<Instant> {
        match self.state {
            PeerState::Negotiated => self.next_probe_at,
            _ => self.deadline,
        }
    }

    /// Timers: SYN retransmission and fallback, handshake retries, probes.
    pub fn handle_timeout(&mut self, now: Instant) {
        match self.state {
            PeerState::Handshaking => {
                if self.deadline.is_some_and(|d| d <= now) {
                    if self.syn_attempt < self.cfg.syn_attempts {
                        self.send_syn(now);
                    } else {
                        self.fall_back(now);
                    }
                }
            }
            PeerState::Fallback => {
                if self.deadline.is_some_and(|d| d <= now) {
                    self.handshake(now);
                }
            }
            PeerState::Negotiated => {
                let Some(at) = self.next_probe_at else {
                    return;
                };
                if at > now {
                    return;
                }
                // The peer has gone silent with data outstanding: persistent
                // congestion, or a receiver that went away. Resolve what it
                // will never report and handshake again, so a sender can
                // never wait for ever on a dead peer.
                let limit = self.silence_limit();
                let silent = self
                    .records
                    .front()
                    .is_some_and(|r| now.saturating_since(r.sent_at) >= limit);
                if self.unresolved() && silent {
                    self.counters.silences += 1;
                    self.abandon(LossMode::Persistent);
                    self.handshake(now);
                    return;
                }
                self.send_probe(now);
                self.next_probe_at = self.unresolved().then(|| now + self.probe_interval());
            }
        }
    }

    /// How long the peer may stay silent with data outstanding: the
    /// retransmission timeout of RFC 6298 over the probe RTT (floor 1 s),
    /// as TCP would wait before calling it persistent congestion.
    fn silence_limit(&self) -> Duration {
        self.rtt.rto(Duration::from_secs(1), self.cfg.syn_timeout)
    }

    fn send_probe(&mut self, now: Instant) {
        let seq = self.next_probe_seq;
        self.next_probe_seq += 1;
        let snapshot = self
            .flows
            .iter()
            .filter(|(_, f)| f.resolved < f.sent)
            .map(|(&id, f)| (id, f.sent))
            .collect();
        self.records.push_back(ProbeRecord {
            seq,
            sent_at: now,
            snapshot,
        });
        while self.records.len() > self.cfg.max_outstanding.max(1) {
            self.records.pop_front();
        }
        self.counters.probes += 1;
        self.transmit.push_back(Packet::Probe { seq });
    }

    fn resolve_bare(&mut self, delivered: bool, rtt: Option<Duration>) {
        let mut rtt = rtt;
        for (flow, n) in std::mem::take(&mut self.bare) {
            self.reports.push_back(Report {
                flow,
                feedback: Feedback {
                    nsent: Bytes(n),
                    nrecd: Bytes(if delivered { n } else { 0 }),
                    loss: if delivered {
                        LossMode::None
                    } else {
                        LossMode::NotCongestion
                    },
                    rtt: rtt.take(),
                    lost_sent: None,
                },
                hint: None,
                interval: (n, if delivered { n } else { 0 }),
            });
        }
    }

    fn fall_back(&mut self, now: Instant) {
        self.resolve_bare(false, None);
        self.state = PeerState::Fallback;
        self.counters.fallbacks += 1;
        self.deadline = Some(now + self.retry_wait);
        self.retry_wait = self
            .retry_wait
            .saturating_mul(2)
            .min(self.cfg.max_retry_after);
        self.abandon(LossMode::NotCongestion);
    }

    /// Resolves every headed byte the receiver can no longer report on
    /// (its state is gone, or it went silent): as not received, with
    /// `loss` (not congestion after a reset or fallback; persistent
    /// congestion after a silence).
    fn abandon(&mut self, loss: LossMode) {
        for (&flow, f) in &mut self.flows {
            if f.sent > f.resolved {
                let nsent = f.sent - f.resolved;
                self.reports.push_back(Report {
                    flow,
                    feedback: Feedback {
                        nsent: Bytes(nsent),
                        nrecd: Bytes::ZERO,
                        loss,
                        rtt: None,
                        lost_sent: None,
                    },
                    hint: None,
                    interval: (nsent, 0),
                });
            }
        }
        self.packets_received_gone += self.flows.values().map(|f| f.peer_packets).sum::<u64>();
        self.flows.clear();
        self.records.clear();
        self.next_probe_at = None;
    }

    /// An ICMP unreachable for the peer's CM port: no receiver CM (or it
    /// went away).
    pub fn on_unreachable(&mut self, now: Instant) {
        if self.state != PeerState::Fallback {
            self.fall_back(now);
        }
    }

    /// When the peer was last heard from (SYN-ACK or accepted response).
    pub fn last_heard(&self) -> Instant {
        self.last_heard
    }

    /// A control packet from the peer's CM (the caller has checked its
    /// source address).
    pub fn on_packet(&mut self, now: Instant, pkt: &Packet) -> Result<(), Rejected> {
        match pkt {
            Packet::SynAck { isn } => self.on_syn_ack(now, *isn),
            Packet::Rst { seq } => self.on_rst(now, *seq),
            Packet::Response(r) => self.on_response(now, r),
            _ => Err(Rejected::NotForProber),
        }
    }

    fn on_syn_ack(&mut self, now: Instant, isn: u64) -> Result<(), Rejected> {
        if self.state != PeerState::Handshaking || isn != self.isn {
            self.counters.stale += 1;
            return Err(Rejected::Stale);
        }
        self.state = PeerState::Negotiated;
        self.last_heard = now;
        self.deadline = None;
        self.retry_wait = self.cfg.retry_after;
        self.next_probe_seq = isn + 1;
        self.answered = isn;
        // Karn: only an unretransmitted SYN gives an RTT sample.
        let mut sample = None;
        if self.syn_attempt == 1 {
            let r = now.saturating_since(self.syn_sent_at);
            if !r.is_zero() {
                self.rtt.on_sample(r);
                sample = Some(r);
            }
        }
        self.resolve_bare(true, sample);
        Ok(())
    }

    fn on_rst(&mut self, now: Instant, seq: u64) -> Result<(), Rejected> {
        let valid = match self.state {
            PeerState::Negotiated => seq > self.answered && seq < self.next_probe_seq,
            _ => false,
        };
        if !valid {
            self.counters.stale += 1;
            return Err(Rejected::Stale);
        }
        self.counters.resets += 1;
        self.abandon(LossMode::NotCongestion);
        self.handshake(now);
        Ok(())
    }
}
