//! The TCP receiver: cumulative ACKs, out-of-order buffering, delayed ACKs
//! and timestamp echo.

use std::collections::{BTreeMap, VecDeque};

use cm_core::Instant;

use super::config::{TcpConfigError, TcpReceiverConfig};
use crate::segment::{Flags, TcpSegment};

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
    ooo: BTreeMap<u64, u64>,
    fin_seq: Option<u64>,
    fin_received: bool,
    ts_recent: u64,
    out: VecDeque<TcpSegment>,
    unacked: u32,
    delack_at: Option<Instant>,
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
            ooo: BTreeMap::new(),
            fin_seq: None,
            fin_received: false,
            ts_recent: 0,
            out: VecDeque::new(),
            unacked: 0,
            delack_at: None,
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

    /// Counters.
    pub fn stats(&self) -> TcpReceiverStats {
        self.stats
    }

    /// Out-of-order ranges currently buffered, `(start, end)` sequence numbers.
    pub fn buffered_ranges(&self) -> Vec<(u64, u64)> {
        self.ooo.iter().map(|(&s, &e)| (s, e)).collect()
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
        }
    }

    fn ack_now(&mut self, now: Instant) {
        let seg = self.control(now, Flags::ACK);
        self.out.push_back(seg);
        self.stats.acks_sent += 1;
        self.unacked = 0;
        self.delack_at = None;
    }

    /// Process a segment from the sender.
    pub fn handle_segment(&mut self, now: Instant, seg: &TcpSegment) {
        if seg.flags.contains(Flags::SYN) {
            if !self.established {
                self.established = true;
                self.rcv_nxt = seg.seq + 1;
            }
            // Answer every (re)transmitted SYN.
            self.ts_recent = seg.ts_val;
            let synack = self.control(now, Flags::SYN | Flags::ACK);
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
            self.insert_ooo(start, end);
            self.ack_now(now);
            return;
        }
        let filled_gap = !self.ooo.is_empty();
        // RFC 7323 §4.3: TS.Recent from the segment that advances the edge.
        self.ts_recent = seg.ts_val;
        self.rcv_nxt = self.rcv_nxt.max(end);
        while let Some((&s, &e)) = self.ooo.iter().next() {
            if s > self.rcv_nxt {
                break;
            }
            self.ooo.remove(&s);
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

    fn insert_ooo(&mut self, mut start: u64, mut end: u64) {
        // Merge with every overlapping or adjacent range.
        let overlapping: Vec<(u64, u64)> = self
            .ooo
            .range(..=end)
            .filter(|&(_, &e)| e >= start)
            .map(|(&s, &e)| (s, e))
            .collect();
        for (s, e) in overlapping {
            self.ooo.remove(&s);
            start = start.min(s);
            end = end.max(e);
        }
        self.ooo.insert(start, end);
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
}
