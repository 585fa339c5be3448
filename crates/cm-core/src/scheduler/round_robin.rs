//! Unweighted round robin: one grant per backlogged flow per round
//! (cm-implementation-linux §2, "a standard unweighted round-robin scheduler").

use std::collections::VecDeque;

use crate::scheduler::{Entry, Scheduler};
use crate::units::Bytes;

/// Round robin over backlogged flows.
#[derive(Clone, Debug, Default)]
pub struct RoundRobin {
    queue: VecDeque<Entry>,
}

impl Scheduler for RoundRobin {
    fn name(&self) -> &'static str {
        "round-robin"
    }

    fn push(&mut self, entry: Entry) {
        self.queue.push_back(entry);
    }

    fn select(&mut self, _mtu: Bytes, mut live: impl FnMut(Entry) -> Option<u32>) -> Option<Entry> {
        while let Some(&e) = self.queue.front() {
            if live(e).is_some() {
                return Some(e);
            }
            self.queue.pop_front();
        }
        None
    }

    fn served(&mut self, entry: Entry, _bytes: Bytes, backlogged: bool) {
        if self.queue.front() == Some(&entry) {
            self.queue.pop_front();
        }
        if backlogged {
            self.queue.push_back(entry);
        }
    }

    fn len(&self) -> usize {
        self.queue.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::id::FlowId;
    use crate::scheduler::test_util::shares;

    #[test]
    fn equal_shares_whatever_the_weights() {
        let mut s = RoundRobin::default();
        assert_eq!(shares(&mut s, &[1, 2, 4], 300), vec![100, 100, 100]);
    }

    #[test]
    fn stale_entries_are_skipped_and_dropped() {
        let mut s = RoundRobin::default();
        let a = Entry {
            flow: FlowId::from_raw(0, 0),
            epoch: 0,
        };
        let b = Entry {
            flow: FlowId::from_raw(1, 0),
            epoch: 0,
        };
        s.push(a);
        s.push(b);
        let got = s.select(Bytes(1), |e| (e != a).then_some(1));
        assert_eq!(got, Some(b));
        assert_eq!(s.len(), 1);
        s.served(b, Bytes(1), false);
        assert!(s.is_empty());
        assert_eq!(s.select(Bytes(1), |_| Some(1)), None);
    }
}
