//! The event queue: a binary min-heap ordered by (time, insertion sequence),
//! so events at equal times run in the order they were scheduled.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use cm_core::Instant;

/// What an event does (small and `Copy`; packets live in link FIFOs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ev {
    /// Link `0` finished serializing its current packet.
    TxDone(u32),
    /// The head of link `0`'s propagation FIFO reaches the far end.
    Arrive(u32),
    /// The head of link `0`'s held-back (reordered) FIFO reaches the far end.
    ArriveHeld(u32),
    /// Host timer; stale unless `generation` matches the host's current generation.
    Timer {
        /// Host node index.
        host: u32,
        /// Generation at scheduling time.
        generation: u32,
    },
    /// Call the host's `start` hook.
    Start(u32),
}

#[derive(Clone, Copy, Debug)]
struct Entry {
    time: u64,
    seq: u64,
    ev: Ev,
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        (self.time, self.seq) == (other.time, other.seq)
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Entry {
    /// Reversed, so that `BinaryHeap` (a max-heap) pops the earliest.
    fn cmp(&self, other: &Self) -> Ordering {
        (other.time, other.seq).cmp(&(self.time, self.seq))
    }
}

/// Pending events.
#[derive(Debug, Default)]
pub(crate) struct EventQueue {
    heap: BinaryHeap<Entry>,
    seq: u64,
}

impl EventQueue {
    /// Schedules `ev` at `time`, after every event already scheduled there.
    #[inline]
    pub(crate) fn push(&mut self, time: Instant, ev: Ev) {
        self.seq += 1;
        self.heap.push(Entry {
            time: time.as_micros(),
            seq: self.seq,
            ev,
        });
    }

    /// Time of the earliest event.
    #[inline]
    pub(crate) fn peek_time(&self) -> Option<Instant> {
        self.heap.peek().map(|e| Instant::from_micros(e.time))
    }

    /// Removes the earliest event.
    #[inline]
    pub(crate) fn pop(&mut self) -> Option<(Instant, Ev)> {
        self.heap
            .pop()
            .map(|e| (Instant::from_micros(e.time), e.ev))
    }

    /// Number of pending events (stale timers included).
    pub(crate) fn len(&self) -> usize {
        self.heap.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ties_pop_in_insertion_order() {
        let mut q = EventQueue::default();
        let t = Instant::from_micros(5);
        q.push(Instant::from_micros(9), Ev::Start(99));
        for i in 0..100 {
            q.push(t, Ev::Start(i));
        }
        q.push(Instant::from_micros(1), Ev::Start(1000));
        assert_eq!(q.pop(), Some((Instant::from_micros(1), Ev::Start(1000))));
        for i in 0..100 {
            assert_eq!(q.pop(), Some((t, Ev::Start(i))));
        }
        assert_eq!(q.pop(), Some((Instant::from_micros(9), Ev::Start(99))));
        assert_eq!(q.pop(), None);
    }
}
