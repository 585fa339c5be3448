//! The simulation loop: event dispatch, host callbacks with lazily re-armed
//! timers, and read-only views of links and flows. Link transmission and
//! forwarding are in [`crate::network`], which hosts reach through
//! [`Ctx`].

use std::any::Any;

use cm_core::{Duration, Instant};

use crate::error::{SendError, TopologyError};
use crate::event::Ev;
use crate::host::{Ctx, Host};
use crate::link::LinkStats;
use crate::network::Network;
use crate::packet::{FlowTag, LinkId, NodeId, Payload};
use crate::rng::SimRng;
use crate::stats::FlowStats;
use crate::topology::Topology;
use crate::trace::{TraceMode, TraceRecord};

/// Per-host timer bookkeeping.
#[derive(Clone, Copy, Debug, Default)]
struct TimerSlot {
    generation: u32,
    armed: Option<Instant>,
}

/// A deterministic discrete-event network simulation over payload type `P`.
pub struct Sim<P: Payload> {
    core: Network<P>,
    hosts: Vec<Option<Box<dyn Host<P>>>>,
    timers: Vec<TimerSlot>,
    events_processed: u64,
}

impl<P: Payload> Sim<P> {
    /// A simulation of `topology` at time zero, with the RNG seeded by `seed`.
    /// Fails if some host cannot reach another.
    pub fn new(topology: Topology, seed: u64) -> Result<Self, TopologyError> {
        let core = Network::new(topology, seed)?;
        let n = core.kinds.len();
        Ok(Sim {
            core,
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
        self.core.require_host(node)?;
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
        self.core.tracer.set_mode(mode);
    }

    /// Takes the records collected under [`TraceMode::Collect`].
    pub fn take_trace(&mut self) -> Vec<TraceRecord> {
        self.core.tracer.take()
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
        self.core.require_host(src)?;
        self.core.send(src, dst, flow, payload)
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
            Ev::Arrive(l) | Ev::ArriveHeld(l) => {
                let held = matches!(ev, Ev::ArriveHeld(_));
                if let Some((node, pkt)) = self.core.arrive(l, held) {
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
