//! The receiver CM for one sending host: the Responder and the Loss
//! Detector of sigcomm1999 §2 Fig 3, answering the handshake (§4.3) and
//! probes (§4.2.2, Fig 8), with the receiver's hints (the Hints
//! Dispatcher).
//!
//! Counts are cumulative per flow (bytes received, packets declared lost)
//! rather than Fig 8's per-interval `nrecd`: a lost response then loses
//! nothing, because the next one says everything it would have said (as a
//! cumulative TCP ACK does). The sender takes differences.

use std::collections::HashMap;

use cm_core::{Duration, Instant};

use crate::loss::SettlingDetector;
use crate::wire::{FlowReport, Hint, MAX_ENTRIES, Packet, Response};
use crate::wire::{PACKET_BITS, association_tag};

/// Why the responder dropped a datagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// A probe or data for an association this responder does not have
    /// (answered with RST for a probe).
    NoAssociation,
    /// A probe number at or below one already answered (replay or
    /// reordering of probes).
    StaleProbe,
    /// A probe number too far ahead of the association's (forged).
    OutOfWindow,
    /// A duplicate data packet (not counted).
    Duplicate,
    /// A type a responder does not take (SYN-ACK, RESPONSE, RST).
    NotForResponder,
    /// More flows than the responder tracks per sender.
    TooManyFlows,
}

/// Probes the sender may have sent and lost between two that arrive: a
/// probe numbered further ahead than this is refused as forged.
pub const PROBE_WINDOW: u64 = 1 << 20;
/// Flows tracked per sending host.
pub const MAX_FLOWS: usize = 4096;
/// A flow with no data for this long is forgotten.
pub const FLOW_IDLE: Duration = Duration::from_secs(120);

#[derive(Clone, Debug, Default)]
struct FlowRx {
    bytes: u64,
    packets: u32,
    detector: SettlingDetector,
    hint: Hint,
    last_seen: Option<Instant>,
}

/// The receiver side of one association (one sending host).
#[derive(Clone, Debug, Default)]
pub struct Responder {
    /// The association's ISN (`None`: none yet, or forgotten).
    isn: Option<u64>,
    /// The last probe answered (Fig 8's `lastprobe`).
    last_probe: u64,
    flows: HashMap<u32, FlowRx>,
    /// Hints set before the flow's first packet.
    pending_hints: HashMap<u32, Hint>,
    /// The hint for every flow without one of its own.
    default_hint: Hint,
    /// Data packets counted.
    pub data_packets: u64,
    /// Probes answered.
    pub probes_answered: u64,
}

impl Responder {
    /// No association yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether a handshake has set up an association.
    pub fn associated(&self) -> bool {
        self.isn.is_some()
    }

    /// A SYN: (re)starts the association and answers with a SYN-ACK
    /// echoing its number. A new SYN from the same host means the sender
    /// restarted: its flows' counts start afresh.
    pub fn on_syn(&mut self, isn: u64) -> Packet {
        if self.isn != Some(isn) {
            self.isn = Some(isn);
            self.last_probe = isn;
            self.flows.clear();
        }
        Packet::SynAck { isn }
    }

    /// A CM-headed data packet of `len` bytes (the whole datagram, header
    /// included, as the sender notified the CM of it). Returns whether it
    /// was counted (duplicates are not). Data without an association is
    /// still delivered by the caller, but not counted.
    pub fn on_data(&mut self, now: Instant, flow: u32, seq: u64, len: u32) -> Result<(), Refusal> {
        let Some(isn) = self.isn else {
            return Err(Refusal::NoAssociation);
        };
        // Headed under another association (before a reset): not ours.
        if association_tag(seq) != isn as u16 {
            return Err(Refusal::NoAssociation);
        }
        let seq = seq & ((1 << PACKET_BITS) - 1);
        if !self.flows.contains_key(&flow) {
            if self.flows.len() >= MAX_FLOWS {
                self.forget_idle(now);
                if self.flows.len() >= MAX_FLOWS {
                    return Err(Refusal::TooManyFlows);
                }
            }
            let hint = self
                .pending_hints
                .remove(&flow)
                .unwrap_or(self.default_hint);
            self.flows.insert(
                flow,
                FlowRx {
                    hint,
                    ..FlowRx::default()
                },
            );
        }
        let Some(f) = self.flows.get_mut(&flow) else {
            return Err(Refusal::NoAssociation);
        };
        f.last_seen = Some(now);
        if !f.detector.on_packet(seq) {
            return Err(Refusal::Duplicate);
        }
        f.bytes = f.bytes.wrapping_add(u64::from(len));
        f.packets = f.packets.wrapping_add(1);
        self.data_packets += 1;
        Ok(())
    }

    /// A data packet of `flow` that came without a CM header (a sender
    /// that could not negotiate one, §4.2.2): its bytes count, but without
    /// a sequence number no loss can be detected here.
    pub fn on_bare(&mut self, now: Instant, flow: u32, len: u32) -> Result<(), Refusal> {
        if self.isn.is_none() {
            return Err(Refusal::NoAssociation);
        }
        if !self.flows.contains_key(&flow) && self.flows.len() >= MAX_FLOWS {
            return Err(Refusal::TooManyFlows);
        }
        let f = self.flows.entry(flow).or_default();
        f.last_seen = Some(now);
        f.bytes = f.bytes.wrapping_add(u64::from(len));
        f.packets = f.packets.wrapping_add(1);
        self.data_packets += 1;
        Ok(())
    }

    /// A probe: the response (Fig 8, receiver side), or RST when there is
    /// no association (the receiver restarted, §4.3). `delay` is how long
    /// the probe waited before this call, echoed for the RTT sample.
    pub fn on_probe(&mut self, now: Instant, seq: u64, delay: Duration) -> Result<Packet, Refusal> {
        if self.isn.is_none() {
            return Ok(Packet::Rst { seq });
        }
        if seq <= self.last_probe {
            return Err(Refusal::StaleProbe);
        }
        if seq - self.last_probe > PROBE_WINDOW {
            return Err(Refusal::OutOfWindow);
        }
        self.forget_idle(now);
        let mut flows: Vec<FlowReport> = self
            .flows
            .iter_mut()
            .map(|(&flow, f)| {
                let lost = f.detector.on_probe();
                FlowReport {
                    flow,
                    bytes: f.bytes,
                    lost: u32::try_from(lost).unwrap_or(u32::MAX),
                    hint: f.hint,
                    packets: f.packets,
                }
            })
            .collect();
        // Most recently active first when there are more than fit.
        if flows.len() > MAX_ENTRIES {
            flows.sort_by_key(|r| {
                std::cmp::Reverse(self.flows.get(&r.flow).and_then(|f| f.last_seen))
            });
            flows.truncate(MAX_ENTRIES);
        }
        flows.sort_by_key(|r| r.flow);
        let r = Response {
            this_probe: seq,
            last_probe: self.last_probe,
            delay_us: u32::try_from(delay.as_micros()).unwrap_or(u32::MAX),
            flows,
        };
        self.last_probe = seq;
        self.probes_answered += 1;
        Ok(Packet::Response(r))
    }

    /// The receiving application's hint for `flow` (weight and/or rate),
    /// sent back with the next responses.
    pub fn set_hint(&mut self, flow: u32, hint: Hint) {
        match self.flows.get_mut(&flow) {
            Some(f) => f.hint = hint,
            None => {
                if self.pending_hints.len() < MAX_FLOWS {
                    self.pending_hints.insert(flow, hint);
                }
            }
        }
    }

    /// The receiving application's hint for every flow from this sender
    /// that has none of its own (a socket that receives one flow does not
    /// know its number in advance).
    pub fn set_default_hint(&mut self, hint: Hint) {
        let old = self.default_hint;
        self.default_hint = hint;
        for f in self.flows.values_mut() {
            if f.hint == old {
                f.hint = hint;
            }
        }
    }

    /// Bytes received and packets declared lost on `flow`, if known.
    pub fn flow_counts(&self, flow: u32) -> Option<(u64, u64)> {
        self.flows
            .get(&flow)
            .map(|f| (f.bytes, f.detector.detector.lost()))
    }

    fn forget_idle(&mut self, now: Instant) {
        self.flows.retain(|_, f| {
            f.last_seen
                .is_none_or(|t| now.saturating_since(t) < FLOW_IDLE)
        });
    }
}
