//! The TCP receiver: cumulative ACKs, out-of-order buffering, delayed ACKs,
//! timestamp echo and SACK blocks (RFC 2018) when the SYN asks for them.

use std::collections::VecDeque;

use cm_core::{Duration, Instant};

use super::config::{TcpConfigError, TcpReceiverConfig};
use super::ranges::RangeSet;
use crate::segment::{Flags, MAX_SACK_BLOCKS, SackBlocks, TcpSegment};

/// Counters of a receiver.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TcpReceiverStats {
    /// Segments carrying data (or FIN) received.
    pub segments: u64,
    /// Segments entirely below `rcv_nxt` (already received).
    pub duplicates: u64,
    /// Segments above `rcv_nxt` (buffered out of order).
    pub out_of_order: u64,
    /// ACKs sent (including the SYN-ACK).
    pub acks_sent: u64,
}

/// A TCP receiver, sans-IO. The application reads data as soon as it is in
/// order, so the advertised window stays at the configured value.
#[derive(Clone, Debug)]
pub struct TcpReceiver {
    cfg: TcpReceiverConfig,
    established: bool,
    rcv_nxt: u64,
    /// Out-of-order ranges above `rcv_nxt`: start -> end.
    ooo: RangeSet,
    fin_seq: Option<u64>,
    fin_received: bool,
    ts_recent: u64,
    out: VecDeque<TcpSegment>,
    unacked: u32,
    delack_at: Option<Instant>,
    /// SACK negotiated: the SYN carried `SACK_OK` (RFC 2018 §2).
    sack: bool,
    /// RFC 2018 §4: one sequence number inside each block most recently
    /// reported, most recent first (the first is the block holding the
    /// latest out-of-order segment).
    sack_recent: Vec<u64>,
    /// The round trip as the receiver sees it (RFC 7323 §4.3 echoes: the
    /// time since the ACK whose TSval a data segment's TSecr returns),
    /// smoothed 7/8 as RFC 6298's SRTT; `last_ecr` is the echo last used.
    rcv_rtt: Option<Duration>,
    last_ecr: u64,
    stats: TcpReceiverStats,
}

impl TcpReceiver {
    /// A receiver waiting for a SYN.
    pub fn new(cfg: TcpReceiverConfig) -> Result<Self, TcpConfigError> {
        if cfg.rcv_wnd == 0 {
            return Err(TcpConfigError::ZeroWindow);
        }
        Ok(TcpReceiver {
            cfg,
            established: false,
            rcv_nxt: 0,
            ooo: RangeSet::default(),
            fin_seq: None,
            fin_received: false,
            ts_recent: 0,
            out: VecDeque::new(),
            unacked: 0,
            delack_at: None,
            sack: false,
            sack_recent: Vec::new(),
            rcv_rtt: None,
            last_ecr: 0,
            stats: TcpReceiverStats::default(),
        })
    }

    /// In-order data bytes delivered to the application.
    pub fn bytes_delivered(&self) -> u64 {
        if !self.established {
            return 0;
        }
        self.rcv_nxt - 1 - u64::from(self.fin_received)
    }

    /// Whether the sender's FIN arrived (in order).
    pub fn fin_received(&self) -> bool {
        self.fin_received
    }

    /// The round trip as the receiver measures it from timestamp echoes
    /// (like Linux's `tcp_rcv_rtt_measure_ts`): the time from an ACK to
    /// the first data segment echoing it, smoothed; `None` before the
    /// first echo. A driver can size its wake-ups
    /// by it, as a sender does by its own RTT.
    pub fn rtt_estimate(&self) -> Option<Duration> {
        self.rcv_rtt
    }

    /// Counters.
    pub fn stats(&self) -> TcpReceiverStats {
        self.stats
    }

    /// Whether the SYN asked for SACK (and the receiver sends SACK blocks).
    pub fn sack_enabled(&self) -> bool {
        self.sack
    }

    /// Out-of-order ranges currently buffered, `(start, end)` sequence numbers.
    pub fn buffered_ranges(&self) -> Vec<(u64, u64)> {
        self.ooo.iter().collect()
    }

    /// The next ACK (or SYN-ACK) to send.
    pub fn poll_transmit(&mut self, _now: Instant) -> Option<TcpSegment> {
        self.out.pop_front()
    }

    /// When the delayed-ACK timer fires.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.delack_at
    }

    /// The delayed-ACK timer may have expired.
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.delack_at.is_some_and(|t| t <= now) {
            self.ack_now(now);
        }
    }

    fn control(&self, now: Instant, flags: Flags) -> TcpSegment {
        TcpSegment {
            src_port: self.cfg.src_port,
            dst_port: self.cfg.dst_port,
            seq: 1,
            ack: self.rcv_nxt,
            flags,
            wnd: self.cfg.rcv_wnd,
            len: 0,
            ts_val: now.as_micros(),
            ts_ecr: self.ts_recent,
            sack: SackBlocks::NONE,
        }
    }

    /// The SACK blocks for the next ACK (RFC 2018 §4): the block holding
    /// the most recently received out-of-order segment first, then the
    /// other most recently reported blocks that still exist, then (if room
    /// is left) any other buffered ranges, lowest first. At most
    /// [`MAX_SACK_BLOCKS`] blocks; none once everything is in order.
    fn sack_blocks(&mut self) -> SackBlocks {
        let mut out = SackBlocks::NONE;
        if !self.sack || self.ooo.is_empty() {
            self.sack_recent.clear();
            return out;
        }
        let mut listed: Vec<(u64, u64)> = Vec::with_capacity(MAX_SACK_BLOCKS);
        for &seq in &self.sack_recent {
            if let Some(b) = self.ooo.containing(seq) {
                if b.0 < b.1 && !listed.contains(&b) {
                    listed.push(b);
                }
            }
        }
        for (s, e) in self.ooo.iter() {
            // (An out-of-order FIN is buffered as an empty range.)
            if s < e && !listed.contains(&(s, e)) {
                listed.push((s, e));
            }
        }
        listed.truncate(MAX_SACK_BLOCKS);
        self.sack_recent = listed.iter().map(|b| b.0).collect();
        for (s, e) in listed {
            out.push(s, e);
        }
        out
    }

    fn ack_now(&mut self, now: Instant) {
        let mut seg = self.control(now, Flags::ACK);
        seg.sack = self.sack_blocks();
        self.out.push_back(seg);
        self.stats.acks_sent += 1;
        self.unacked = 0;
        self.delack_at = None;
    }

    /// One receiver-side RTT sample per new echo of this receiver's TSval.
    fn measure_rtt(&mut self, now: Instant, ts_ecr: u64) {
        if ts_ecr == 0 || ts_ecr == self.last_ecr || ts_ecr > now.as_micros() {
            return;
        }
        self.last_ecr = ts_ecr;
        let sample = Duration::from_micros(now.as_micros() - ts_ecr);
        self.rcv_rtt = Some(match self.rcv_rtt {
            None => sample,
            Some(r) => Duration::from_micros((r.as_micros() * 7 + sample.as_micros()) / 8),
        });
    }

    /// Process a segment from the sender.
    pub fn handle_segment(&mut self, now: Instant, seg: &TcpSegment) {
        if seg.flags.contains(Flags::SYN) {
            if !self.established {
                self.established = true;
                self.rcv_nxt = seg.seq + 1;
                // RFC 2018 §2: SACK is used only if the SYN permits it.
                self.sack = seg.flags.contains(Flags::SACK_OK);
            }
            // Answer every (re)transmitted SYN.
            self.ts_recent = seg.ts_val;
            let flags = if self.sack {
                Flags::SYN | Flags::ACK | Flags::SACK_OK
            } else {
                Flags::SYN | Flags::ACK
            };
            let synack = self.control(now, flags);
            self.out.push_back(synack);
            self.stats.acks_sent += 1;
            return;
        }
        if !self.established {
            return;
        }
        let fin = seg.flags.contains(Flags::FIN);
        if seg.len == 0 && !fin {
            return;
        }
        self.stats.segments += 1;
        self.measure_rtt(now, seg.ts_ecr);
        let start = seg.seq;
        let end = seg.seq + u64::from(seg.len);
        if fin {
            self.fin_seq = Some(end);
        }
        let new_fin = fin && !self.fin_received;
        if end < self.rcv_nxt || (end == self.rcv_nxt && !new_fin) {
            // Entirely old: ACK at once so a lost ACK is repaired.
            self.stats.duplicates += 1;
            self.ack_now(now);
            return;
        }
        if start > self.rcv_nxt {
            // RFC 5681 §4.2: an immediate duplicate ACK for out-of-order data.
            self.stats.out_of_order += 1;
            self.ooo.insert(start, end);
            if self.sack {
                // RFC 2018 §4: the first block reports the segment that
                // triggered this ACK.
                self.sack_recent.insert(0, start);
            }
            self.ack_now(now);
            return;
        }
        let filled_gap = !self.ooo.is_empty();
        // RFC 7323 §4.3: TS.Recent from the segment that advances the edge.
        self.ts_recent = seg.ts_val;
        self.rcv_nxt = self.rcv_nxt.max(end);
        while let Some(e) = self.ooo.pop_reaching(self.rcv_nxt) {
            self.rcv_nxt = self.rcv_nxt.max(e);
        }
        let mut immediate = filled_gap;
        if !self.fin_received && self.fin_seq == Some(self.rcv_nxt) {
            self.fin_received = true;
            self.rcv_nxt += 1;
            immediate = true;
        }
        match self.cfg.delayed_ack {
            // RFC 5681 §4.2: ACK a segment that fills a gap at once.
            _ if immediate => self.ack_now(now),
            None => self.ack_now(now),
            // RFC 5681 §4.2: at least every second segment, within the delay.
            Some(d) => {
                self.unacked += 1;
                if self.unacked >= 2 {
                    self.ack_now(now);
                } else if self.delack_at.is_none() {
                    self.delack_at = Some(now + d);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(seq: u64, len: u32) -> TcpSegment {
        TcpSegment {
            seq,
            len,
            flags: Flags::ACK,
            ..Default::default()
        }
    }

    fn open(cfg: TcpReceiverConfig) -> TcpReceiver {
        let mut r = TcpReceiver::new(cfg).unwrap();
        let syn = TcpSegment {
            flags: Flags::SYN,
            ..Default::default()
        };
        r.handle_segment(Instant::ZERO, &syn);
        let sa = r.poll_transmit(Instant::ZERO).unwrap();
        assert!(sa.flags.contains(Flags::SYN | Flags::ACK));
        assert_eq!(sa.ack, 1);
        r
    }

    fn acks(r: &mut TcpReceiver) -> Vec<u64> {
        std::iter::from_fn(|| r.poll_transmit(Instant::ZERO))
            .map(|s| s.ack)
            .collect()
    }

    #[test]
    fn reorder_and_duplicates() {
        let mut r = open(TcpReceiverConfig::default());
        let t = Instant::ZERO;
        r.handle_segment(t, &data(1, 100));
        r.handle_segment(t, &data(201, 100)); // hole at 101
        r.handle_segment(t, &data(401, 100)); // hole at 301
        r.handle_segment(t, &data(201, 100)); // duplicate of buffered data
        assert_eq!(r.buffered_ranges(), vec![(201, 301), (401, 501)]);
        r.handle_segment(t, &data(101, 100));
        r.handle_segment(t, &data(1, 100)); // old duplicate
        r.handle_segment(t, &data(301, 100));
        assert_eq!(acks(&mut r), vec![101, 101, 101, 101, 301, 301, 501]);
        assert_eq!(r.bytes_delivered(), 500);
        assert!(r.buffered_ranges().is_empty());
        assert_eq!(r.stats().duplicates, 1);
        assert_eq!(r.stats().out_of_order, 3);
    }

    #[test]
    fn merges_overlapping_ranges() {
        let mut r = open(TcpReceiverConfig::default());
        let t = Instant::ZERO;
        r.handle_segment(t, &data(101, 100));
        r.handle_segment(t, &data(151, 100));
        r.handle_segment(t, &data(301, 50));
        r.handle_segment(t, &data(251, 50));
        assert_eq!(r.buffered_ranges(), vec![(101, 351)]);
    }

    #[test]
    fn fin_after_data_is_consumed_once() {
        let mut r = open(TcpReceiverConfig::default());
        let t = Instant::ZERO;
        let mut fin = data(101, 0);
        fin.flags = Flags::FIN | Flags::ACK;
        r.handle_segment(t, &fin); // out of order FIN
        assert!(!r.fin_received());
        r.handle_segment(t, &data(1, 100));
        assert!(r.fin_received());
        assert_eq!(r.bytes_delivered(), 100);
        assert_eq!(acks(&mut r), vec![1, 102]);
    }

    fn open_sack() -> TcpReceiver {
        let mut r = TcpReceiver::new(TcpReceiverConfig::default()).unwrap();
        let syn = TcpSegment {
            flags: Flags::SYN | Flags::SACK_OK,
            ..Default::default()
        };
        r.handle_segment(Instant::ZERO, &syn);
        let sa = r.poll_transmit(Instant::ZERO).unwrap();
        assert!(sa.flags.contains(Flags::SYN | Flags::ACK | Flags::SACK_OK));
        assert!(r.sack_enabled());
        r
    }

    fn sacks(r: &mut TcpReceiver) -> Vec<(u64, Vec<(u64, u64)>)> {
        std::iter::from_fn(|| r.poll_transmit(Instant::ZERO))
            .map(|s| (s.ack, s.sack.as_slice().to_vec()))
            .collect()
    }

    #[test]
    fn no_sack_blocks_unless_the_syn_asks() {
        let mut r = open(TcpReceiverConfig::default());
        assert!(!r.sack_enabled());
        r.handle_segment(Instant::ZERO, &data(201, 100));
        assert_eq!(sacks(&mut r), vec![(1, vec![])]);
    }

    /// RFC 2018 §4: the first block holds the segment that triggered the
    /// ACK, then the most recently reported blocks; adjacent data merges.
    #[test]
    fn sack_blocks_most_recent_first_and_merged() {
        let mut r = open_sack();
        let t = Instant::ZERO;
        r.handle_segment(t, &data(201, 100)); // hole 1..201
        r.handle_segment(t, &data(401, 100)); // hole 301..401
        r.handle_segment(t, &data(601, 100)); // hole 501..601
        r.handle_segment(t, &data(301, 100)); // merges with 401..501
        assert_eq!(
            sacks(&mut r),
            vec![
                (1, vec![(201, 301)]),
                (1, vec![(401, 501), (201, 301)]),
                (1, vec![(601, 701), (401, 501), (201, 301)]),
                (1, vec![(201, 501), (601, 701)]),
            ]
        );
        // A duplicate of buffered data moves its block to the front.
        r.handle_segment(t, &data(601, 100));
        assert_eq!(sacks(&mut r), vec![(1, vec![(601, 701), (201, 501)])]);
        // Filling the first hole: cumulative ACK moves, the rest is still
        // SACKed; filling the last: no blocks.
        r.handle_segment(t, &data(1, 200));
        assert_eq!(sacks(&mut r), vec![(501, vec![(601, 701)])]);
        r.handle_segment(t, &data(501, 100));
        assert_eq!(sacks(&mut r), vec![(701, vec![])]);
    }

    /// At most three blocks (RFC 2018 §3 with timestamps): the newest ones.
    #[test]
    fn sack_blocks_at_most_three_newest_first() {
        let mut r = open_sack();
        let t = Instant::ZERO;
        for k in 0..5 {
            r.handle_segment(t, &data(101 + 200 * k, 100));
        }
        let all = sacks(&mut r);
        let last = &all.last().unwrap().1;
        assert_eq!(last, &vec![(901, 1001), (701, 801), (501, 601)]);
        assert!(
            all.iter()
                .all(|(_, b)| b.len() <= crate::segment::MAX_SACK_BLOCKS)
        );
        // Blocks that were left out come back (in recency order) once
        // there is room.
        r.handle_segment(t, &data(1, 100));
        r.handle_segment(t, &data(201, 100));
        r.handle_segment(t, &data(401, 100));
        let all = sacks(&mut r);
        assert_eq!(all.last().unwrap(), &(601, vec![(901, 1001), (701, 801)]));
    }
}
