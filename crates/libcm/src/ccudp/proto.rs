//! The CM protocol on a [`CcUdpSocket`](super::CcUdpSocket) (sigcomm1999
//! §4.2–4.3, `cm_proto`): the sending socket runs a prober towards its
//! peer and the receiving socket is the peer's receiver CM, so an
//! application that never acknowledges anything is still congestion
//! controlled.
//!
//! The protocol's datagrams travel on the socket pair itself (first byte
//! 0xCB; CC-UDP's are 0xC3): in user space a receiver CM cannot see other
//! processes' datagrams, so the socket that receives a flow's data is the
//! one that can count it, and probes on the flow's own 5-tuple take the
//! data's path through NATs and firewalls. The congestion state is still
//! per host: every socket's reports update its flow's macroflow.
//!
//! Per datagram: while the handshake runs (or after a fallback) the
//! datagram carries CC-UDP's header and is resolved by the receiver's acks,
//! as before; once the peer has answered the SYN it carries the CM header
//! and is resolved by probe responses. Each datagram is resolved by exactly
//! one of the two, so no byte is counted twice.

use std::collections::VecDeque;

use cm_core::{Bytes, Feedback, Instant, LossMode};
use cm_proto::prober::{Prober, ProberConfig, Report};
use cm_proto::responder::Responder;
use cm_proto::wire::{self as pw, Packet};

/// What a queued datagram carries, in queue order.
#[derive(Clone, Copy, Debug)]
pub(super) enum Queued {
    /// CC-UDP header: the accounting and the peer's acks resolve it.
    CcUdp,
    /// CM header under association `epoch`: probes resolve it.
    Cm {
        /// Association epoch at queue time.
        epoch: u64,
        /// Payload bytes.
        len: u32,
    },
}

/// Counters of the protocol on one socket.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProtoStats {
    /// The peer's state: "off", "handshaking", "negotiated", "fallback".
    pub state: &'static str,
    /// Probes sent and responses accepted.
    pub probes: (u64, u64),
    /// SYNs sent (more than one: the handshake was retried).
    pub syns: u64,
    /// Datagrams sent with the CM header.
    pub cm_sent: u64,
    /// Of those, declared lost by the peer's receiver CM.
    pub cm_lost: u64,
    /// Resynchronisations after the peer lost its state (RST).
    pub resets: u64,
    /// Fallbacks to "no receiver CM".
    pub fallbacks: u64,
    /// Times the peer went silent with data outstanding.
    pub silences: u64,
    /// Protocol datagrams refused (malformed, stale, forged, replayed).
    pub refused: u64,
    /// Data datagrams counted by this socket's receiver CM.
    pub cm_received: u64,
    /// Probes this socket answered.
    pub answered: u64,
}

/// The protocol state of one socket.
#[derive(Debug)]
pub(super) struct Proto {
    pub enabled: bool,
    /// Sender side (created at the first send).
    pub prober: Option<Prober>,
    /// Receiver side.
    pub responder: Responder,
    /// This socket's flow number in CM headers.
    pub flow: u32,
    pub secret: u64,
    pub queued: VecDeque<Queued>,
    pub refused: u64,
    pub cfg: ProberConfig,
    /// What was last reported to the CM for `cm stat`, and when.
    pub reported: Option<(cm_ipc::PeerStat, Instant)>,
    /// The feedback lag last set on the flow's macroflow.
    pub lag: Option<u16>,
}

impl Proto {
    pub fn new(secret: u64) -> Self {
        Proto {
            enabled: true,
            prober: None,
            responder: Responder::new(),
            flow: (secret >> 32) as u32,
            secret,
            queued: VecDeque::new(),
            refused: 0,
            cfg: ProberConfig::default(),
            reported: None,
            lag: None,
        }
    }

    /// A datagram of `len` payload bytes is about to be queued: the CM header to put in front of
    /// it (`Some`), or `None` for CC-UDP's. Starts the handshake on the
    /// first call.
    pub fn header_for(&mut self, now: Instant, len: u32) -> Option<[u8; pw::HEADER_LEN]> {
        if !self.enabled {
            self.queued.push_back(Queued::CcUdp);
            return None;
        }
        let p = self
            .prober
            .get_or_insert_with(|| Prober::new(self.cfg, now, self.secret));
        match p.assign_seq(self.flow) {
            Some((seq, epoch)) => {
                // Counted as the CM is told: the whole datagram.
                let len = len.saturating_add(pw::HEADER_LEN as u32);
                self.queued.push_back(Queued::Cm { epoch, len });
                Some(pw::datagram_header(self.flow, seq))
            }
            None => {
                self.queued.push_back(Queued::CcUdp);
                None
            }
        }
    }

    /// A datagram given a header by [`header_for`](Self::header_for) was
    /// not queued after all: take its place back.
    pub fn unqueue(&mut self, cm: bool) {
        self.queued.pop_back();
        if cm {
            if let Some(p) = &mut self.prober {
                p.unassign(self.flow);
            }
        }
    }

    /// Queued datagrams left the socket, at most `most` of them, the
    /// first at `now`: what the first is, and how many left with it. A
    /// CC-UDP datagram goes alone (`CcUdp`, for the accounting, which
    /// times each); a run of CM datagrams of one association is counted
    /// by the prober at once (`Counted`), or, when that association is
    /// gone, is feedback to report at once (`Orphan`).
    pub fn departed_run(&mut self, now: Instant, most: u64) -> (Departed, u64) {
        let Some(Queued::Cm { epoch, len }) = self.queued.pop_front() else {
            return (Departed::CcUdp, 1);
        };
        let (mut packets, mut bytes) = (1u64, u64::from(len));
        while packets < most {
            match self.queued.front() {
                Some(&Queued::Cm { epoch: e, len }) if e == epoch => {
                    self.queued.pop_front();
                    packets += 1;
                    bytes += u64::from(len);
                }
                _ => break,
            }
        }
        let counted = self
            .prober
            .as_mut()
            .is_some_and(|p| p.on_departed_run(now, self.flow, bytes, packets, epoch));
        let d = if counted {
            Departed::Counted
        } else {
            Departed::Orphan(Feedback {
                nsent: Bytes(bytes),
                nrecd: Bytes::ZERO,
                loss: LossMode::NotCongestion,
                rtt: None,
                lost_sent: None,
            })
        };
        (d, packets)
    }

    /// Handles a protocol datagram from the peer. Returns the answer to
    /// send, if any, and the payload offset for data.
    pub fn on_datagram(&mut self, now: Instant, arrived: Instant, buf: &[u8]) -> Inbound {
        if !self.enabled {
            return Inbound::NotProtocol;
        }
        let pkt = match Packet::decode(buf) {
            Ok(p) => p,
            Err(_) => {
                self.refused += 1;
                return Inbound::Refused;
            }
        };
        match pkt {
            Packet::Syn { isn } => Inbound::Answer(self.responder.on_syn(isn).encode()),
            Packet::Probe { seq } => {
                match self
                    .responder
                    .on_probe(now, seq, now.saturating_since(arrived))
                {
                    Ok(p) => Inbound::Answer(p.encode()),
                    Err(_) => {
                        self.refused += 1;
                        Inbound::Refused
                    }
                }
            }
            Packet::Data { flow, seq, .. } => {
                let len = u32::try_from(buf.len()).unwrap_or(u32::MAX);
                match self.responder.on_data(now, flow, seq, len) {
                    Err(cm_proto::responder::Refusal::Duplicate) => Inbound::Duplicate,
                    // Data under no (or an old) association is delivered,
                    // not counted.
                    _ => Inbound::Data(pw::HEADER_LEN),
                }
            }
            other => {
                // The prober counts what it refuses (stale, forged).
                match self.prober.as_mut() {
                    Some(p) => {
                        let _ = p.on_packet(now, &other);
                    }
                    None => self.refused += 1,
                }
                Inbound::Control
            }
        }
    }

    /// Control packets to send and reports to hand to `cm_update`.
    pub fn take_output(&mut self, out: &mut Vec<Vec<u8>>, reports: &mut Vec<Report>) {
        if let Some(p) = &mut self.prober {
            while let Some(pkt) = p.poll_transmit() {
                out.push(pkt.encode());
            }
            while let Some(r) = p.poll_report() {
                reports.push(r);
            }
        }
    }

    /// The feedback lag the flow's macroflow should run with, if it changed:
    /// the probes' lag while negotiated, none otherwise (the acks of
    /// CC-UDP resolve each datagram).
    pub fn lag_change(&mut self) -> Option<Option<u16>> {
        let want = self
            .prober
            .as_ref()
            .filter(|p| p.state() == cm_proto::PeerState::Negotiated)
            .map(Prober::feedback_lag_per_mille);
        (want != self.lag).then(|| {
            self.lag = want;
            want
        })
    }

    /// The peer's state for `cm stat`, if it is due to be reported: on
    /// a change of mode, and at most once a second otherwise.
    pub fn peer_report(&mut self, now: Instant) -> Option<cm_ipc::PeerStat> {
        let p = self.prober.as_ref()?;
        let mode = match p.state() {
            cm_proto::PeerState::Handshaking => cm_ipc::PeerMode::Handshaking,
            cm_proto::PeerState::Negotiated => cm_ipc::PeerMode::Negotiated,
            cm_proto::PeerState::Fallback => cm_ipc::PeerMode::Fallback,
        };
        let stat = cm_ipc::PeerStat {
            mode,
            probe_srtt_us: p.srtt().map(cm_core::Duration::as_micros),
            loss_ppm: p.loss_estimate().map(|l| (l * 1e6).round() as u64),
            probes: p.counters.probes,
            responses: p.counters.responses,
        };
        let due = match self.reported {
            None => true,
            Some((last, at)) => {
                last.mode != mode
                    || (last != stat && now.saturating_since(at) >= cm_core::Duration::from_secs(1))
            }
        };
        if due {
            self.reported = Some((stat, now));
            return Some(stat);
        }
        None
    }

    pub fn stats(&self) -> ProtoStats {
        let mut s = ProtoStats {
            state: if self.enabled { "idle" } else { "off" },
            refused: self.refused,
            cm_received: self.responder.data_packets,
            answered: self.responder.probes_answered,
            ..ProtoStats::default()
        };
        if let Some(p) = &self.prober {
            let c = p.counters;
            s.state = p.state().as_str();
            s.probes = (c.probes, c.responses);
            s.syns = c.syns;
            (s.cm_sent, s.cm_lost) = p.packet_counts();
            s.resets = c.resets;
            s.fallbacks = c.fallbacks;
            s.silences = c.silences;
            s.refused += c.stale + c.forged;
        }
        s
    }
}

/// What became of a departed datagram.
pub(super) enum Departed {
    /// A CC-UDP datagram: tell the accounting.
    CcUdp,
    /// Counted by the prober.
    Counted,
    /// Its association is gone: resolve it now with this feedback.
    Orphan(Feedback),
}

/// What an inbound protocol datagram asks for.
pub(super) enum Inbound {
    /// Not handled (protocol off): treat as malformed.
    NotProtocol,
    /// Dropped and counted.
    Refused,
    /// Handled.
    Control,
    /// Send this answer to the peer.
    Answer(Vec<u8>),
    /// CM-headed data: deliver the payload from this offset.
    Data(usize),
    /// A duplicate of counted data: drop.
    Duplicate,
}
