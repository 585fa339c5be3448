//! The host interface: user-supplied endpoints and the context they send through.

use std::any::Any;

use cm_core::Instant;

use crate::error::SendError;
use crate::network::Network;
use crate::packet::{FlowTag, NodeId, Packet, Payload};
use crate::rng::SimRng;

/// An end host (a transport plus application) driven by the engine.
///
/// After every callback the engine polls [`next_timer`](Host::next_timer)
/// and re-arms the host's single timer if the answer changed; stale timer
/// events are skipped by generation number. A host whose `next_timer` stays
/// at or before `now` after `on_timer` is called again at the same instant,
/// so it must advance or clear its timer when handling it.
pub trait Host<P: Payload> {
    /// Called once, at the time the host is attached (default: nothing).
    fn start(&mut self, now: Instant, ctx: &mut Ctx<'_, P>) {
        let _ = (now, ctx);
    }
    /// A packet addressed to this host arrived.
    fn on_packet(&mut self, now: Instant, pkt: Packet<P>, ctx: &mut Ctx<'_, P>);
    /// The timer this host asked for (via `next_timer`) fired.
    fn on_timer(&mut self, now: Instant, ctx: &mut Ctx<'_, P>);
    /// When this host next wants `on_timer` (polled after every callback).
    fn next_timer(&self) -> Option<Instant>;
    /// Downcasting for results collection.
    fn as_any(&self) -> &dyn Any;
}

/// What a host may do during a callback.
pub struct Ctx<'a, P: Payload> {
    pub(crate) core: &'a mut Network<P>,
    pub(crate) node: NodeId,
}

impl<P: Payload> Ctx<'_, P> {
    /// Current simulated time.
    pub fn now(&self) -> Instant {
        self.core.now
    }

    /// The node this host runs on.
    pub fn node(&self) -> NodeId {
        self.node
    }

    /// The simulation's seeded RNG (for random workloads).
    pub fn rng(&mut self) -> &mut SimRng {
        &mut self.core.rng
    }

    /// Sends `payload` to host `dst`: stamps a fresh packet id and `sent_at =
    /// now`, and enqueues it on this host's outgoing link towards `dst`.
    /// Returns the packet id. A full queue is not an error: the packet is
    /// counted as dropped (DropTail), as a real NIC would.
    pub fn send(&mut self, dst: NodeId, flow: FlowTag, payload: P) -> Result<u64, SendError> {
        self.core.send(self.node, dst, flow, payload)
    }

    /// Packets waiting on this host's outgoing link towards `dst` (not
    /// counting the one being serialized), if there is a route.
    pub fn queue_len_towards(&self, dst: NodeId) -> Option<usize> {
        let l = self.core.routes.next_hop(self.node, dst)?;
        self.core.links.get(l.index()).map(|l| l.queue.len())
    }
}
