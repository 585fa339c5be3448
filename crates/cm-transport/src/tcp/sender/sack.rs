//! SACK loss recovery (RFC 6675): the scoreboard's gaps, SetPipe,
//! NextSeg, entering recovery, recovery after a timeout (§5.1), and what
//! TCP/CM reports to the CM while SACK recovery runs.

use cm_core::Instant;

use super::TcpSender;
use crate::segment::{Flags, TcpSegment};
use crate::tcp::scoreboard::{DUP_THRESH, Gap};

/// Which NextSeg rule (RFC 6675 §4) picked a segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum NextSeg {
    /// Rule (1): a lost hole.
    Lost,
    /// Rule (2): new data.
    New,
    /// Rule (3): an un-SACKed hole not yet deemed lost.
    Rexmit,
    /// Rule (4): the rescue retransmission.
    Rescue,
}

impl TcpSender {
    /// Whether the RFC 6675 machinery picks what to send: SACK is on and
    /// a fast recovery or a post-timeout recovery is in progress.
    pub(super) fn sack_recovering(&self) -> bool {
        self.sack && (self.in_recovery || self.rto_recovery)
    }

    /// The un-SACKed gaps in `[snd_una, snd_max)`, split at `recover`
    /// after a timeout (everything below it is lost, RFC 6675 §5.1).
    pub(super) fn gaps(&self) -> Vec<Gap> {
        let mut gaps = self.sb.gaps(self.snd_una, self.snd_max, self.mss);
        if self.rto_recovery {
            if let Some(i) = gaps
                .iter()
                .position(|g| g.start < self.recover && g.end > self.recover)
            {
                let upper = Gap {
                    start: self.recover,
                    ..gaps[i]
                };
                gaps[i].end = self.recover;
                gaps.insert(i + 1, upper);
            }
        }
        gaps
    }

    /// RFC 6675 §4 IsLost for a gap; after a timeout also everything below
    /// `recover` (§5.1).
    pub(super) fn gap_lost(&self, g: &Gap) -> bool {
        (self.rto_recovery && g.start < self.recover) || g.is_lost(self.mss)
    }

    /// RFC 6675 §4 SetPipe(): per un-SACKed byte in flight, one if it is
    /// not lost, plus one if it was retransmitted (is below HighRxt).
    pub(super) fn pipe(&self, gaps: &[Gap]) -> u64 {
        let high_rxt = self.high_rxt.max(self.snd_una);
        gaps.iter()
            .map(|g| {
                let not_lost = if self.gap_lost(g) { 0 } else { g.end - g.start };
                let rexmitted = high_rxt.min(g.end).saturating_sub(g.start);
                not_lost + rexmitted
            })
            .sum()
    }

    /// RFC 6675 §4 NextSeg(), for up to `limit` bytes: `(seq, len, kind)`.
    pub(super) fn next_seg(&self, limit: u64, gaps: &[Gap]) -> Option<(u64, u64, NextSeg)> {
        let high_rxt = self.high_rxt.max(self.snd_una);
        let high_sacked = self.sb.high_sacked().unwrap_or(0);
        // (1) the smallest un-SACKed S2 > HighRxt below the highest SACKed
        // byte with IsLost(S2); after a timeout every hole below `recover`.
        for g in gaps.iter().filter(|g| g.end > high_rxt) {
            let s2 = g.start.max(high_rxt);
            let below = s2 < high_sacked || (self.rto_recovery && s2 < self.recover);
            if below && self.gap_lost(g) {
                return Some((s2, limit.min(g.end - s2), NextSeg::Lost));
            }
        }
        // (2) new data the receiver window allows.
        if let Some((len, false)) = self.next_len(limit) {
            return Some((self.snd_nxt, len, NextSeg::New));
        }
        if !self.in_recovery {
            return None;
        }
        // (3) the smallest un-SACKed S3 > HighRxt below the highest SACKed
        // byte, lost or not.
        for g in gaps.iter().filter(|g| g.end > high_rxt) {
            let s3 = g.start.max(high_rxt);
            if s3 < high_sacked {
                return Some((s3, limit.min(g.end - s3), NextSeg::Rexmit));
            }
        }
        // (4) one rescue retransmission per recovery, of the highest
        // outstanding un-SACKed byte, once HighACK passed RescueRxt.
        if self.rescue_rxt.is_none_or(|r| self.snd_una >= r) {
            if let Some(g) = gaps.last() {
                let start = g.end.saturating_sub(limit).max(g.start);
                return Some((start, g.end - start, NextSeg::Rescue));
            }
        }
        None
    }

    /// Send what NextSeg picks (SACK recovery).
    pub(super) fn sack_segment(
        &mut self,
        now: Instant,
        limit: u64,
        gaps: &[Gap],
    ) -> Option<TcpSegment> {
        let (seq, len, kind) = self.next_seg(limit, gaps)?;
        match kind {
            NextSeg::New => return self.data_segment(now, limit, None),
            // Rules (1) and (3) advance HighRxt.
            NextSeg::Lost | NextSeg::Rexmit => self.high_rxt = self.high_rxt.max(seq + len),
            // Rule (4): RescueRxt = RecoveryPoint, HighRxt unchanged.
            NextSeg::Rescue => self.rescue_rxt = Some(self.recover),
        }
        self.ledger.on_send(seq, seq + len, now, true);
        self.stats.retransmits += 1;
        self.stats.segments_sent += 1;
        self.arm(now);
        Some(self.segment(now, seq, len, Flags::ACK))
    }

    /// An ACK on a SACK connection: RFC 6675 §5 (scoreboard update,
    /// DupAcks, entering loss recovery) around the cumulative-ACK handling.
    pub(super) fn on_sack_ack(&mut self, now: Instant, ack: u64, seg: &TcpSegment, old_rwnd: u64) {
        // RFC 6675 §4 Update(): record the blocks (above the new cumulative
        // ACK, below what was sent).
        let una = ack.max(self.snd_una);
        let newly_sacked: u64 = seg
            .sack
            .as_slice()
            .iter()
            .map(|&(s, e)| self.sb.insert(una, self.snd_max, s, e))
            .sum();
        let was_recovering = self.sack_recovering();
        if ack > self.snd_una {
            self.on_new_ack(now, ack, seg);
        }
        // RFC 6675 §2 "duplicate acknowledgment": no data, and SACK
        // information that marks new octets between HighACK and HighData
        // (regardless of whether the ACK is also cumulative, §5).
        if newly_sacked > 0 && seg.len == 0 && self.snd_max > self.snd_una {
            self.stats.dupacks += 1;
            if !self.in_recovery && self.rwnd == old_rwnd {
                self.dupacks += 1;
                // RFC 6675 §5 steps (1), (2): DupThresh duplicate ACKs, or
                // IsLost(HighACK + 1). Not before a timeout's RecoveryPoint
                // is acknowledged (§5.1).
                let head_lost = self
                    .gaps()
                    .first()
                    .is_some_and(|g| g.start == self.snd_una && g.is_lost(self.mss));
                if (u64::from(self.dupacks) >= DUP_THRESH || head_lost)
                    && self.snd_una >= self.recover
                    && !self.rto_recovery
                {
                    self.enter_sack_recovery();
                    return;
                }
            }
        }
        if was_recovering || self.sack_recovering() {
            self.report_sack_progress();
        }
    }

    /// RFC 6675 §5 step (4): enter loss recovery.
    pub(super) fn enter_sack_recovery(&mut self) {
        self.in_recovery = true;
        // (4.1) RecoveryPoint = HighData.
        self.recover = self.snd_max;
        self.stats.fast_retransmits += 1;
        // (4.2) ssthresh = cwnd = FlightSize / 2 (or per the SsthreshRule).
        let at = self.loss_state();
        if let Some(cc) = self.cc.as_mut() {
            cc.on_enter_sack_recovery(at);
        }
        // (4.3) retransmit HighACK + 1 (sets HighRxt and RescueRxt when
        // sent); (4.4)-(4.5) happen in `poll_transmit` / `on_grant`.
        self.high_rxt = self.snd_una;
        self.rescue_rxt = None;
        self.rexmit = Some(self.fast_retransmission());
        if self.cm.is_some() {
            // cm-implementation-linux §3.2, "dup acks == 3": one congestion
            // loss per episode. Lost: what IsLost marks (at least the first
            // segment, when DupAcks alone triggered recovery); arrived: the
            // SACKed bytes not yet reported, after the loss as without SACK.
            let (lost_to, lost) = self.lost_below(self.snd_una);
            let (lost_to, lost) = if lost == 0 {
                let first = self
                    .gaps()
                    .first()
                    .map_or(0, |g| (g.end - g.start).min(self.mss));
                (self.snd_una + first, first)
            } else {
                (lost_to, lost)
            };
            self.cm_lost_to = lost_to;
            let sacked = self.unreported_sacked();
            if let Some(cm) = self.cm.as_mut() {
                cm.on_third_dupack(lost, sacked);
            }
        }
    }

    /// Un-SACKed bytes at or above `from` in lost gaps, and the end of the
    /// highest lost gap.
    pub(super) fn lost_below(&self, from: u64) -> (u64, u64) {
        let mut top = from;
        let mut bytes = 0;
        for g in self.gaps().iter().filter(|g| self.gap_lost(g)) {
            let s = g.start.max(from);
            if g.end > s {
                bytes += g.end - s;
                top = top.max(g.end);
            }
        }
        (top, bytes)
    }

    /// TCP/CM: SACKed bytes not yet reported to the CM; marks them reported.
    pub(super) fn unreported_sacked(&mut self) -> u64 {
        self.cm_sacked.advance(self.snd_una);
        // `cm_sacked` is always a snapshot of `sb`, which only grows above
        // SND.UNA, so the difference of the totals is the new bytes.
        let n = self
            .sb
            .sacked_bytes()
            .saturating_sub(self.cm_sacked.sacked_bytes());
        self.cm_sacked = self.sb.clone();
        n
    }

    /// TCP/CM during SACK recovery: report bytes newly declared lost and
    /// bytes newly SACKed (they left the network).
    pub(super) fn report_sack_progress(&mut self) {
        if self.cm.is_none() {
            return;
        }
        // Losses only while recovering: after the recovery point is
        // acknowledged, a new loss is the next episode's congestion signal.
        let (top, lost) = if self.sack_recovering() {
            self.lost_below(self.cm_lost_to.max(self.snd_una))
        } else {
            (self.cm_lost_to, 0)
        };
        self.cm_lost_to = self.cm_lost_to.max(top);
        let sacked = self.unreported_sacked();
        if let Some(cm) = self.cm.as_mut() {
            cm.on_sack_progress(lost, sacked);
        }
    }

    /// RFC 6675 §5.1 on a timeout: keep the scoreboard, retransmit only
    /// un-SACKed data (no go-back-N over SACKed segments), and start no new
    /// recovery until RecoveryPoint (= HighData, set by the caller) is
    /// acknowledged. RFC 2018 §5 would discard the SACK information in case
    /// the receiver reneged; RFC 6675 §5.1 (and RFC 2018 erratum 1610) allow
    /// keeping it, and [`TcpReceiver`](crate::TcpReceiver) never discards out-of-order data.
    pub(super) fn sack_timeout(&mut self) {
        self.rto_recovery = self.snd_una < self.snd_max;
        self.high_rxt = self.snd_una;
        self.rescue_rxt = None;
        if self.fin_sent && !self.fin_acked {
            self.fin_sent = false;
        }
        self.ledger.clear();
        if let Some(cm) = self.cm.as_mut() {
            cm.on_timeout();
        }
        // Everything notified is now reported (lost), SACKed bytes included.
        self.cm_sacked = self.sb.clone();
        self.cm_lost_to = self.recover;
    }
}
