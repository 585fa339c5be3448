//! The SACK sender's scoreboard (RFC 6675 §3, §4): which bytes above the
//! cumulative ACK the receiver has selectively acknowledged, and the
//! queries RFC 6675 builds on it (`IsLost`, `SetPipe`, `NextSeg`).
//!
//! Byte ranges, not segments: the scoreboard keeps the merged SACKed ranges
//! above SND.UNA. The un-SACKed stretches between them ("gaps") are where
//! holes are; every byte of one gap has the same SACKed data above it, so
//! `IsLost` is decided per gap and `SetPipe` is a walk over the ranges.

use super::ranges::RangeSet;

/// RFC 6675 §2 DupThresh (RFC 5681's three duplicate ACKs).
pub(crate) const DUP_THRESH: u64 = 3;

/// Merged SACKed byte ranges `[start, end)` above the cumulative ACK.
#[derive(Clone, Debug, Default)]
pub(crate) struct Scoreboard {
    ranges: RangeSet,
}

/// One un-SACKed stretch `[start, end)` below the highest sent byte and
/// what is SACKed above it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Gap {
    pub start: u64,
    pub end: u64,
    /// SACKed bytes above `end`.
    pub sacked_above: u64,
    /// SACKed "segments" above `end`: each range counts
    /// `ceil(len / SMSS)`, a byte-range stand-in for RFC 6675's count of
    /// discontiguous SACKed segments.
    pub segments_above: u64,
}

impl Gap {
    /// RFC 6675 §4 `IsLost(SeqNum)` for every byte of the gap: DupThresh
    /// SACKed segments above it, or more than (DupThresh - 1) * SMSS SACKed
    /// bytes above it.
    pub(crate) fn is_lost(&self, mss: u64) -> bool {
        self.segments_above >= DUP_THRESH || self.sacked_above > (DUP_THRESH - 1) * mss
    }
}

impl Scoreboard {
    /// RFC 6675 §4 `Update()`: record a SACK block, ignoring what lies at or
    /// below `una` or at or above `max` (data never sent). Returns the bytes
    /// newly SACKed.
    pub(crate) fn insert(&mut self, una: u64, max: u64, start: u64, end: u64) -> u64 {
        let (start, end) = (start.max(una), end.min(max));
        if start >= end {
            return 0;
        }
        self.ranges.insert(start, end)
    }

    /// The cumulative ACK moved to `una`: forget what lies below it.
    pub(crate) fn advance(&mut self, una: u64) {
        self.ranges.trim_below(una);
    }

    /// SACKed bytes above the cumulative ACK.
    pub(crate) fn sacked_bytes(&self) -> u64 {
        self.ranges.bytes()
    }

    /// One past the highest SACKed byte (RFC 6675's HighSACK + 1), if any.
    pub(crate) fn high_sacked(&self) -> Option<u64> {
        self.ranges.high()
    }

    /// Whether `seq` is SACKed.
    #[cfg(test)]
    pub(crate) fn contains(&self, seq: u64) -> bool {
        self.ranges.containing(seq).is_some()
    }

    /// The ranges, ascending.
    pub(crate) fn ranges(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.ranges.iter()
    }

    /// The un-SACKed gaps in `[una, max)`, ascending.
    pub(crate) fn gaps(&self, una: u64, max: u64, mss: u64) -> Vec<Gap> {
        let mut out = Vec::new();
        let mut at = una;
        for (s, e) in self.ranges.iter() {
            if s > at && at < max {
                out.push(Gap {
                    start: at,
                    end: s.min(max),
                    sacked_above: 0,
                    segments_above: 0,
                });
            }
            at = at.max(e);
        }
        if at < max {
            out.push(Gap {
                start: at,
                end: max,
                sacked_above: 0,
                segments_above: 0,
            });
        }
        // Fill in what is SACKed above each gap, from the top down.
        let mut ranges = self.ranges.iter().rev().peekable();
        let (mut bytes, mut segs) = (0u64, 0u64);
        for g in out.iter_mut().rev() {
            while let Some(&(s, e)) = ranges.peek() {
                if s < g.end {
                    break;
                }
                bytes += e - s;
                segs += (e - s).div_ceil(mss.max(1));
                ranges.next();
            }
            g.sacked_above = bytes;
            g.segments_above = segs;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_merges_and_counts_new_bytes() {
        let mut sb = Scoreboard::default();
        assert_eq!(sb.insert(1, 10_000, 101, 201), 100);
        assert_eq!(sb.insert(1, 10_000, 301, 401), 100);
        assert_eq!(sb.insert(1, 10_000, 151, 351), 100); // bridges both
        assert_eq!(sb.ranges().collect::<Vec<_>>(), vec![(101, 401)]);
        assert_eq!(sb.insert(1, 10_000, 101, 401), 0); // nothing new
        // Clipped to (una, max).
        assert_eq!(sb.insert(501, 600, 1, 700), 99);
        assert_eq!(sb.sacked_bytes(), 399);
        assert_eq!(sb.high_sacked(), Some(600));
        assert!(sb.contains(101) && sb.contains(400) && !sb.contains(401));
    }

    #[test]
    fn advance_trims_and_drops() {
        let mut sb = Scoreboard::default();
        sb.insert(1, 10_000, 101, 201);
        sb.insert(1, 10_000, 301, 401);
        sb.advance(151);
        assert_eq!(
            sb.ranges().collect::<Vec<_>>(),
            vec![(151, 201), (301, 401)]
        );
        assert_eq!(sb.sacked_bytes(), 150);
        sb.advance(401);
        assert_eq!(sb.sacked_bytes(), 0);
        assert_eq!(sb.high_sacked(), None);
    }

    #[test]
    fn gaps_and_is_lost() {
        let mss = 100;
        let mut sb = Scoreboard::default();
        // Holes at [1,101), [201,301), [601,701); SACKed 101-201, 301-601, 701-801.
        sb.insert(1, 2001, 101, 201);
        sb.insert(1, 2001, 301, 601);
        sb.insert(1, 2001, 701, 801);
        let g = sb.gaps(1, 1001, mss);
        assert_eq!(
            g.iter().map(|g| (g.start, g.end)).collect::<Vec<_>>(),
            vec![(1, 101), (201, 301), (601, 701), (801, 1001)]
        );
        assert_eq!(
            g.iter()
                .map(|g| (g.sacked_above, g.segments_above))
                .collect::<Vec<_>>(),
            vec![(500, 5), (400, 4), (100, 1), (0, 0)]
        );
        // 3 SACKed segments above => lost; one => not.
        assert!(g[0].is_lost(mss) && g[1].is_lost(mss));
        assert!(!g[2].is_lost(mss) && !g[3].is_lost(mss));
        // Three small SACKed segments count as DupThresh segments.
        let mut sb = Scoreboard::default();
        for k in 0..3 {
            sb.insert(1, 2001, 101 + 20 * k, 111 + 20 * k);
        }
        let g = sb.gaps(1, 161, mss);
        assert!(g[0].is_lost(mss));
        assert_eq!(g[0].sacked_above, 30);
        assert!(!g[1].is_lost(mss));
    }
}
