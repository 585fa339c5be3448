//! Feedback for flows whose datagrams carry no CM header: the receiver
//! CM counts what arrives, the sender CM probes and compares
//! (sigcomm1999 §4.2.2, "the receiver counts the packets it receives";
//! §2 Fig 2's prober and responder).
//!
//! An unmodified program's datagrams cannot carry a CM header: its peer
//! would read the header as data. The CM's probe protocol still works
//! without one, as the paper's §4.2.2 describes: the receiver CM counts
//! the datagrams that arrive from each sending port, the sender CM
//! counts what it sent, and a probe (which travels behind the data on
//! the same path) asks for the receiver's counts. Sent minus received
//! between two answered probes is the interval's loss, reported at most
//! once per round trip. Reordering across a probe would read as a loss:
//! the paper's undo of such reductions ([`crate::undo`]) needs an undo
//! the CM core does not offer, so this detector is the paper's plain one
//! (emulated and most real paths keep datagrams of one flow in order).
//!
//! - [`Counter`] is the receiver side: per (sending host, source port,
//!   destination port) cumulative datagram and byte counts, and the
//!   answer to a probe: a [`Response`] whose entries are
//!   the sending host's flows, named by [`flow_id`].
//! - [`CountProber`] is the sender side for one destination host: it
//!   counts each flow's datagrams, emits probes four times per round trip
//!   while data is unresolved, and turns responses into `cm_update`
//!   feedback.
//!
//! Probes and responses are the CM protocol's own PROBE and RESPONSE
//! packets ([`crate::wire`]) on the receiver CM's UDP port
//! ([`DEFAULT_PORT`](crate::wire::DEFAULT_PORT)); the counts are UDP
//! payload bytes. Counts are cumulative and the sender takes differences
//! between consecutive answered probes, so neither side needs a
//! handshake, and a receiver CM that started mid-flow costs one interval.
//!
//! Silence is not taken for success: when the oldest unanswered probe is
//! older than [`CountProber::silence`], what was sent before it is
//! reported lost as persistent congestion (RFC 3124 §4.2's
//! `CM_NO_FEEDBACK`), so a sender with no receiver CM behind it is held to
//! the CM's slowest pace rather than left unchecked.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::net::IpAddr;

use cm_core::rtt::RttEstimator;
use cm_core::{Bytes, Duration, Feedback, Instant, LossMode};

use crate::wire::{FlowReport, MAX_ENTRIES, Packet, Response};

/// The flow id a counted flow has in responses: its source port in the
/// high 16 bits, its destination port in the low 16.
pub fn flow_id(src_port: u16, dst_port: u16) -> u32 {
    (u32::from(src_port) << 16) | u32::from(dst_port)
}

/// Flows a [`Counter`] keeps before it forgets the least recently seen.
pub const MAX_COUNTED_FLOWS: usize = 4096;

#[derive(Clone, Copy, Debug, Default)]
struct Count {
    bytes: u64,
    packets: u32,
    last: Instant,
}

/// The receiver CM's counts of header-less datagrams.
#[derive(Debug, Default)]
pub struct Counter {
    flows: HashMap<(IpAddr, u32), Count>,
    last_probe: HashMap<IpAddr, u64>,
    /// Datagrams counted (all flows, cumulative).
    pub datagrams: u64,
    /// Probes answered.
    pub probes: u64,
}

impl Counter {
    /// An empty counter.
    pub fn new() -> Self {
        Self::default()
    }

    /// One UDP datagram of `len` payload bytes arrived from `src`.
    pub fn on_datagram(
        &mut self,
        now: Instant,
        src: IpAddr,
        src_port: u16,
        dst_port: u16,
        len: u32,
    ) {
        if self.flows.len() >= MAX_COUNTED_FLOWS
            && !self.flows.contains_key(&(src, flow_id(src_port, dst_port)))
        {
            // Forget the least recently seen flow; its sender, if still
            // there, loses one interval.
            if let Some(oldest) = self
                .flows
                .iter()
                .min_by_key(|(_, c)| c.last)
                .map(|(k, _)| *k)
            {
                self.flows.remove(&oldest);
            }
        }
        let c = self
            .flows
            .entry((src, flow_id(src_port, dst_port)))
            .or_default();
        c.bytes = c.bytes.wrapping_add(u64::from(len));
        c.packets = c.packets.wrapping_add(1);
        c.last = now;
        self.datagrams += 1;
    }

    /// The answer to probe `seq` from `from`: the cumulative counts of its
    /// flows (the [`MAX_ENTRIES`] most recently active), as a RESPONSE.
    pub fn on_probe(&mut self, from: IpAddr, seq: u64) -> Packet {
        self.probes += 1;
        let last_probe = self.last_probe.insert(from, seq).unwrap_or(0);
        let mut mine: Vec<(u32, Count)> = self
            .flows
            .iter()
            .filter(|((ip, _), _)| *ip == from)
            .map(|((_, id), c)| (*id, *c))
            .collect();
        mine.sort_unstable_by_key(|(_, c)| std::cmp::Reverse(c.last));
        mine.truncate(MAX_ENTRIES);
        Packet::Response(Response {
            this_probe: seq,
            last_probe,
            delay_us: 0,
            flows: mine
                .into_iter()
                .map(|(flow, c)| FlowReport {
                    flow,
                    bytes: c.bytes,
                    lost: 0,
                    packets: c.packets,
                    hint: Default::default(),
                })
                .collect(),
        })
    }

    /// Flows counted now.
    pub fn flows(&self) -> usize {
        self.flows.len()
    }
}

/// One flow's sent counts (cumulative).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Sent {
    bytes: u64,
    packets: u64,
}

#[derive(Debug)]
struct ProbeRecord {
    seq: u64,
    at: Instant,
    sent: BTreeMap<u32, Sent>,
}

#[derive(Debug, Default)]
struct FlowState {
    sent: Sent,
    /// Sent counts at the last answered probe.
    sent_base: Option<Sent>,
    /// The receiver's counts at the last answered probe.
    recd_base: Option<(u64, u32)>,
    last_decrease: Option<Instant>,
}

/// The sender CM's side of header-less feedback towards one host.
#[derive(Debug)]
pub struct CountProber {
    next_seq: u64,
    probes: VecDeque<ProbeRecord>,
    flows: BTreeMap<u32, FlowState>,
    rtt: RttEstimator,
    last_probe_at: Option<Instant>,
    /// Responses accepted.
    pub responses: u64,
    /// Responses refused (unknown probe, or from the past).
    pub refused: u64,
    /// Intervals reported lost for want of any answer.
    pub silent: u64,
    /// Losses reported (congestion events).
    pub decreases: u64,
}

/// Probes per smoothed round trip ([`CountProber::interval`]).
pub const PROBES_PER_RTT: u64 = 4;

/// Probes outstanding at most; older ones are given up.
const MAX_OUTSTANDING: usize = 64;

impl CountProber {
    /// A prober whose first probe number follows `isn` (random, so that
    /// responses cannot be forged from off the path).
    pub fn new(isn: u64) -> Self {
        CountProber {
            next_seq: isn.wrapping_add(1),
            probes: VecDeque::new(),
            flows: BTreeMap::new(),
            rtt: RttEstimator::new(),
            last_probe_at: None,
            responses: 0,
            refused: 0,
            silent: 0,
            decreases: 0,
        }
    }

    /// The smoothed round trip, once a response measured one.
    pub fn srtt(&self) -> Option<Duration> {
        self.rtt.srtt()
    }

    /// A datagram of `len` payload bytes left on flow `flow`.
    pub fn on_send(&mut self, flow: u32, len: u32) {
        let f = &mut self.flows.entry(flow).or_default().sent;
        f.bytes += u64::from(len);
        f.packets += 1;
    }

    /// Forget a flow (its socket closed).
    pub fn remove(&mut self, flow: u32) {
        self.flows.remove(&flow);
    }

    /// Time between probes: a quarter of the smoothed RTT, at least 5 ms;
    /// 100 ms before the first sample. The paper probes twice per RTT
    /// (sigcomm1999 §4.2.1), where the probes only measure; here the
    /// answers are also the flow's only acknowledgements, so bytes sent
    /// wait for the next probe before the window can count them: half an
    /// interval on average, an eighth of an RTT at this rate instead of a
    /// quarter.
    pub fn interval(&self) -> Duration {
        self.rtt.srtt().map_or(Duration::from_millis(100), |s| {
            Duration::from_micros((s.as_micros() / PROBES_PER_RTT).max(5_000))
        })
    }

    /// How long the oldest probe may go unanswered before what was sent
    /// before it counts as lost: four round trips, at least one second.
    pub fn silence(&self) -> Duration {
        let four = self.rtt.srtt().map_or(0, |s| s.as_micros() * 4);
        Duration::from_micros(four.max(1_000_000))
    }

    fn unresolved(&self) -> bool {
        self.flows.values().any(|f| f.sent_base != Some(f.sent))
    }

    /// The probe to send now, encoded, if one is due.
    pub fn poll_probe(&mut self, now: Instant) -> Option<Vec<u8>> {
        if !self.unresolved() {
            return None;
        }
        if self
            .last_probe_at
            .is_some_and(|t| now.saturating_since(t) < self.interval())
        {
            return None;
        }
        let seq = self.next_seq;
        self.next_seq = self.next_seq.wrapping_add(1);
        self.last_probe_at = Some(now);
        if self.probes.len() == MAX_OUTSTANDING {
            self.probes.pop_front();
        }
        self.probes.push_back(ProbeRecord {
            seq,
            at: now,
            sent: self.flows.iter().map(|(id, f)| (*id, f.sent)).collect(),
        });
        Some(Packet::Probe { seq }.encode())
    }

    /// When [`CountProber::poll_probe`] or [`CountProber::poll_silence`]
    /// next has something to do.
    pub fn next_timeout(&self) -> Option<Instant> {
        let probe = self.unresolved().then(|| {
            self.last_probe_at
                .map_or(Instant::ZERO, |t| t + self.interval())
        });
        let silence = self.probes.front().map(|p| p.at + self.silence());
        match (probe, silence) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Intervals whose probe went unanswered too long: what was sent before
    /// the oldest such probe is reported lost, as persistent congestion.
    pub fn poll_silence(&mut self, now: Instant) -> Vec<(u32, Feedback)> {
        let mut out = Vec::new();
        while let Some(p) = self.probes.front() {
            if now.saturating_since(p.at) < self.silence() {
                break;
            }
            let Some(p) = self.probes.pop_front() else {
                break;
            };
            self.silent += 1;
            for (id, sent) in p.sent {
                let Some(f) = self.flows.get_mut(&id) else {
                    continue;
                };
                let base = f.sent_base.unwrap_or_default();
                let nsent = sent.bytes.saturating_sub(base.bytes);
                if nsent == 0 {
                    continue;
                }
                // The receiver's counts no longer line up with ours.
                f.sent_base = Some(sent);
                f.recd_base = None;
                out.push((
                    id,
                    Feedback {
                        nsent: Bytes(nsent),
                        nrecd: Bytes(0),
                        loss: LossMode::Persistent,
                        rtt: None,
                        lost_sent: None,
                    },
                ));
            }
        }
        out
    }

    /// A datagram from the receiver CM's port: a response is turned into
    /// feedback per flow. Anything else, or a response to no outstanding
    /// probe, is refused (`None`).
    pub fn on_datagram(&mut self, now: Instant, buf: &[u8]) -> Option<Vec<(u32, Feedback)>> {
        let Ok(Packet::Response(r)) = Packet::decode(buf) else {
            self.refused += 1;
            return None;
        };
        let Some(i) = self.probes.iter().position(|p| p.seq == r.this_probe) else {
            self.refused += 1;
            return None;
        };
        // Older outstanding probes are covered by this one (cumulative).
        let probe = self.probes.drain(..=i).next_back()?;
        self.responses += 1;
        let sample = Duration::from_micros(
            now.saturating_since(probe.at)
                .as_micros()
                .saturating_sub(u64::from(r.delay_us))
                .max(1),
        );
        self.rtt.on_sample(sample);
        let srtt = self.rtt.srtt().unwrap_or(sample);
        let mut out = Vec::new();
        for (id, sent) in &probe.sent {
            let Some(f) = self.flows.get_mut(id) else {
                continue;
            };
            let recd = r
                .flows
                .iter()
                .find(|e| e.flow == *id)
                .map(|e| (e.bytes, e.packets));
            let (prev_sent, prev_recd) = (f.sent_base, f.recd_base);
            f.sent_base = Some(*sent);
            f.recd_base = recd;
            let ps = prev_sent.unwrap_or_default();
            let nsent_b = sent.bytes.saturating_sub(ps.bytes);
            if nsent_b == 0 {
                continue;
            }
            let (pr, rc) = match (prev_recd, recd) {
                (Some(pr), Some(rc)) => (pr, rc),
                // The first answer that counts this flow sets the
                // baseline (the receiver may have counted before, or
                // started since): what was sent before it is taken as
                // delivered, and its round trip counts.
                (None, Some(_)) => {
                    out.push((*id, Feedback::acked(nsent_b, sample)));
                    continue;
                }
                // The receiver CM answers but has seen none of this
                // flow's datagrams, which left before the probe did.
                (_, None) => {
                    out.push((
                        *id,
                        Feedback {
                            nsent: Bytes(nsent_b),
                            nrecd: Bytes(0),
                            loss: LossMode::Transient,
                            rtt: Some(sample),
                            lost_sent: None,
                        },
                    ));
                    continue;
                }
            };
            let nsent_p = sent.packets.saturating_sub(ps.packets);
            let nrecd_b = rc.0.wrapping_sub(pr.0);
            let nrecd_p = u64::from(rc.1.wrapping_sub(pr.1));
            // A shortfall is a loss, reported once per round trip: the
            // losses of one window are one congestion event (RFC 5681
            // §3.2's one reduction per window).
            let short = nrecd_p < nsent_p;
            let loss = if short
                && f.last_decrease
                    .is_none_or(|t| now.saturating_since(t) >= srtt)
            {
                f.last_decrease = Some(now);
                self.decreases += 1;
                LossMode::Transient
            } else {
                LossMode::None
            };
            let nrecd = if short { nrecd_b.min(nsent_b) } else { nsent_b };
            out.push((
                *id,
                Feedback {
                    nsent: Bytes(nsent_b),
                    nrecd: Bytes(nrecd),
                    loss,
                    rtt: Some(sample),
                    lost_sent: None,
                },
            ));
        }
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::net::Ipv4Addr;

    fn t(ms: u64) -> Instant {
        Instant::from_micros(ms * 1000)
    }
    const A: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 1, 2));

    fn exchange(
        p: &mut CountProber,
        c: &mut Counter,
        sent_ms: u64,
        rtt_ms: u64,
    ) -> Vec<(u32, Feedback)> {
        let probe = p.poll_probe(t(sent_ms)).unwrap();
        let Packet::Probe { seq } = Packet::decode(&probe).unwrap() else {
            panic!()
        };
        let resp = c.on_probe(A, seq).encode();
        p.on_datagram(t(sent_ms + rtt_ms), &resp).unwrap()
    }

    #[test]
    fn counts_line_up_and_a_shortfall_is_a_loss() {
        let (mut p, mut c) = (CountProber::new(7), Counter::new());
        let id = flow_id(5000, 5201);
        // Interval 0: baseline (the receiver may have counted before).
        for _ in 0..3 {
            p.on_send(id, 1000);
            c.on_datagram(t(0), A, 5000, 5201, 1000);
        }
        let fb = exchange(&mut p, &mut c, 0, 40);
        assert_eq!(fb.len(), 1);
        assert_eq!(fb[0].1.rtt, Some(Duration::from_millis(40)));
        // Interval 1: ten sent, ten counted: no loss.
        for _ in 0..10 {
            p.on_send(id, 1000);
            c.on_datagram(t(50), A, 5000, 5201, 1000);
        }
        let fb = exchange(&mut p, &mut c, 100, 40);
        assert_eq!(
            fb,
            vec![(id, Feedback::acked(10_000, Duration::from_millis(40)))]
        );
        // Interval 2: ten sent, seven counted: a loss.
        for i in 0..10 {
            p.on_send(id, 1000);
            if i % 3 != 0 {
                c.on_datagram(t(150), A, 5000, 5201, 1000);
            }
        }
        let fb = exchange(&mut p, &mut c, 200, 40);
        assert_eq!(fb[0].1.loss, LossMode::Transient);
        assert_eq!(fb[0].1.nsent, Bytes(10_000));
        assert_eq!(fb[0].1.nrecd, Bytes(6_000));
        // Other hosts' and other ports' datagrams are not this flow's.
        c.on_datagram(
            t(210),
            IpAddr::V4(Ipv4Addr::new(10, 0, 9, 9)),
            5000,
            5201,
            1000,
        );
        c.on_datagram(t(210), A, 5001, 5201, 1000);
        p.on_send(id, 1000);
        c.on_datagram(t(210), A, 5000, 5201, 1000);
        let fb = exchange(&mut p, &mut c, 300, 40);
        assert_eq!(fb[0].1.loss, LossMode::None);
        assert_eq!(fb[0].1.nsent, Bytes(1000));
    }

    #[test]
    fn forged_and_stale_responses_are_refused() {
        let (mut p, mut c) = (CountProber::new(1000), Counter::new());
        p.on_send(1, 100);
        let _ = p.poll_probe(t(0)).unwrap();
        let forged = c.on_probe(A, 5).encode();
        assert!(p.on_datagram(t(1), &forged).is_none());
        assert!(p.on_datagram(t(1), b"garbage").is_none());
        let good = c.on_probe(A, 1001).encode();
        assert!(p.on_datagram(t(2), &good).is_some());
        // A replay names a probe already answered.
        assert!(p.on_datagram(t(3), &good).is_none());
        assert_eq!((p.responses, p.refused), (1, 3));
    }

    #[test]
    fn silence_is_reported_as_persistent_loss_and_probing_stops_when_resolved() {
        let mut p = CountProber::new(0);
        assert!(
            p.poll_probe(t(0)).is_none(),
            "nothing sent, nothing to probe"
        );
        p.on_send(9, 1200);
        assert!(p.poll_probe(t(0)).is_some());
        assert!(p.poll_probe(t(50)).is_none(), "within the interval");
        assert!(p.poll_probe(t(100)).is_some());
        assert!(p.poll_silence(t(999)).is_empty());
        let lost = p.poll_silence(t(1000));
        assert_eq!(lost.len(), 1);
        assert_eq!(lost[0].1.loss, LossMode::Persistent);
        assert_eq!(lost[0].1.nsent, Bytes(1200));
        // The second probe covered nothing new.
        assert!(p.poll_silence(t(1100)).is_empty());
        assert!(p.poll_probe(t(1200)).is_none(), "all resolved");
        assert_eq!(p.next_timeout(), None);
    }

    #[test]
    fn counter_forgets_the_oldest_flow_when_full() {
        let mut c = Counter::new();
        for port in 0..MAX_COUNTED_FLOWS as u16 {
            c.on_datagram(t(u64::from(port)), A, port, 1, 10);
        }
        c.on_datagram(t(1_000_000), A, 65_000, 1, 10);
        assert_eq!(c.flows(), MAX_COUNTED_FLOWS);
        let Packet::Response(r) = c.on_probe(A, 1) else {
            panic!()
        };
        assert_eq!(r.flows.len(), MAX_ENTRIES);
        assert_eq!(r.flows[0].flow, flow_id(65_000, 1), "most recent first");
        assert!(r.flows.iter().all(|f| f.flow != flow_id(0, 1)));
    }
}
