//! Which frames arrived, in bounded memory: a ring of the last [`WINDOW`]
//! sequence numbers below the highest one seen, so duplicates are told
//! apart in constant time and space however long the session runs or
//! however far a hostile datagram jumps ahead.

/// Sequence numbers remembered below the highest (82 s of 20 ms frames).
pub const WINDOW: u64 = 4096;

/// What an arriving sequence number is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Seen {
    /// Not seen before.
    New,
    /// Seen before.
    Duplicate,
    /// More than [`WINDOW`] below the highest: too old to tell apart from
    /// a duplicate, and too late to play.
    TooOld,
}

/// The sequence numbers that arrived.
#[derive(Clone, Debug)]
pub struct SeenSet {
    /// Slot `seq % WINDOW` holds `seq` once it arrived.
    ring: Vec<Option<u64>>,
    highest: Option<u64>,
}

impl Default for SeenSet {
    fn default() -> Self {
        SeenSet {
            ring: vec![None; WINDOW as usize],
            highest: None,
        }
    }
}

impl SeenSet {
    /// Record `seq`.
    pub fn insert(&mut self, seq: u64) -> Seen {
        if let Some(h) = self.highest {
            if seq < h && h - seq >= WINDOW {
                return Seen::TooOld;
            }
        }
        // Within the window, two numbers never share a slot, so the slot
        // holds `seq` exactly when it arrived before.
        let slot = &mut self.ring[(seq % WINDOW) as usize];
        if *slot == Some(seq) {
            return Seen::Duplicate;
        }
        *slot = Some(seq);
        self.highest = Some(self.highest.map_or(seq, |h| h.max(seq)));
        Seen::New
    }

    /// The highest sequence number that arrived.
    pub fn highest(&self) -> Option<u64> {
        self.highest
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_duplicate_and_too_old() {
        let mut s = SeenSet::default();
        assert_eq!(s.highest(), None);
        assert_eq!(s.insert(5), Seen::New);
        assert_eq!(s.insert(5), Seen::Duplicate);
        assert_eq!(s.insert(3), Seen::New);
        assert_eq!(s.insert(3), Seen::Duplicate);
        assert_eq!(s.highest(), Some(5));
        // A jump ahead moves the window to [5, far]: 5 and 6 are inside,
        // 4 is not.
        let far = 5 + WINDOW - 1;
        assert_eq!(s.insert(far), Seen::New);
        assert_eq!(s.insert(5), Seen::Duplicate);
        assert_eq!(s.insert(6), Seen::New);
        assert_eq!(s.insert(4), Seen::TooOld);
        // The slot 5 shares with 5 + WINDOW does not confuse them.
        assert_eq!(s.insert(5 + WINDOW), Seen::New);
        assert_eq!(s.insert(5 + WINDOW), Seen::Duplicate);
        assert_eq!(s.insert(u64::MAX), Seen::New);
        assert_eq!(s.insert(u64::MAX), Seen::Duplicate);
        assert_eq!(s.insert(5), Seen::TooOld);
    }

    /// Against a set that remembers everything, on random arrivals inside
    /// the window: the same verdict every time.
    #[test]
    fn agrees_with_a_full_set_inside_the_window() {
        let mut s = SeenSet::default();
        let mut all = std::collections::HashSet::new();
        let mut x: u64 = 0x2545_F491_4F6C_DD1D;
        let mut base = 0u64;
        for _ in 0..200_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            base += x % 3;
            let seq = base + x % (WINDOW / 2);
            let want = if all.insert(seq) {
                Seen::New
            } else {
                Seen::Duplicate
            };
            let h = s.highest().unwrap_or(0);
            if seq < h && h - seq >= WINDOW {
                assert_eq!(s.insert(seq), Seen::TooOld);
            } else {
                assert_eq!(s.insert(seq), want, "seq {seq}");
            }
        }
    }
}
