//! Flow schedulers: how a macroflow's window is apportioned among its flows
//! with pending requests (sigcomm1999 §4.6).
//!
//! A scheduler keeps the backlogged flows of one macroflow. Entries are
//! removed lazily: the macroflow hands [`Scheduler::select`] a closure that
//! says whether an entry is still live and what its weight is, so closing or
//! moving a flow costs O(1) and never scans a queue.

mod round_robin;
mod weighted;

pub use round_robin::RoundRobin;
pub use weighted::Weighted;

use crate::id::FlowId;
use crate::units::Bytes;

/// One backlogged flow in a scheduler queue: the flow and the scheduling
/// epoch it was queued in (a moved flow gets a new epoch, so its old entry
/// is recognised as stale).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    /// The flow.
    pub flow: FlowId,
    /// The flow's scheduling epoch when it was queued.
    pub epoch: u32,
}

/// Apportions grants among the backlogged flows of a macroflow.
pub trait Scheduler {
    /// Short name for `cm stat` and logs.
    fn name(&self) -> &'static str;
    /// A flow became backlogged. It must not already be queued.
    fn push(&mut self, entry: Entry);
    /// The flow to grant next. `live(entry)` returns the flow's weight, or
    /// `None` if the entry is stale (flow closed or moved): stale entries are
    /// dropped. `mtu` sizes weighted quanta.
    fn select(&mut self, mtu: Bytes, live: impl FnMut(Entry) -> Option<u32>) -> Option<Entry>;
    /// The entry returned by the last `select` was granted `bytes`;
    /// `backlogged` says whether it still has pending requests.
    fn served(&mut self, entry: Entry, bytes: Bytes, backlogged: bool);
    /// Queued entries, live or stale.
    fn len(&self) -> usize;
    /// Whether no entries are queued.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Which scheduler macroflows use.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum SchedulerKind {
    /// Unweighted round robin (the Linux implementation's scheduler,
    /// cm-implementation-linux §2).
    RoundRobin,
    /// Weighted, HRR-like (sigcomm1999 §4.6): deficit round robin with a
    /// quantum of `weight` MTUs, so shares converge to the weights.
    #[default]
    Weighted,
}

impl SchedulerKind {
    /// Build an empty scheduler of this kind.
    pub fn build(self) -> AnyScheduler {
        match self {
            SchedulerKind::RoundRobin => AnyScheduler::RoundRobin(RoundRobin::default()),
            SchedulerKind::Weighted => AnyScheduler::Weighted(Weighted::default()),
        }
    }
}

/// Static dispatch over the shipped schedulers.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum AnyScheduler {
    /// Round robin.
    RoundRobin(RoundRobin),
    /// Weighted deficit round robin.
    Weighted(Weighted),
}

macro_rules! dispatch {
    ($self:ident, $s:ident => $e:expr) => {
        match $self {
            AnyScheduler::RoundRobin($s) => $e,
            AnyScheduler::Weighted($s) => $e,
        }
    };
}

impl Scheduler for AnyScheduler {
    fn name(&self) -> &'static str {
        dispatch!(self, s => s.name())
    }
    fn push(&mut self, entry: Entry) {
        dispatch!(self, s => s.push(entry))
    }
    fn select(&mut self, mtu: Bytes, live: impl FnMut(Entry) -> Option<u32>) -> Option<Entry> {
        dispatch!(self, s => s.select(mtu, live))
    }
    fn served(&mut self, entry: Entry, bytes: Bytes, backlogged: bool) {
        dispatch!(self, s => s.served(entry, bytes, backlogged))
    }
    fn len(&self) -> usize {
        dispatch!(self, s => s.len())
    }
}

#[cfg(test)]
pub(crate) mod test_util {
    use super::*;
    use crate::id::FlowId;

    /// Run `grants` grants over always-backlogged flows with `weights`,
    /// returning how many each got.
    pub fn shares(s: &mut impl Scheduler, weights: &[u32], grants: usize) -> Vec<usize> {
        for i in 0..weights.len() {
            s.push(Entry {
                flow: FlowId::from_raw(i as u32, 0),
                epoch: 0,
            });
        }
        let mut got = vec![0; weights.len()];
        for _ in 0..grants {
            let e = s
                .select(Bytes(1000), |e| Some(weights[e.flow.index() as usize]))
                .expect("backlogged flows");
            got[e.flow.index() as usize] += 1;
            s.served(e, Bytes(1000), true);
        }
        got
    }
}
