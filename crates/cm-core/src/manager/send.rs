//! Request, grant, notify and grant expiry (sigcomm1999 §3.1, §4.6;
//! cm-implementation-linux §2.1.2; RFC 3124 §3).

use crate::controller::{Controller, IdleEvent, SentEvent};
use crate::error::Error;
use crate::event::Event;
use crate::flow::GrantRec;
use crate::id::{FlowId, MacroflowId};
use crate::macroflow::Expiry;
use crate::manager::CongestionManager;
use crate::scheduler::{Entry, Scheduler};
use crate::time::Instant;
use crate::units::Bytes;

/// Largest byte count accepted in one call: far above any real send, far
/// below where counters could overflow.
pub(crate) const MAX_BYTES: Bytes = Bytes(1 << 40);

impl CongestionManager {
    /// `cm_request`: ask to send up to one MTU. A [`Event::Grant`] follows
    /// when the macroflow's window, shaper and scheduler allow.
    pub fn request(&mut self, now: Instant, flow: FlowId) -> Result<(), Error> {
        self.request_mtus(now, flow, 1)
    }

    /// The k-MTU variant of `cm_request`: ask to send up to `k` MTUs; grants
    /// may cover several MTUs at once when the window has room.
    pub fn request_mtus(&mut self, now: Instant, flow: FlowId, k: u32) -> Result<(), Error> {
        let now = self.tick(now);
        if k == 0 || k > self.cfg.max_request_mtus {
            return Err(Error::InvalidRequest(k));
        }
        let f = self.flows.get(flow.key()).ok_or(Error::UnknownFlow(flow))?;
        let mf = f.macroflow;
        let mtu = self
            .macroflows
            .get(mf.key())
            .map_or(self.cfg.mtu, |m| m.mtu);
        let add = mtu.saturating_mul(u64::from(k));
        let pending = f.pending + add;
        if pending > MAX_BYTES {
            return Err(Error::TooLarge(pending));
        }
        let client = f.client;
        self.touch(now, client);
        self.wake_from_idle(now, mf);
        let Some(f) = self.flows.get_mut(flow.key()) else {
            return Ok(());
        };
        f.pending = pending;
        if !f.queued {
            f.queued = true;
            let entry = Entry {
                flow,
                epoch: f.epoch,
            };
            if let Some(m) = self.macroflows.get_mut(mf.key()) {
                m.scheduler.push(entry);
            }
        }
        self.try_grant(now, mf);
        self.rearm(now, mf);
        Ok(())
    }

    /// `cm_notify`: the flow sent `nsent` bytes. It answers the flow's oldest
    /// outstanding grant (zero declines it, freeing the window for other
    /// flows); with no grant outstanding the bytes are simply charged, as
    /// for the IP output routine's notification of every transmission
    /// (cm-implementation-linux §2.1.3).
    pub fn notify(&mut self, now: Instant, flow: FlowId, nsent: Bytes) -> Result<(), Error> {
        let now = self.tick(now);
        if nsent > MAX_BYTES {
            return Err(Error::TooLarge(nsent));
        }
        let f = self
            .flows
            .get_mut(flow.key())
            .ok_or(Error::UnknownFlow(flow))?;
        let mf = f.macroflow;
        let client = f.client;
        let grant = f.grants.pop_front();
        let mut released = Bytes::ZERO;
        if let Some(g) = grant {
            f.granted = f.granted - g.bytes;
            released = g.bytes;
        }
        f.in_flight += nsent;
        f.counters.sent += nsent;
        self.touch(now, client);
        let Some(m) = self.macroflows.get_mut(mf.key()) else {
            return Ok(());
        };
        m.reserved = m.reserved - released;
        if m.in_flight == Bytes::ZERO && nsent > Bytes::ZERO {
            // A new flight starts: aging measures silence from here.
            m.feedback_clock = now;
        }
        m.in_flight += nsent;
        if nsent > Bytes::ZERO {
            m.idle_since = None;
            let ev = SentEvent::new(now, nsent, m.in_flight);
            m.controller.on_sent(&ev);
        }
        if released > nsent {
            // An unused (part of a) grant gives its shaper tokens back.
            let (rate, mtu) = (m.shaping_rate(), m.mtu);
            m.shaper.refund(released - nsent, rate, mtu);
        }
        self.prune_expiry(mf);
        self.note_if_idle(now, mf);
        self.try_grant(now, mf);
        self.rearm(now, mf);
        Ok(())
    }

    /// A flow that sends without asking (only `cm_notify`s) tells the CM
    /// that its share of the window held it back since the last feedback:
    /// the macroflow's next feedback is window-limited (RFC 7661's
    /// "cwnd-limited"), as when requests wait for window room. The kernel
    /// TCP bridge passes on the kernel's own verdict this way: it learns of
    /// a connection's sends only at its next report, so the bytes in flight
    /// it reports understate the flight the window allowed.
    pub fn window_limited(&mut self, now: Instant, flow: FlowId) -> Result<(), Error> {
        let now = self.tick(now);
        let f = self.flows.get(flow.key()).ok_or(Error::UnknownFlow(flow))?;
        let (mf, client) = (f.macroflow, f.client);
        self.touch(now, client);
        if let Some(m) = self.macroflows.get_mut(mf.key()) {
            m.window_blocked = true;
        }
        Ok(())
    }

    /// Issue grants while the window, the shaper and the scheduler allow.
    pub(crate) fn try_grant(&mut self, now: Instant, mf: MacroflowId) {
        let grant_timeout = self.cfg.grant_timeout;
        let Some(m) = self.macroflows.get_mut(mf.key()) else {
            return;
        };
        loop {
            if m.scheduler.is_empty() {
                return;
            }
            let mtu = m.mtu;
            let srtt = m.rtt.srtt();
            let open_loop = m.aging.is_some_and(|a| a.steps > 0);
            // sigcomm1999 §4.4: while aging, transmissions continue open-loop
            // at window/srtt (the window halves every half-life) instead of
            // stalling on a window that feedback no longer drains.
            let space = if open_loop { mtu } else { m.window_space() };
            if space < mtu {
                // Demand is waiting on the window (RFC 7661 cwnd-limited).
                m.window_blocked = true;
                return;
            }
            let rate = m.shaping_rate();
            m.shaper.refill(now, rate, mtu);
            if !m.shaper.allows() {
                return;
            }
            let flows = &self.flows;
            let Some(entry) = m.scheduler.select(mtu, |e| {
                let f = flows.get(e.flow.key())?;
                (f.epoch == e.epoch && f.queued && f.pending > Bytes::ZERO).then_some(f.weight)
            }) else {
                return;
            };
            let Some(f) = self.flows.get_mut(entry.flow.key()) else {
                return;
            };
            // Whole MTUs only, at least one (space >= mtu here), and no more
            // than the shaper releases now (its credit plus what falls due
            // within the pacing slack): a k-MTU grant must not be a burst.
            let credit = Bytes(u64::try_from(m.shaper.releasable()).unwrap_or(0));
            let room = space.min(credit.max(mtu));
            let room = Bytes(room.0 / mtu.0 * mtu.0);
            let bytes = f.pending.min(room);
            f.pending = f.pending - bytes;
            let seq = f.next_grant_seq;
            f.next_grant_seq += 1;
            f.grants.push_back(GrantRec { bytes, seq });
            f.granted += bytes;
            f.counters.grants += 1;
            let backlogged = f.pending > Bytes::ZERO;
            f.queued = backlogged;
            m.scheduler.served(entry, bytes, backlogged);
            m.reserved += bytes;
            m.idle_since = None;
            m.shaper.consume(bytes);
            // RFC 3124 §3: a grant lapses after max(srtt, threshold).
            let deadline = now + grant_timeout.max(srtt.unwrap_or_default());
            m.expiry.push_back(Expiry {
                deadline,
                flow: entry.flow,
                seq,
            });
            self.events.push_back(Event::Grant {
                flow: entry.flow,
                bytes,
            });
        }
    }

    /// Withdraw grants whose deadline passed.
    pub(crate) fn expire_grants(&mut self, now: Instant, mf: MacroflowId) {
        loop {
            let Some(m) = self.macroflows.get_mut(mf.key()) else {
                return;
            };
            let Some(&e) = m.expiry.front() else { return };
            if e.deadline > now {
                return;
            }
            m.expiry.pop_front();
            // Expire every grant of that flow up to and including this one
            // (older grants of a moved flow may be queued elsewhere).
            let Some(f) = self.flows.get_mut(e.flow.key()) else {
                continue;
            };
            let mut bytes = Bytes::ZERO;
            while f.grants.front().is_some_and(|g| g.seq <= e.seq) {
                if let Some(g) = f.grants.pop_front() {
                    bytes += g.bytes;
                    f.counters.expired += 1;
                }
            }
            if bytes == Bytes::ZERO {
                continue;
            }
            f.granted = f.granted - bytes;
            let owner = f.macroflow;
            if let Some(o) = self.macroflows.get_mut(owner.key()) {
                o.reserved = o.reserved - bytes;
                let (rate, mtu) = (o.shaping_rate(), o.mtu);
                o.shaper.refund(bytes, rate, mtu);
            }
            self.events.push_back(Event::GrantExpired {
                flow: e.flow,
                bytes,
            });
            if owner != mf {
                self.note_if_idle(now, owner);
                self.after_change(now, owner);
            }
        }
    }

    /// Drop expiry entries at the front whose grants were already answered,
    /// so the queue stays as short as the number of unanswered grants.
    fn prune_expiry(&mut self, mf: MacroflowId) {
        let Some(m) = self.macroflows.get_mut(mf.key()) else {
            return;
        };
        while let Some(e) = m.expiry.front() {
            let live = self
                .flows
                .get(e.flow.key())
                .and_then(|f| f.grants.front())
                .is_some_and(|g| g.seq <= e.seq);
            if live {
                return;
            }
            m.expiry.pop_front();
        }
    }

    /// Activity resumes: apply idle decay (RFC 2861 §3) and start a new
    /// activity period for the minimum RTT (sigcomm1999 §4.4).
    pub(crate) fn wake_from_idle(&mut self, now: Instant, mf: MacroflowId) {
        let (min_rto, initial_rto) = (self.cfg.min_rto, self.cfg.initial_rto);
        let Some(m) = self.macroflows.get_mut(mf.key()) else {
            return;
        };
        let Some(since) = m.idle_since.take() else {
            return;
        };
        let idle = now - since;
        let rto = m.rtt.rto(min_rto, initial_rto);
        if idle >= rto {
            m.controller
                .on_idle_restart(&IdleEvent::new(now, idle, rto));
            m.rtt.new_activity_period();
        }
    }

    /// Record the start of an idle period if nothing is left to do.
    pub(crate) fn note_if_idle(&mut self, now: Instant, mf: MacroflowId) {
        let Some(m) = self.macroflows.get_mut(mf.key()) else {
            return;
        };
        if m.idle_since.is_none() && m.is_idle() {
            m.idle_since = Some(now);
            m.aging = None;
        }
    }

    /// Re-run granting, rate callbacks and timers after a state change.
    pub(crate) fn after_change(&mut self, now: Instant, mf: MacroflowId) {
        self.try_grant(now, mf);
        self.check_thresholds(now, mf);
        self.rearm(now, mf);
    }
}
