//! TCP/CM's side of the CM API: the request discipline and the mapping of
//! TCP events onto `cm_update` (RFC 3124 §5.1.1; cm-implementation-linux §3.2).
//!
//! Byte conservation: every byte notified to the CM is reported exactly
//! once. `unreported` counts bytes notified and not yet reported;
//! `reported_ahead` counts bytes reported by duplicate ACKs (lost or
//! arrived) whose transmissions are not yet cumulatively acknowledged, so
//! the cumulative ACK that later covers them does not report them again.

use std::collections::VecDeque;

use cm_core::{Bytes, Duration, Feedback, LossMode};

use crate::CmCall;

/// The CM-facing state of a TCP/CM sender.
#[derive(Clone, Debug, Default)]
pub(crate) struct CmAccount {
    calls: VecDeque<CmCall>,
    /// A `Request` is outstanding (exactly one while there is work).
    pub request_outstanding: bool,
    /// k-MTU requests: MTUs requested and not yet granted, as the sender
    /// counts them.
    requested_mtus: u32,
    unreported: u64,
    reported_ahead: u64,
    notified_total: u64,
    reported_total: u64,
}

impl CmAccount {
    pub(crate) fn poll(&mut self) -> Option<CmCall> {
        self.calls.pop_front()
    }

    /// Ask for a grant of up to `k` MTUs, unless a request is outstanding.
    pub(crate) fn request(&mut self, k: u32) {
        if !self.request_outstanding {
            self.request_outstanding = true;
            self.calls.push_back(if k > 1 {
                CmCall::RequestMtus(k)
            } else {
                CmCall::Request
            });
        }
    }

    /// k-MTU requests: keep `want` MTUs requested, asking for the
    /// difference when fewer are. A request not yet handed to the driver
    /// grows instead and moves behind the calls queued since, so the ACKs
    /// of one receive batch make one request, after their feedback, and
    /// the CM answers it with one grant.
    pub(crate) fn top_up(&mut self, want: u32) {
        if want <= self.requested_mtus {
            return;
        }
        let mut k = want - self.requested_mtus;
        self.requested_mtus = want;
        if let Some(i) = self
            .calls
            .iter()
            .position(|c| matches!(c, CmCall::Request | CmCall::RequestMtus(_)))
        {
            k += match self.calls.remove(i) {
                Some(CmCall::RequestMtus(n)) => n,
                _ => 1,
            };
        }
        self.calls.push_back(if k > 1 {
            CmCall::RequestMtus(k)
        } else {
            CmCall::Request
        });
    }

    /// k-MTU requests: a grant (or a withdrawn one) used `mtus` of them.
    pub(crate) fn granted(&mut self, mtus: u32) {
        self.requested_mtus = self.requested_mtus.saturating_sub(mtus);
    }

    /// The CM no longer holds this sender's requests (it moved, or a
    /// timeout suspects the count): nothing counts as requested.
    pub(crate) fn forget_requests(&mut self) {
        self.requested_mtus = 0;
        self.request_outstanding = false;
    }

    /// Answer a grant with `n` bytes (0 declines).
    pub(crate) fn notify(&mut self, n: u64) {
        self.unreported += n;
        self.notified_total += n;
        self.calls.push_back(CmCall::Notify(Bytes(n)));
    }

    /// Queue an update; `nsent` is capped at what the CM still counts as
    /// outstanding. Returns the bytes reported.
    fn report(&mut self, nsent: u64, nrecd: u64, loss: LossMode, rtt: Option<Duration>) -> u64 {
        let nsent = nsent.min(self.unreported);
        let nrecd = nrecd.min(nsent);
        if nsent == 0 && rtt.is_none() && loss == LossMode::None {
            return 0;
        }
        self.unreported -= nsent;
        self.reported_total += nsent;
        self.calls.push_back(CmCall::Update(Feedback {
            nsent: Bytes(nsent),
            nrecd: Bytes(nrecd),
            loss,
            rtt,
            lost_sent: None,
        }));
        nsent
    }

    /// The handshake's RTT sample seeds the CM's estimate.
    pub(crate) fn rtt_only(&mut self, rtt: Duration) {
        self.report(0, 0, LossMode::None, Some(rtt));
    }

    /// A cumulative ACK acknowledged transmissions totalling `covered`
    /// bytes: report those not already reported by duplicate ACKs. When
    /// nothing is outstanding any more, everything left is reported.
    pub(crate) fn on_cumulative_ack(
        &mut self,
        covered: u64,
        all_acked: bool,
        rtt: Option<Duration>,
    ) {
        let consumed = covered.min(self.reported_ahead);
        self.reported_ahead -= consumed;
        let mut n = covered - consumed;
        if all_acked {
            n = self.unreported;
            self.reported_ahead = 0;
        }
        self.report(n, n, LossMode::None, rtt);
    }

    /// Third duplicate ACK: one segment lost, a congestion signal
    /// (cm-implementation-linux §3.2, "dup acks == 3"), and the three
    /// segments whose arrival caused the three duplicate ACKs have left the
    /// network: RFC 5681 §3.2 step 3 inflates cwnd by 3 SMSS for exactly
    /// those. The paper defers the first two ("dup acks < 3: TCP does
    /// nothing"); all three are reported here, after the loss so that the
    /// window is halved from its size before they arrived. Without them the
    /// CM counts the three departed segments as in flight until the next
    /// cumulative ACK: below a window of 8 segments the halved window then
    /// has no room to grant the retransmission, and the flow stalls until
    /// its RTO after every single loss.
    pub(crate) fn on_third_dupack(&mut self, hole: u64, arrived: u64) {
        self.reported_ahead += self.report(hole, 0, LossMode::Transient, None);
        self.reported_ahead += self.report(arrived, arrived, LossMode::None, None);
    }

    /// SACK loss recovery (RFC 6675), after the loss was reported once by
    /// [`CmAccount::on_third_dupack`]: bytes newly declared lost (`IsLost`)
    /// left the network without arriving, bytes newly SACKed arrived. No
    /// further congestion signal: one per recovery episode.
    pub(crate) fn on_sack_progress(&mut self, lost: u64, sacked: u64) {
        self.reported_ahead += self.report(lost, 0, LossMode::None, None);
        self.reported_ahead += self.report(sacked, sacked, LossMode::None, None);
    }

    /// Each later duplicate ACK: one segment left the network.
    pub(crate) fn on_later_dupack(&mut self, mss: u64) {
        self.reported_ahead += self.report(mss, mss, LossMode::None, None);
    }

    /// Retransmission timeout: everything outstanding is lost, persistent
    /// congestion (`CM_NO_FEEDBACK`, cm-implementation-linux §3.2).
    pub(crate) fn on_timeout(&mut self) {
        let n = self.unreported;
        self.report(n, 0, LossMode::Persistent, None);
        self.reported_ahead = 0;
    }

    /// Bytes notified so far.
    pub(crate) fn notified_total(&self) -> u64 {
        self.notified_total
    }

    /// Bytes reported so far.
    pub(crate) fn reported_total(&self) -> u64 {
        self.reported_total
    }
}
