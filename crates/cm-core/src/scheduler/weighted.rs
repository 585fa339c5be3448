//! Weighted scheduling, HRR-like (sigcomm1999 §4.6 uses Hierarchical Round
//! Robin with preconfigured weights). This is deficit round robin
//! (Shreedhar & Varghese, SIGCOMM 1995): each visit adds `weight * MTU` bytes
//! of credit and the flow is served while its credit is positive, so over
//! any long run a backlogged flow's bytes are proportional to its weight,
//! with O(1) work per grant. Credit may go negative after a large (k-MTU)
//! grant; the debt is repaid on later visits.

use std::collections::VecDeque;

use crate::scheduler::{Entry, Scheduler};
use crate::units::Bytes;

#[derive(Clone, Copy, Debug)]
struct Slot {
    entry: Entry,
    deficit: i64,
}

/// Deficit round robin over backlogged flows.
#[derive(Clone, Debug, Default)]
pub struct Weighted {
    queue: VecDeque<Slot>,
}

impl Scheduler for Weighted {
    fn name(&self) -> &'static str {
        "weighted"
    }

    fn push(&mut self, entry: Entry) {
        self.queue.push_back(Slot { entry, deficit: 0 });
    }

    fn select(&mut self, mtu: Bytes, mut live: impl FnMut(Entry) -> Option<u32>) -> Option<Entry> {
        let quantum_unit = i64::try_from(mtu.0.max(1)).unwrap_or(i64::MAX);
        // Each pass either returns, drops a stale entry, or credits one; a
        // live entry reaches positive credit after finitely many visits.
        while let Some(front) = self.queue.front_mut() {
            let Some(weight) = live(front.entry) else {
                self.queue.pop_front();
                continue;
            };
            if front.deficit > 0 {
                return Some(front.entry);
            }
            let quantum = quantum_unit.saturating_mul(i64::from(weight.max(1)));
            front.deficit = front.deficit.saturating_add(quantum);
            if front.deficit > 0 {
                return Some(front.entry);
            }
            if let Some(s) = self.queue.pop_front() {
                self.queue.push_back(s);
            }
        }
        None
    }

    fn served(&mut self, entry: Entry, bytes: Bytes, backlogged: bool) {
        let Some(front) = self.queue.front_mut() else {
            return;
        };
        if front.entry != entry {
            return;
        }
        let charge = i64::try_from(bytes.0).unwrap_or(i64::MAX);
        front.deficit = front.deficit.saturating_sub(charge);
        if !backlogged {
            // DRR: a flow that empties its queue forfeits its credit.
            self.queue.pop_front();
        } else if front.deficit <= 0 {
            // Its turn is over: to the back of the round.
            if let Some(s) = self.queue.pop_front() {
                self.queue.push_back(s);
            }
        }
    }

    fn len(&self) -> usize {
        self.queue.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduler::test_util::shares;

    #[test]
    fn shares_follow_weights() {
        // sigcomm1999 §4.6 / Fig 13: bandwidth in proportion to weights.
        let mut s = Weighted::default();
        assert_eq!(shares(&mut s, &[1, 2, 4], 700), vec![100, 200, 400]);
    }

    #[test]
    fn equal_weights_are_round_robin() {
        let mut s = Weighted::default();
        assert_eq!(shares(&mut s, &[1, 1, 1, 1], 400), vec![100; 4]);
    }

    #[test]
    fn large_grant_is_repaid_later() {
        let mut s = Weighted::default();
        let a = Entry {
            flow: crate::id::FlowId::from_raw(0, 0),
            epoch: 0,
        };
        let b = Entry {
            flow: crate::id::FlowId::from_raw(1, 0),
            epoch: 0,
        };
        s.push(a);
        s.push(b);
        // a takes a 4-MTU grant, then b must get 4 MTUs before a again.
        let e = s.select(Bytes(1000), |_| Some(1)).unwrap();
        assert_eq!(e, a);
        s.served(a, Bytes(4000), true);
        let mut order = Vec::new();
        for _ in 0..5 {
            let e = s.select(Bytes(1000), |_| Some(1)).unwrap();
            order.push(e.flow.index());
            s.served(e, Bytes(1000), true);
        }
        assert_eq!(order, vec![1, 1, 1, 1, 0]);
    }
}
