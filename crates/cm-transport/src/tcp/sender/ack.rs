//! ACK processing: the handshake's SYN-ACK, cumulative ACKs with RTT
//! sampling (RFC 6298, RFC 7323 §4.1), duplicate ACKs and NewReno fast
//! recovery (RFC 5681 §3.2, RFC 6582 §3.2).

use cm_core::Instant;

use super::{DATA_START, Hole, Phase, TcpSender};
use crate::segment::{Flags, TcpSegment};

impl TcpSender {
    /// Process an ACK from the receiver.
    pub fn handle_segment(&mut self, now: Instant, seg: &TcpSegment) {
        if !seg.flags.contains(Flags::ACK) {
            return;
        }
        match self.phase {
            Phase::SynSent | Phase::SynToSend => {
                if seg.flags.contains(Flags::SYN) && seg.ack == DATA_START {
                    self.establish(now, seg);
                }
                return;
            }
            Phase::Established if seg.flags.contains(Flags::SYN) => return,
            Phase::Established => {}
        }
        self.ts_recent = seg.ts_val;
        let old_rwnd = self.rwnd;
        self.rwnd = u64::from(seg.wnd);
        if self.fin_sent && seg.ack > self.data_end {
            self.fin_acked = true;
        }
        let ack = seg.ack.min(self.snd_max);
        if self.sack {
            self.on_sack_ack(now, ack, seg, old_rwnd);
        } else if ack > self.snd_una {
            self.on_new_ack(now, ack, seg);
        } else if ack == self.snd_una
            && seg.len == 0
            && self.snd_max > self.snd_una
            && self.rwnd == old_rwnd
        {
            // RFC 5681 §2 "duplicate acknowledgment".
            self.on_dupack();
        }
        if self.snd_una == self.snd_max && (!self.fin_sent || self.fin_acked) {
            self.rto_at = None;
        }
        self.maybe_request();
    }

    pub(super) fn establish(&mut self, now: Instant, seg: &TcpSegment) {
        self.phase = Phase::Established;
        self.rwnd = u64::from(seg.wnd);
        self.ts_recent = seg.ts_val;
        self.rto_at = None;
        // The handshake seeds the RTT estimate unless the SYN was
        // retransmitted (Karn).
        let sample = (!self.syn_retransmitted)
            .then(|| now - self.syn_sent_at)
            .filter(|d| !d.is_zero());
        if let Some(s) = sample {
            self.rtt.on_sample(s);
            self.stats.rtt_samples += 1;
        }
        // RFC 2018 §2: SACK only if both ends permit it.
        self.sack = self.cfg.sack && seg.flags.contains(Flags::SACK_OK);
        if let Some(cc) = self.cc.as_mut() {
            if self.syn_retransmitted {
                cc.set_window(1); // RFC 5681 §3.1: IW = 1 MSS after a lost SYN
            }
        }
        if let (Some(cm), Some(s)) = (self.cm.as_mut(), sample) {
            cm.rtt_only(s);
        }
        self.maybe_request();
    }

    pub(super) fn on_new_ack(&mut self, now: Instant, ack: u64, seg: &TcpSegment) {
        let acked = ack - self.snd_una;
        let resolved = self.ledger.on_ack(now, ack);
        let sample = if self.cfg.timestamps {
            // RFC 7323 §4.1: RTTM from the echoed timestamp.
            (seg.ts_ecr > 0)
                .then(|| now - Instant::from_micros(seg.ts_ecr))
                .filter(|d| !d.is_zero())
        } else {
            resolved.sample
        };
        if let Some(s) = sample {
            self.rtt.on_sample(s);
            self.stats.rtt_samples += 1;
        }
        self.snd_una = ack;
        self.snd_nxt = self.snd_nxt.max(ack);
        self.stats.bytes_acked += acked;
        if self.rexmit.is_some_and(|h| h.seq < ack) {
            self.rexmit = None;
        }
        let flight = self.snd_max - self.snd_una;
        let mut restart_timer = true;
        // After a timeout, an ACK that covers no transmission made at
        // least one minimum RTT ago can only acknowledge data sent before
        // the timeout: those segments were still in flight, and counting
        // their ACKs as slow-start ACKs would grow cwnd by the old flight
        // within one round trip (RFC 5681 §3.1 slow start grows cwnd per ACK
        // of data the post-timeout window carried; Linux's F-RTO and undo,
        // RFC 5682, treat such ACKs as a sign of a spurious timeout).
        let grow = !self.after_rto || self.may_ack_since_timeout(now, resolved.eldest);
        if self.after_rto && ack >= self.recover {
            self.after_rto = false;
        }
        if self.sack {
            self.sb.advance(ack);
            if self.rto_recovery && ack >= self.recover {
                self.rto_recovery = false;
            }
        }
        if self.sack && self.in_recovery {
            if ack >= self.recover {
                // RFC 6675 §5 (A): a cumulative ACK covering RecoveryPoint
                // ends loss recovery; cwnd is already ssthresh.
                self.in_recovery = false;
                self.dupacks = 0;
            } else {
                // RFC 6675 §5 (B): the scoreboard and pipe do the work; no
                // NewReno hole or deflation. The timer restarts on every
                // ACK of new data (RFC 6298 §5.3; RFC 6675 §6).
                self.stats.partial_acks += 1;
            }
        } else if self.in_recovery {
            if ack >= self.recover {
                // RFC 6582 §3.2 step 3: full acknowledgment, leave recovery.
                self.in_recovery = false;
                self.dupacks = 0;
                if let Some(cc) = self.cc.as_mut() {
                    cc.on_full_ack(flight);
                }
            } else {
                // RFC 6582 §3.2 step 5: partial acknowledgment, retransmit
                // the next hole.
                self.stats.partial_acks += 1;
                self.rexmit = Some(Hole {
                    seq: self.snd_una,
                    restarts_timer: false,
                });
                // "If this is the first partial ACK during fast recovery,
                // also reset the retransmit timer" (RFC 6582 §3.2 step 5,
                // the Impatient variant of §4): with many losses in one
                // window, a timeout then repairs them by going back N
                // instead of one hole per round trip.
                restart_timer = !self.partial_restarted;
                self.partial_restarted = true;
                if let Some(cc) = self.cc.as_mut() {
                    cc.on_partial_ack(acked);
                }
            }
        } else {
            self.dupacks = 0;
            if let Some(cc) = self.cc.as_mut().filter(|_| grow) {
                cc.on_ack(acked);
            }
        }
        // RFC 6298 §5.2-5.3: stop when all is acked, else restart (in
        // recovery, only on the first partial ACK, above).
        let outstanding = flight > 0 || (self.fin_sent && !self.fin_acked);
        if !outstanding {
            self.rto_at = None;
        } else if restart_timer || self.rto_at.is_none() {
            self.rto_at = Some(now + self.rtt.rto());
        }
        if let Some(cm) = self.cm.as_mut() {
            // RFC 3124 §5.1.1: an ACK for new data reports the bytes it
            // acknowledges, with the RTT sample if valid.
            cm.on_cumulative_ack(resolved.covered, flight == 0, sample);
        }
    }

    /// Whether an ACK whose earliest covered transmission (since the last
    /// timeout) was sent at `eldest` can acknowledge that transmission:
    /// not if it covers none, nor if it arrives sooner than the smallest
    /// RTT seen after it.
    fn may_ack_since_timeout(&self, now: Instant, eldest: Option<Instant>) -> bool {
        match (eldest, self.rtt.min_rtt()) {
            (None, _) => false,
            (Some(t), Some(min)) => now - t >= min,
            (Some(_), None) => true,
        }
    }

    pub(super) fn on_dupack(&mut self) {
        self.dupacks += 1;
        self.stats.dupacks += 1;
        if self.in_recovery {
            if let Some(cc) = self.cc.as_mut() {
                cc.on_dupack_in_recovery();
            }
            // cm-implementation-linux §3.2: dupacks > 3, a segment left the
            // network.
            if let Some(cm) = self.cm.as_mut() {
                cm.on_later_dupack(self.mss);
            }
        } else if self.dupacks == 3 && self.snd_una >= self.recover {
            // RFC 6582 §3.2 step 2 (only if the ACK covers more than
            // `recover`, so stale dupacks after a timeout do not trigger
            // another reduction); RFC 5681 §3.2 step 2.
            self.in_recovery = true;
            self.partial_restarted = false;
            self.recover = self.snd_max;
            self.stats.fast_retransmits += 1;
            self.rexmit = Some(self.fast_retransmission());
            let at = self.loss_state();
            let flight = at.flight;
            if let Some(cc) = self.cc.as_mut() {
                cc.on_enter_recovery(at);
            }
            // cm-implementation-linux §3.2: dupacks == 3, a congestion loss.
            let hole = self.mss.min(flight);
            // The three duplicate ACKs each announce one segment that
            // arrived above the hole (RFC 5681 §3.2 step 3).
            let arrived = (3 * self.mss).min(flight - hole);
            if let Some(cm) = self.cm.as_mut() {
                cm.on_third_dupack(hole, arrived);
            }
        }
    }
}
