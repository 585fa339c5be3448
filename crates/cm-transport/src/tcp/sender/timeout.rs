//! The retransmission timeout (RFC 6298 §5.4-5.6): back off, then
//! go-back-N, or with SACK the RFC 6675 §5.1 recovery in [`super::sack`].

use cm_core::Instant;

use super::{Phase, TcpSender};

impl TcpSender {
    /// The retransmission timer may have expired.
    pub fn handle_timeout(&mut self, now: Instant) {
        let Some(at) = self.rto_at else { return };
        if now < at {
            return;
        }
        self.rto_at = None;
        match self.phase {
            Phase::SynSent => {
                self.stats.timeouts += 1;
                self.syn_retransmitted = true;
                self.rtt.back_off();
                self.phase = Phase::SynToSend;
                return;
            }
            Phase::SynToSend => return,
            Phase::Established => {}
        }
        if self.snd_una == self.snd_max && (!self.fin_sent || self.fin_acked) {
            return;
        }
        self.stats.timeouts += 1;
        let at = self.loss_state();
        let first = self.rtt.backoff() == 0;
        // A timeout inside a recovery does not raise ssthresh (newreno.rs).
        let recovering = self.in_recovery || self.after_rto;
        if let Some(cc) = self.cc.as_mut() {
            cc.on_timeout(at, first, recovering);
        }
        self.after_rto = true;
        // RFC 6298 §5.5: back off; §5.6: restart the timer.
        self.rtt.back_off();
        // RFC 6582 §3.2 step 1 semantics after a timeout: record the highest
        // sequence sent so stale duplicate ACKs cannot start fast recovery.
        self.recover = self.snd_max;
        self.in_recovery = false;
        self.dupacks = 0;
        self.rexmit = None;
        if self.cfg.grant_mtus > 1 {
            // k-MTU requests: whatever the count of MTUs requested says, a
            // timeout requests afresh, so a count the CM no longer matches
            // (a request lost in a move) cannot stall the connection.
            if let Some(cm) = self.cm.as_mut() {
                cm.forget_requests();
            }
        }
        if self.sack {
            self.sack_timeout();
            self.rto_at = Some(now + self.rtt.rto());
            self.maybe_request();
            return;
        }
        // Go-back-N from the first unacknowledged byte.
        self.snd_nxt = self.snd_una;
        if self.fin_sent && !self.fin_acked {
            self.fin_sent = false;
        }
        self.ledger.clear();
        if let Some(cm) = self.cm.as_mut() {
            cm.on_timeout();
        }
        self.rto_at = Some(now + self.rtt.rto());
        self.maybe_request();
    }
}
