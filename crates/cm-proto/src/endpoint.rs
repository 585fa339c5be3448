//! One host's CM protocol endpoint: a prober per destination host, a
//! responder per sending host, and the demultiplexing of datagrams between
//! them (sigcomm1999 §2: the sender and receiver modules of one host).
//! Sans-IO: the driver (the daemon, embedded libcm, the simulator) owns the
//! socket and the clock, feeds datagrams in, and sends what comes out.
//!
//! Bad input never gets further than a counter: malformed datagrams,
//! forged or stale responses, replayed probes and out-of-window numbers
//! are dropped and counted in [`EndpointCounters`], and the table of
//! sending hosts is bounded (the least recently active is evicted).

use std::collections::{HashMap, VecDeque};
use std::hash::{Hash, Hasher};

use cm_core::{Duration, Instant};

use crate::prober::{PeerState, Prober, ProberConfig, Rejected, Report};
use crate::responder::{Refusal, Responder};
use crate::wire::{HEADER_LEN, Hint, Packet};

/// Tunables of an endpoint.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EndpointConfig {
    /// The prober's settings (for every destination).
    pub prober: ProberConfig,
    /// Sending hosts tracked at most (the receiver side).
    pub max_senders: usize,
    /// Destination hosts tracked at most (the sender side).
    pub max_destinations: usize,
}

impl Default for EndpointConfig {
    fn default() -> Self {
        EndpointConfig {
            prober: ProberConfig::default(),
            max_senders: 4096,
            max_destinations: 16384,
        }
    }
}

/// What was dropped and why, and what was answered.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EndpointCounters {
    /// Not a decodable CM datagram (bad magic, version, type, length).
    pub malformed: u64,
    /// Responses, SYN-ACKs or RSTs that answer nothing outstanding, or
    /// come from a host this endpoint never probed.
    pub stale: u64,
    /// Responses claiming more than was sent.
    pub forged: u64,
    /// Probes replayed or out of the association's window.
    pub bad_probes: u64,
    /// Data without an association, or duplicates (delivered, not counted).
    pub uncounted_data: u64,
    /// Packets of a type the receiving side does not take.
    pub misdirected: u64,
    /// SYN-ACKs sent.
    pub syn_acks: u64,
    /// Responses sent.
    pub responses: u64,
    /// RSTs sent (probes from a sender this endpoint has no state for).
    pub rsts: u64,
    /// Sending hosts evicted to make room.
    pub evicted: u64,
}

/// A sender-side peer as `cm stat` shows it.
#[derive(Clone, Debug, PartialEq)]
pub struct PeerInfo<A> {
    /// The destination host's CM address.
    pub peer: A,
    /// Negotiated or not.
    pub state: PeerState,
    /// Smoothed probe RTT.
    pub srtt: Option<Duration>,
    /// Fraction of headed packets declared lost.
    pub loss: Option<f64>,
    /// Probes sent and responses accepted.
    pub probes: (u64, u64),
}

/// What [`Endpoint::on_datagram`] made of a datagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Incoming {
    /// A control packet, handled (any answer is queued for transmission).
    Control,
    /// CM-headed data: deliver `buf[offset..]` to the application.
    Data {
        /// The flow.
        flow: u32,
        /// Where the payload starts.
        offset: usize,
    },
    /// Not a CM datagram, or a malformed one (counted): the driver decides
    /// (a CC-UDP or raw datagram on a shared socket).
    NotCm,
}

/// The protocol endpoint of one host.
#[derive(Debug)]
pub struct Endpoint<A> {
    cfg: EndpointConfig,
    secret: u64,
    probers: HashMap<A, Prober>,
    responders: HashMap<A, (Responder, Instant)>,
    transmit: VecDeque<(A, Vec<u8>)>,
    reports: VecDeque<(A, Report)>,
    /// Counters.
    pub counters: EndpointCounters,
}

impl<A: Copy + Eq + Hash + std::fmt::Debug> Endpoint<A> {
    /// An endpoint with no peers; `secret` is random (ISNs derive from it).
    pub fn new(cfg: EndpointConfig, secret: u64) -> Self {
        Endpoint {
            cfg,
            secret,
            probers: HashMap::new(),
            responders: HashMap::new(),
            transmit: VecDeque::new(),
            reports: VecDeque::new(),
            counters: EndpointCounters::default(),
        }
    }

    fn peer_secret(&self, peer: &A) -> u64 {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        peer.hash(&mut h);
        self.secret ^ h.finish()
    }

    /// The state towards `peer`, starting the handshake if this is the
    /// first time (`None` if the destination table is full).
    pub fn connect(&mut self, now: Instant, peer: A) -> Option<PeerState> {
        if !self.probers.contains_key(&peer) {
            if self.probers.len() >= self.cfg.max_destinations {
                return None;
            }
            let p = Prober::new(self.cfg.prober, now, self.peer_secret(&peer));
            self.probers.insert(peer, p);
            self.drain(peer);
        }
        self.probers.get(&peer).map(Prober::state)
    }

    /// The state towards `peer`, if it is known.
    pub fn state(&self, peer: &A) -> Option<PeerState> {
        self.probers.get(peer).map(Prober::state)
    }

    /// A payload of `len` bytes of `flow` is about to go to `peer`: the CM
    /// header to put in front of it, or `None` (send it bare, under the
    /// application's own feedback).
    pub fn on_send(
        &mut self,
        now: Instant,
        peer: A,
        flow: u32,
        len: u32,
    ) -> Option<[u8; HEADER_LEN]> {
        let pkt = self.probers.get_mut(&peer)?.on_send(now, flow, len)?;
        let mut h = [0; HEADER_LEN];
        let v = pkt.encode();
        h.copy_from_slice(&v[..HEADER_LEN]);
        Some(h)
    }

    /// `len` bytes of `flow`, which has no feedback of its own, went to
    /// `peer` without a header during the handshake
    /// ([`Prober::on_send_bare`]).
    pub fn on_send_bare(&mut self, peer: A, flow: u32, len: u32) {
        if let Some(p) = self.probers.get_mut(&peer) {
            p.on_send_bare(flow, len);
        }
    }

    /// Headed data of `len` bytes (the whole datagram, as the sender
    /// notified it) from `from`, for drivers that carry the header's
    /// fields rather than its bytes (the simulator).
    pub fn on_headed_data(&mut self, now: Instant, from: A, flow: u32, seq: u64, len: u32) {
        match self.responders.get_mut(&from) {
            Some((r, seen)) => {
                *seen = now;
                if r.on_data(now, flow, seq, len).is_err() {
                    self.counters.uncounted_data += 1;
                }
            }
            None => self.counters.uncounted_data += 1,
        }
    }

    /// Header-less data of `flow` from `from`, identified by the driver
    /// (§4.2.2's receiver counts bytes without sequence numbers).
    pub fn on_bare_data(&mut self, now: Instant, from: A, flow: u32, len: u32) {
        match self.responders.get_mut(&from) {
            Some((r, seen)) => {
                *seen = now;
                if r.on_bare(now, flow, len).is_err() {
                    self.counters.uncounted_data += 1;
                }
            }
            None => self.counters.uncounted_data += 1,
        }
    }

    /// A datagram from `from`. Control packets are handled here; data is
    /// counted for its sender's responder and its payload offset returned.
    /// `arrived` is when the socket received it (the probe's wait until
    /// now is echoed in the response).
    pub fn on_datagram(&mut self, now: Instant, arrived: Instant, from: A, buf: &[u8]) -> Incoming {
        let pkt = match Packet::decode(buf) {
            Ok(p) => p,
            Err(_) => {
                self.counters.malformed += 1;
                return Incoming::NotCm;
            }
        };
        match pkt {
            Packet::Data { flow, seq, .. } => {
                let len = u32::try_from(buf.len()).unwrap_or(u32::MAX);
                match self.responders.get_mut(&from) {
                    Some((r, seen)) => {
                        *seen = now;
                        if r.on_data(now, flow, seq, len).is_err() {
                            self.counters.uncounted_data += 1;
                        }
                    }
                    None => self.counters.uncounted_data += 1,
                }
                return Incoming::Data {
                    flow,
                    offset: HEADER_LEN,
                };
            }
            Packet::Syn { isn } => {
                let r = self.responder(now, from);
                let ack = r.on_syn(isn);
                self.counters.syn_acks += 1;
                self.transmit.push_back((from, ack.encode()));
            }
            Packet::Probe { seq } => {
                let delay = now.saturating_since(arrived);
                let answer = match self.responders.get_mut(&from) {
                    Some((r, seen)) => {
                        *seen = now;
                        r.on_probe(now, seq, delay)
                    }
                    None => Ok(Packet::Rst { seq }),
                };
                match answer {
                    Ok(p @ Packet::Rst { .. }) => {
                        self.counters.rsts += 1;
                        self.transmit.push_back((from, p.encode()));
                    }
                    Ok(p) => {
                        self.counters.responses += 1;
                        self.transmit.push_back((from, p.encode()));
                    }
                    Err(Refusal::StaleProbe | Refusal::OutOfWindow) => {
                        self.counters.bad_probes += 1;
                    }
                    Err(_) => self.counters.misdirected += 1,
                }
            }
            Packet::SynAck { .. } | Packet::Rst { .. } | Packet::Response(_) => {
                let Some(p) = self.probers.get_mut(&from) else {
                    self.counters.stale += 1;
                    return Incoming::Control;
                };
                match p.on_packet(now, &pkt) {
                    Ok(()) => {}
                    Err(Rejected::Stale) => self.counters.stale += 1,
                    Err(Rejected::Forged) => self.counters.forged += 1,
                    Err(Rejected::NotForProber) => self.counters.misdirected += 1,
                }
                self.drain(from);
            }
        }
        Incoming::Control
    }

    fn responder(&mut self, now: Instant, from: A) -> &mut Responder {
        if !self.responders.contains_key(&from) && self.responders.len() >= self.cfg.max_senders {
            let oldest = self
                .responders
                .iter()
                .min_by_key(|(_, (_, seen))| *seen)
                .map(|(a, _)| *a);
            if let Some(a) = oldest {
                self.responders.remove(&a);
                self.counters.evicted += 1;
            }
        }
        let e = self
            .responders
            .entry(from)
            .or_insert_with(|| (Responder::new(), now));
        e.1 = now;
        &mut e.0
    }

    /// The receiving application's hint for `flow` from `from`.
    pub fn set_hint(&mut self, now: Instant, from: A, flow: u32, hint: Hint) {
        self.responder(now, from).set_hint(flow, hint);
    }

    /// The receiving side's counts for `flow` from `from` (bytes received,
    /// packets declared lost).
    pub fn received(&self, from: &A, flow: u32) -> Option<(u64, u64)> {
        self.responders.get(from)?.0.flow_counts(flow)
    }

    /// An ICMP unreachable for `peer`'s CM port.
    pub fn on_unreachable(&mut self, now: Instant, peer: A) {
        if let Some(p) = self.probers.get_mut(&peer) {
            p.on_unreachable(now);
            self.drain(peer);
        }
    }

    /// A flow to `peer` closed.
    pub fn forget_flow(&mut self, peer: A, flow: u32) {
        if let Some(p) = self.probers.get_mut(&peer) {
            p.forget_flow(flow);
        }
    }

    fn drain(&mut self, peer: A) {
        if let Some(p) = self.probers.get_mut(&peer) {
            while let Some(pkt) = p.poll_transmit() {
                self.transmit.push_back((peer, pkt.encode()));
            }
            while let Some(r) = p.poll_report() {
                self.reports.push_back((peer, r));
            }
        }
    }

    /// The next datagram to send to a peer's CM port.
    pub fn poll_transmit(&mut self) -> Option<(A, Vec<u8>)> {
        self.transmit.pop_front()
    }

    /// The next feedback report for `cm_update`.
    pub fn poll_report(&mut self) -> Option<(A, Report)> {
        self.reports.pop_front()
    }

    /// The earliest timer of any prober.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.probers.values().filter_map(Prober::poll_timeout).min()
    }

    /// Runs the probers' timers that are due.
    pub fn handle_timeout(&mut self, now: Instant) {
        let due: Vec<A> = self
            .probers
            .iter()
            .filter(|(_, p)| p.poll_timeout().is_some_and(|t| t <= now))
            .map(|(a, _)| *a)
            .collect();
        for a in due {
            if let Some(p) = self.probers.get_mut(&a) {
                p.handle_timeout(now);
            }
            self.drain(a);
        }
    }

    /// The sender-side peers, for `cm stat`.
    pub fn peers(&self) -> Vec<PeerInfo<A>> {
        self.probers
            .iter()
            .map(|(a, p)| PeerInfo {
                peer: *a,
                state: p.state(),
                srtt: p.srtt(),
                loss: p.loss_estimate(),
                probes: (p.counters.probes, p.counters.responses),
            })
            .collect()
    }

    /// The prober towards `peer`, for inspection.
    pub fn prober(&self, peer: &A) -> Option<&Prober> {
        self.probers.get(peer)
    }

    /// Sending hosts with receiver state.
    pub fn sender_count(&self) -> usize {
        self.responders.len()
    }
}
