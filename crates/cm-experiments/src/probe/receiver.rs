//! The receiver host: the receiver CM (responder and loss detector) of
//! sigcomm1999 §2 Fig 3 behind one protocol endpoint.

use std::any::Any;
use std::collections::BTreeMap;

use cm_core::Instant;
use cm_proto::{Endpoint, EndpointConfig};
use cm_sim::{Ctx, Host, NodeId, Packet};

use super::{ProbePacket, RESPONSES};

/// Per-flow receive counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Received {
    /// Datagrams that arrived (duplicates included).
    pub packets: u64,
    /// Their payload bytes.
    pub bytes: u64,
    /// Of those, headed ones.
    pub headed: u64,
}

/// A host running the receiver CM for every sender that handshakes with it.
#[derive(Debug)]
pub struct ProbeReceiver {
    endpoint: Endpoint<NodeId>,
    headerless: bool,
    /// What arrived, per `(sender, flow)`.
    pub received: BTreeMap<(NodeId, u32), Received>,
    /// Reusable buffer for a headed datagram.
    buf: Vec<u8>,
    /// While `[from, until)`, answers are lost on their way back.
    outage: Option<(Instant, Instant)>,
    /// Answers lost to the outage.
    pub suppressed: u64,
}

impl ProbeReceiver {
    /// A receiver CM. `headerless`: count bare data per flow
    /// (`on_bare_data`, sigcomm1999 §4.2.2) — for senders whose data
    /// carries no header once negotiated; otherwise bare data is the
    /// handshake's and is not counted (the prober reports it itself).
    pub fn new(headerless: bool) -> Self {
        ProbeReceiver {
            endpoint: Endpoint::new(EndpointConfig::default(), 0x5eed_cafe),
            headerless,
            received: BTreeMap::new(),
            buf: Vec::new(),
            outage: None,
            suppressed: 0,
        }
    }

    /// The same receiver, whose answers (responses, SYN-ACKs, RSTs) sent
    /// in `[from, until)` are lost on the reverse path: a burst of lost
    /// responses (sigcomm1999 §4.4, "probe messages or responses may be
    /// lost during times of congestion").
    pub fn with_outage(mut self, from: Instant, until: Instant) -> Self {
        self.outage = Some((from, until));
        self
    }

    /// The protocol endpoint (for inspection).
    pub fn endpoint(&self) -> &Endpoint<NodeId> {
        &self.endpoint
    }

    /// Packets the receiver CM declared lost on `from`'s flow `flow`.
    pub fn declared_lost(&self, from: NodeId, flow: u32) -> Option<u64> {
        self.endpoint.received(&from, flow).map(|(_, lost)| lost)
    }
}

impl Host<ProbePacket> for ProbeReceiver {
    fn on_packet(
        &mut self,
        now: Instant,
        pkt: Packet<ProbePacket>,
        ctx: &mut Ctx<'_, ProbePacket>,
    ) {
        let from = pkt.src;
        match &pkt.payload {
            ProbePacket::Data { flow, header, len } => {
                let r = self.received.entry((from, *flow)).or_default();
                r.packets += 1;
                r.bytes += u64::from(*len);
                match header {
                    Some(h) => {
                        r.headed += 1;
                        self.buf.clear();
                        self.buf.extend_from_slice(h);
                        // `len` is the whole datagram, header included, as
                        // the sender notified the CM of it.
                        self.buf.resize((*len as usize).max(h.len()), 0);
                        self.endpoint.on_datagram(now, now, from, &self.buf);
                    }
                    None if self.headerless => {
                        self.endpoint.on_bare_data(now, from, *flow, *len);
                    }
                    None => {}
                }
            }
            ProbePacket::Control(bytes) => {
                self.endpoint.on_datagram(now, now, from, bytes);
            }
            ProbePacket::Cross { .. } => {}
        }
        let lost = self.outage.is_some_and(|(a, b)| a <= now && now < b);
        while let Some((to, bytes)) = self.endpoint.poll_transmit() {
            if lost {
                self.suppressed += 1;
                continue;
            }
            let _ = ctx.send(to, RESPONSES, ProbePacket::Control(bytes));
        }
    }

    fn on_timer(&mut self, _now: Instant, _ctx: &mut Ctx<'_, ProbePacket>) {}

    fn next_timer(&self) -> Option<Instant> {
        None
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
