//! The simulator: virtual time, event dispatch, link transmission and
//! forwarding, host callbacks with lazily re-armed timers.

use std::any::Any;
use std::collections::BTreeMap;

use cm_core::{Duration, Instant};

use crate::error::{SendError, TopologyError};
use crate::event::{Ev, EventQueue};
use crate::host::{Ctx, Host};
use crate::link::{LinkState, LinkStats};
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

/// Everything but the hosts, so a host can hold `&mut Core` through [`Ctx`].
pub(crate) struct Core<P> {
    pub(crate) now: Instant,
    pub(crate) events: EventQueue,
    pub(crate) rng: SimRng,
    pub(crate) links: Vec<LinkState<P>>,
    pub(crate) routes: Routes,
    pub(crate) kinds: Vec<NodeKind>,
    next_packet_id: u64,
    flows: BTreeMap<FlowTag, FlowStats>,
    tracer: Tracer,
}

impl<P: Payload> Core<P> {
    pub(crate) fn send(
        &mut self,
        src: NodeId,
        dst: NodeId,
        flow: FlowTag,
        payload: P,
    ) -> Result<u64, SendError> {
        match self.kinds.get(dst.index()) {
            None => return Err(SendError::UnknownNode(dst)),
            Some(NodeKind::Router) => return Err(SendError::NotAHost(dst)),
            Some(NodeKind::Host) => {}
        }
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
            self.tracer.emit(
                now,
                TraceKind::Drop(DropKind::Overflow),
                link.from,
                Some(l),
                &pkt,
            );
            let fs = self.flows.entry(pkt.flow).or_default();
            fs.dropped_overflow += 1;
            *fs.dropped_at.entry(l).or_default() += 1;
        }
    }

    /// Link `l` finished serializing: apply random loss, put the packet on
    /// the wire, start the next one.
    fn tx_done(&mut self, l: u32) {
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
            self.tracer.emit(
                now,
                TraceKind::Drop(DropKind::Random),
                link.from,
                Some(id),
                &pkt,
            );
            let fs = self.flows.entry(pkt.flow).or_default();
            fs.dropped_random += 1;
            *fs.dropped_at.entry(id).or_default() += 1;
        } else {
            link.wire.push_back(pkt);
            self.events.push(now + link.cfg.delay, Ev::Arrive(l));
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

    /// The head of link `l`'s wire arrives: forward it, or return it for
    /// delivery to its destination host.
    fn arrive(&mut self, l: u32) -> Option<(NodeId, Packet<P>)> {
        let now = self.now;
        let link = &mut self.links[l as usize];
        let pkt = link.wire.pop_front()?;
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

/// Per-host timer bookkeeping.
#[derive(Clone, Copy, Debug, Default)]
struct TimerSlot {
    generation: u32,
    armed: Option<Instant>,
}

/// A deterministic discrete-event network simulation over payload type `P`.
pub struct Sim<P: Payload> {
    core: Core<P>,
    hosts: Vec<Option<Box<dyn Host<P>>>>,
    timers: Vec<TimerSlot>,
    events_processed: u64,
}

impl<P: Payload> Sim<P> {
    /// A simulation of `topology` at time zero, with the RNG seeded by `seed`.
    /// Fails if some host cannot reach another.
    pub fn new(topology: Topology, seed: u64) -> Result<Self, TopologyError> {
        let routes = topology.routes()?;
        let links = topology
            .links
            .iter()
            .map(|s| LinkState::new(s.from, s.to, s.config))
            .collect();
        let n = topology.nodes.len();
        Ok(Sim {
            core: Core {
                now: Instant::ZERO,
                events: EventQueue::default(),
                rng: SimRng::seed_from_u64(seed),
                links,
                routes,
                kinds: topology.nodes,
                next_packet_id: 0,
                flows: BTreeMap::new(),
                tracer: Tracer::default(),
            },
            hosts: (0..n).map(|_| None).collect(),
            timers: vec![TimerSlot::default(); n],
            events_processed: 0,
        })
    }

    /// Runs `host` on host node `node`; its `start` hook runs at the current
    /// time, in event order.
    pub fn attach<H: Host<P> + 'static>(
        &mut self,
        node: NodeId,
        host: H,
    ) -> Result<(), TopologyError> {
        self.attach_boxed(node, Box::new(host))
    }

    /// [`attach`](Sim::attach) for an already boxed host.
    pub fn attach_boxed(
        &mut self,
        node: NodeId,
        host: Box<dyn Host<P>>,
    ) -> Result<(), TopologyError> {
        match self.core.kinds.get(node.index()) {
            None => return Err(TopologyError::UnknownNode(node)),
            Some(NodeKind::Router) => return Err(TopologyError::NotAHost(node)),
            Some(NodeKind::Host) => {}
        }
        let slot = &mut self.hosts[node.index()];
        if slot.is_some() {
            return Err(TopologyError::HostAlreadyAttached(node));
        }
        *slot = Some(host);
        self.core.events.push(self.core.now, Ev::Start(node.0));
        Ok(())
    }

    /// Sets where trace records go (replacing any previous mode; records
    /// already collected are kept until [`take_trace`](Sim::take_trace)).
    pub fn set_trace(&mut self, mode: TraceMode) {
        self.core.tracer.on = !matches!(mode, TraceMode::Off);
        self.core.tracer.mode = mode;
    }

    /// Takes the records collected under [`TraceMode::Collect`].
    pub fn take_trace(&mut self) -> Vec<TraceRecord> {
        std::mem::take(&mut self.core.tracer.records)
    }

    /// Sends a packet from host `src` at the current time, as if `src` had
    /// called [`Ctx::send`] (for tests and scripted experiments).
    pub fn inject(
        &mut self,
        src: NodeId,
        dst: NodeId,
        flow: FlowTag,
        payload: P,
    ) -> Result<u64, SendError> {
        match self.core.kinds.get(src.index()) {
            None => Err(SendError::UnknownNode(src)),
            Some(NodeKind::Router) => Err(SendError::NotAHost(src)),
            Some(NodeKind::Host) => self.core.send(src, dst, flow, payload),
        }
    }

    /// Processes the earliest pending event; `false` if there was none.
    pub fn step(&mut self) -> bool {
        let Some((t, ev)) = self.core.events.pop() else {
            return false;
        };
        self.core.now = t;
        self.events_processed += 1;
        match ev {
            Ev::TxDone(l) => self.core.tx_done(l),
            Ev::Arrive(l) => {
                if let Some((node, pkt)) = self.core.arrive(l) {
                    self.call_host(node.index(), |h, now, ctx| h.on_packet(now, pkt, ctx));
                }
            }
            Ev::Timer { host, generation } => {
                let slot = &mut self.timers[host as usize];
                if slot.generation == generation {
                    slot.armed = None;
                    self.call_host(host as usize, |h, now, ctx| h.on_timer(now, ctx));
                }
            }
            Ev::Start(host) => self.call_host(host as usize, |h, now, ctx| h.start(now, ctx)),
        }
        true
    }

    /// Runs every event at or before `t_end`, then sets the clock to `t_end`
    /// (if it is later than now).
    pub fn run_until(&mut self, t_end: Instant) {
        while self.core.events.peek_time().is_some_and(|t| t <= t_end) {
            self.step();
        }
        self.core.now = self.core.now.max(t_end);
    }

    /// Runs for `d` of simulated time from now.
    pub fn run_for(&mut self, d: Duration) {
        self.run_until(self.core.now + d);
    }

    /// Runs until no event is pending (never returns if a host keeps a
    /// timer armed forever, e.g. an unbounded CBR source).
    pub fn run_until_idle(&mut self) {
        while self.step() {}
    }

    fn call_host(
        &mut self,
        node: usize,
        f: impl FnOnce(&mut dyn Host<P>, Instant, &mut Ctx<'_, P>),
    ) {
        let Some(h) = self.hosts.get_mut(node).and_then(|h| h.as_deref_mut()) else {
            return; // no host attached: the packet or timer is discarded
        };
        let now = self.core.now;
        let mut ctx = Ctx {
            core: &mut self.core,
            node: NodeId(node as u32),
        };
        f(h, now, &mut ctx);
        let want = h.next_timer();
        let slot = &mut self.timers[node];
        if want != slot.armed {
            slot.generation = slot.generation.wrapping_add(1);
            slot.armed = want;
            if let Some(t) = want {
                let ev = Ev::Timer {
                    host: node as u32,
                    generation: slot.generation,
                };
                self.core.events.push(t.max(now), ev);
            }
        }
    }

    /// Current simulated time.
    pub fn now(&self) -> Instant {
        self.core.now
    }

    /// Events processed so far (stale timer events included).
    pub fn events_processed(&self) -> u64 {
        self.events_processed
    }

    /// Events waiting in the queue (stale timer events included).
    pub fn pending_events(&self) -> usize {
        self.core.events.len()
    }

    /// The host on `node`, downcast to `T`.
    pub fn host<T: Any>(&self, node: NodeId) -> Option<&T> {
        self.host_dyn(node)?.as_any().downcast_ref::<T>()
    }

    /// The host on `node` as a trait object.
    pub fn host_dyn(&self, node: NodeId) -> Option<&dyn Host<P>> {
        self.hosts.get(node.index())?.as_deref()
    }

    /// The simulation's RNG (for drawing workload parameters during setup).
    pub fn rng(&mut self) -> &mut SimRng {
        &mut self.core.rng
    }

    /// Number of links.
    pub fn link_count(&self) -> usize {
        self.core.links.len()
    }

    /// Endpoints `(from, to)` of link `l`.
    pub fn link_endpoints(&self, l: LinkId) -> Option<(NodeId, NodeId)> {
        self.core.links.get(l.index()).map(|s| (s.from, s.to))
    }

    /// Counters of link `l`, with queue integrals brought up to now.
    pub fn link_stats(&self, l: LinkId) -> Option<LinkStats> {
        let s = self.core.links.get(l.index())?;
        let mut st = s.stats;
        let dt = u128::from((self.core.now - st.observed_until).as_micros());
        st.queue_packet_us += s.queue.len() as u128 * dt;
        st.queue_byte_us += u128::from(s.queue_bytes) * dt;
        st.observed_until = st.observed_until.max(self.core.now);
        Some(st)
    }

    /// Packets currently waiting on link `l` (not counting the one being serialized).
    pub fn link_queue_len(&self, l: LinkId) -> Option<usize> {
        self.core.links.get(l.index()).map(|s| s.queue.len())
    }

    /// Counters of flow `flow`, if any packet of it was sent.
    pub fn flow_stats(&self, flow: FlowTag) -> Option<&FlowStats> {
        self.core.flows.get(&flow)
    }

    /// All flows, in tag order.
    pub fn flows(&self) -> impl Iterator<Item = (FlowTag, &FlowStats)> {
        self.core.flows.iter().map(|(k, v)| (*k, v))
    }

    /// The links a packet from `from` to `to` traverses, in order.
    pub fn path(&self, from: NodeId, to: NodeId) -> Option<Vec<LinkId>> {
        let mut path = Vec::new();
        let mut at = from;
        while at != to {
            let l = self.core.routes.next_hop(at, to)?;
            path.push(l);
            at = self.core.links.get(l.index())?.to;
            if path.len() > self.core.links.len() {
                return None;
            }
        }
        Some(path)
    }
}
