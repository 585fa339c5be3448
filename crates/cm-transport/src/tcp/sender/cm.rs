//! The TCP/CM interaction (cm-implementation-linux §3.2; sigcomm1999
//! §3.2.1): grants become segments, one request stays outstanding while
//! there is data to send, and the CM's byte counters.

use cm_core::{Bytes, Instant};

use super::{Phase, TcpSender};
use crate::CmCall;
use crate::segment::TcpSegment;
use crate::tcp::cm_account::CmAccount;

impl TcpSender {
    /// TCP/CM: bytes notified to the CM and bytes reported to it so far
    /// (equal once the transfer is complete).
    pub fn cm_bytes(&self) -> Option<(Bytes, Bytes)> {
        self.cm
            .as_ref()
            .map(|c| (Bytes(c.notified_total()), Bytes(c.reported_total())))
    }

    /// The next call to forward to the CM for this flow (TCP/CM only;
    /// NewReno mode never yields one).
    pub fn poll_cm(&mut self) -> Option<CmCall> {
        self.cm.as_mut().and_then(CmAccount::poll)
    }

    /// TCP/CM `cmapp_send` (cm-implementation-linux §3.2): the CM granted
    /// `bytes`. Sends a pending retransmission first, else up to one MSS of
    /// data the receiver window allows, else nothing; a grant of several
    /// MSS ([`crate::TcpConfig::grant_mtus`]) yields more full segments,
    /// returned by [`TcpSender::poll_transmit`]. With SACK, in loss
    /// recovery the segment is RFC 6675's NextSeg (lost holes first, then
    /// new data, then rules 3 and 4); the CM's window plays cwnd - pipe. Queues the matching
    /// [`CmCall::Notify`] (0 declines) and, if more is ready, the next
    /// [`CmCall::Request`] on [`TcpSender::poll_cm`]: the driver must not
    /// call `notify` itself. NewReno mode ignores grants.
    pub fn on_grant(&mut self, now: Instant, bytes: Bytes) -> Option<TcpSegment> {
        let units = self.grant_units(bytes);
        let cm = self.cm.as_mut()?;
        cm.request_outstanding = false;
        cm.granted(units);
        let first = self.grant_segment(now, bytes.get().min(self.mss));
        let mut sent = first.map_or(0, |s| u64::from(s.len));
        if first.is_some() {
            // A k-MTU grant: more full segments while a whole MSS of it is
            // left; [`TcpSender::poll_transmit`] hands them out.
            let mut left = bytes.get() - sent;
            while left >= self.mss {
                let Some(s) = self.grant_segment(now, self.mss) else {
                    break;
                };
                left -= u64::from(s.len);
                sent += u64::from(s.len);
                self.burst.push_back(s);
            }
        }
        if let Some(cm) = self.cm.as_mut() {
            cm.notify(sent);
        }
        self.maybe_request();
        first
    }

    /// One segment of at most `limit` bytes for a grant: a pending
    /// retransmission, else new data (with SACK in recovery: NextSeg).
    fn grant_segment(&mut self, now: Instant, limit: u64) -> Option<TcpSegment> {
        if self.phase != Phase::Established || limit == 0 {
            return None;
        }
        if self.sack_recovering() {
            self.rexmit_segment(now, limit).or_else(|| {
                let gaps = self.gaps();
                self.sack_segment(now, limit, &gaps)
            })
        } else {
            self.rexmit_segment(now, limit)
                .or_else(|| self.data_segment(now, limit, None))
        }
    }

    /// TCP/CM: the CM withdrew a grant of `bytes` this sender never saw
    /// (`GrantExpired`). Its MTUs no longer count as requested; if there is
    /// work, the request is renewed. Nothing is notified: the CM holds no
    /// grant to answer.
    pub fn on_grant_expired(&mut self, bytes: Bytes) {
        let units = self.grant_units(bytes);
        if let Some(cm) = self.cm.as_mut() {
            cm.request_outstanding = false;
            cm.granted(units);
        }
        self.maybe_request();
    }

    /// TCP/CM: the CM this sender's flow lives in lost its requests (the
    /// application's CM handle moved between the daemon and an embedded
    /// CM). Nothing counts as requested any more, and work is requested
    /// again.
    pub fn cm_requests_lost(&mut self) {
        if let Some(cm) = self.cm.as_mut() {
            cm.forget_requests();
        }
        self.maybe_request();
    }

    /// The requested MTUs a grant of `bytes` used (k-MTU requests).
    fn grant_units(&self, bytes: Bytes) -> u32 {
        let unit = if self.cfg.grant_unit == 0 {
            self.mss
        } else {
            u64::from(self.cfg.grant_unit)
        };
        u32::try_from(bytes.get().div_ceil(unit.max(1))).unwrap_or(u32::MAX)
    }

    /// MTUs this sender could fill now: one for a retransmission, plus the
    /// data from `snd_nxt` on that the receiver window allows (after a
    /// timeout that starts with the go-back-N resend), at least one and at
    /// most `grant_mtus`.
    fn sendable_mtus(&self, rexmit: bool) -> u32 {
        let window_end = self.snd_una + self.rwnd;
        let new = self
            .data_end
            .min(window_end)
            .saturating_sub(self.snd_nxt)
            .div_ceil(self.mss);
        let n = new + u64::from(rexmit || self.sack_recovering());
        u32::try_from(n)
            .unwrap_or(u32::MAX)
            .clamp(1, self.cfg.grant_mtus)
    }

    /// TCP/CM request discipline: exactly one request outstanding while
    /// there is a retransmission or window-permitted data to send
    /// (sigcomm1999 §3.2.1). With k-MTU requests, as many MTUs requested
    /// as could be filled now ([`TcpSender::sendable_mtus`]).
    pub(super) fn maybe_request(&mut self) {
        if self.phase != Phase::Established {
            return;
        }
        if self.cm.is_none() {
            return;
        }
        let rexmit = self
            .rexmit
            .is_some_and(|h| h.seq >= self.snd_una && h.seq < self.snd_max);
        let ready = rexmit
            || if self.sack_recovering() {
                self.next_seg(self.mss, &self.gaps()).is_some()
            } else {
                self.next_len(self.mss).is_some()
            };
        if !ready {
            return;
        }
        if self.cfg.grant_mtus > 1 {
            let want = self.sendable_mtus(rexmit);
            if let Some(cm) = self.cm.as_mut() {
                cm.top_up(want);
            }
        } else if let Some(cm) = self.cm.as_mut() {
            cm.request(1);
        }
    }
}
