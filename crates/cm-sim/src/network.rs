//! The network: links with their queues and wires, routes, the event queue,
//! the RNG, per-flow counters and tracing: everything of a simulation but
//! the hosts, so a host's [`Ctx`](crate::Ctx) can borrow it mutably while the
//! engine holds the hosts.

use std::collections::BTreeMap;

use cm_core::Instant;

use crate::error::{NotAHost, SendError, TopologyError};
use crate::event::{Ev, EventQueue};
use crate::link::LinkState;
use crate::packet::{FlowTag, LinkId, NodeId, Packet, Payload};
use crate::rng::SimRng;
use crate::stats::FlowStats;
use crate::topology::{NodeKind, Routes, Topology};
use crate::trace::{DropKind, TraceKind, TraceMode, TraceRecord};

/// Trace destination plus a fast "is it on" flag.
#[derive(Default)]
pub(crate) struct Tracer {
    on: bool,
    mode: TraceMode,
    records: Vec<TraceRecord>,
}

impl Tracer {
    /// Sets where records go; records already collected are kept.
    pub(crate) fn set_mode(&mut self, mode: TraceMode) {
        self.on = !matches!(mode, TraceMode::Off);
        self.mode = mode;
    }

    /// Takes the records collected under [`TraceMode::Collect`].
    pub(crate) fn take(&mut self) -> Vec<TraceRecord> {
        std::mem::take(&mut self.records)
    }

    #[inline]
    fn emit<P: Payload>(
        &mut self,
        now: Instant,
        kind: TraceKind,
        node: NodeId,
        link: Option<LinkId>,
        pkt: &Packet<P>,
    ) {
        if !self.on {
            return;
        }
        let r = TraceRecord {
            time: now,
            kind,
            node,
            link,
            packet: pkt.id,
            flow: pkt.flow,
            src: pkt.src,
            dst: pkt.dst,
            size: pkt.wire_len(),
        };
        match &mut self.mode {
            TraceMode::Off => {}
            TraceMode::Collect => self.records.push(r),
            TraceMode::Sink(f) => f(&r),
        }
    }
}

/// Everything but the hosts, so a host can hold `&mut Network` through
/// [`Ctx`](crate::Ctx).
pub(crate) struct Network<P> {
    pub(crate) now: Instant,
    pub(crate) events: EventQueue,
    pub(crate) rng: SimRng,
    pub(crate) links: Vec<LinkState<P>>,
    pub(crate) routes: Routes,
    pub(crate) kinds: Vec<NodeKind>,
    next_packet_id: u64,
    pub(crate) flows: BTreeMap<FlowTag, FlowStats>,
    pub(crate) tracer: Tracer,
}

impl<P: Payload> Network<P> {
    /// The network of `topology` at time zero, its RNG seeded by `seed`.
    /// Fails if some host cannot reach another.
    pub(crate) fn new(topology: Topology, seed: u64) -> Result<Self, TopologyError> {
        let routes = topology.routes()?;
        let links = topology
            .links
            .iter()
            .map(|s| LinkState::new(s.from, s.to, s.config))
            .collect();
        Ok(Network {
            now: Instant::ZERO,
            events: EventQueue::default(),
            rng: SimRng::seed_from_u64(seed),
            links,
            routes,
            kinds: topology.nodes,
            next_packet_id: 0,
            flows: BTreeMap::new(),
            tracer: Tracer::default(),
        })
    }

    /// `Ok` if `node` is a host of the topology.
    pub(crate) fn require_host(&self, node: NodeId) -> Result<(), NotAHost> {
        match self.kinds.get(node.index()) {
            None => Err(NotAHost::Unknown(node)),
            Some(NodeKind::Router) => Err(NotAHost::Router(node)),
            Some(NodeKind::Host) => Ok(()),
        }
    }

    pub(crate) fn send(
        &mut self,
        src: NodeId,
        dst: NodeId,
        flow: FlowTag,
        payload: P,
    ) -> Result<u64, SendError> {
        self.require_host(dst)?;
        if src == dst {
            return Err(SendError::SelfAddressed(src));
        }
        let link = self
            .routes
            .next_hop(src, dst)
            .ok_or(SendError::Unroutable { from: src, to: dst })?;
        let id = self.next_packet_id;
        self.next_packet_id += 1;
        let pkt = Packet {
            id,
            src,
            dst,
            flow,
            sent_at: self.now,
            payload,
        };
        let fs = self.flows.entry(flow).or_default();
        fs.sent_packets += 1;
        fs.sent_bytes += u64::from(pkt.wire_len());
        fs.first_sent.get_or_insert(self.now);
        self.tracer.emit(self.now, TraceKind::Send, src, None, &pkt);
        self.enqueue(link, pkt);
        Ok(id)
    }

    /// Offers `pkt` to link `l`: transmit now if idle, else queue or drop.
    fn enqueue(&mut self, l: LinkId, pkt: Packet<P>) {
        let now = self.now;
        let link = &mut self.links[l.index()];
        let len = pkt.wire_len();
        if link.tx.is_none() {
            // Invariant: an idle link has an empty queue (tx_done refills tx).
            link.stats.enqueued += 1;
            self.tracer
                .emit(now, TraceKind::Enqueue, link.from, Some(l), &pkt);
            self.tracer
                .emit(now, TraceKind::TxStart, link.from, Some(l), &pkt);
            let ser = link.cfg.serialization(len);
            link.stats.busy_us += ser.as_micros();
            link.tx = Some(pkt);
            self.events.push(now + ser, Ev::TxDone(l.0));
        } else if link.fits(len) {
            link.stats.enqueued += 1;
            self.tracer
                .emit(now, TraceKind::Enqueue, link.from, Some(l), &pkt);
            link.account(now);
            link.push(pkt);
        } else {
            link.stats.dropped_overflow += 1;
            link.stats.dropped_overflow_bytes += u64::from(len);
            let from = link.from;
            self.count_drop(DropKind::Overflow, from, l, &pkt);
        }
    }

    /// A packet of `pkt.flow` was dropped on link `l` (leaving node `from`):
    /// the trace record and the flow's counters (the link counts its own).
    fn count_drop(&mut self, kind: DropKind, from: NodeId, l: LinkId, pkt: &Packet<P>) {
        let now = self.now;
        Self::count_drop_in(&mut self.tracer, &mut self.flows, now, kind, from, l, pkt);
    }

    /// [`Self::count_drop`] on the two fields it touches, for callers that
    /// hold a link borrowed.
    fn count_drop_in(
        tracer: &mut Tracer,
        flows: &mut BTreeMap<FlowTag, FlowStats>,
        now: Instant,
        kind: DropKind,
        from: NodeId,
        l: LinkId,
        pkt: &Packet<P>,
    ) {
        tracer.emit(now, TraceKind::Drop(kind), from, Some(l), pkt);
        let fs = flows.entry(pkt.flow).or_default();
        match kind {
            DropKind::Overflow => fs.dropped_overflow += 1,
            DropKind::Random => fs.dropped_random += 1,
        }
        *fs.dropped_at.entry(l).or_default() += 1;
    }

    /// Link `l` finished serializing: apply random loss, reordering and
    /// duplication, put the packet (and any copy) on the wire, start the
    /// next one.
    pub(crate) fn tx_done(&mut self, l: u32) {
        let now = self.now;
        let id = LinkId(l);
        let link = &mut self.links[l as usize];
        let Some(pkt) = link.tx.take() else {
            return;
        };
        link.stats.sent_packets += 1;
        link.stats.sent_bytes += u64::from(pkt.wire_len());
        // Draw only on lossy links, so loss-free links leave the RNG stream alone.
        if link.cfg.loss > 0.0 && self.rng.bernoulli(link.cfg.loss) {
            link.stats.dropped_random += 1;
            let from = link.from;
            Self::count_drop_in(
                &mut self.tracer,
                &mut self.flows,
                now,
                DropKind::Random,
                from,
                id,
                &pkt,
            );
        } else {
            // Reordering and duplication (link.rs module docs), drawn only
            // when enabled so that other links leave the RNG stream alone.
            let held = link.cfg.reorder > 0.0 && self.rng.bernoulli(link.cfg.reorder);
            let copy = (link.cfg.duplicate > 0.0 && self.rng.bernoulli(link.cfg.duplicate))
                .then(|| pkt.clone());
            let (fifo, at, ev) = if held {
                link.stats.reordered += 1;
                let at = now + link.cfg.delay + link.cfg.reorder_delay;
                (&mut link.held, at, Ev::ArriveHeld(l))
            } else {
                (&mut link.wire, now + link.cfg.delay, Ev::Arrive(l))
            };
            fifo.push_back(pkt);
            self.events.push(at, ev);
            if let Some(copy) = copy {
                // Same time, scheduled next: arrives right after the original.
                link.stats.duplicated += 1;
                self.flows.entry(copy.flow).or_default().duplicated += 1;
                fifo.push_back(copy);
                self.events.push(at, ev);
            }
        }
        link.account(now);
        if let Some(next) = link.pop() {
            let ser = link.cfg.serialization(next.wire_len());
            link.stats.busy_us += ser.as_micros();
            self.tracer
                .emit(now, TraceKind::TxStart, link.from, Some(id), &next);
            link.tx = Some(next);
            self.events.push(now + ser, Ev::TxDone(l));
        }
    }

    /// The head of link `l`'s wire (or, if `held`, of its held-back FIFO)
    /// arrives: forward it, or return it for delivery to its destination host.
    pub(crate) fn arrive(&mut self, l: u32, held: bool) -> Option<(NodeId, Packet<P>)> {
        let now = self.now;
        let link = &mut self.links[l as usize];
        let fifo = if held { &mut link.held } else { &mut link.wire };
        let pkt = fifo.pop_front()?;
        let node = link.to;
        if pkt.dst == node {
            let fs = self.flows.entry(pkt.flow).or_default();
            fs.delivered_packets += 1;
            fs.delivered_bytes += u64::from(pkt.wire_len());
            fs.delay_sum_us += u128::from((now - pkt.sent_at).as_micros());
            fs.last_delivered = Some(now);
            self.tracer
                .emit(now, TraceKind::Deliver, node, Some(LinkId(l)), &pkt);
            return Some((node, pkt));
        }
        // Routes never lead through hosts, so `node` is a router here; a
        // missing next hop cannot happen for host destinations (checked at
        // build time), and the packet is discarded if it did.
        if let Some(next) = self.routes.next_hop(node, pkt.dst) {
            self.enqueue(next, pkt);
        }
        None
    }
}
