//! Timers: one lazily invalidated heap of wake-ups for macroflows (grant
//! expiry, shaper release, aging steps, garbage collection) and clients
//! (reclamation). An entry is live only if it matches the target's `armed`
//! time, so re-arming never searches the heap.

use core::cmp::Ordering;

use crate::event::Event;
use crate::id::{ClientId, MacroflowId};
use crate::manager::CongestionManager;
use crate::scheduler::Scheduler;
use crate::time::Instant;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Target {
    Macroflow(MacroflowId),
    Client(ClientId),
}

/// A heap entry, ordered so the earliest is on top of the max-heap.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TimerEntry {
    at: Instant,
    target: Target,
}

impl Ord for TimerEntry {
    fn cmp(&self, other: &Self) -> Ordering {
        other.at.cmp(&self.at)
    }
}

impl PartialOrd for TimerEntry {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl CongestionManager {
    /// The next event from the core, if any (grants, rate updates, ...).
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// When [`CongestionManager::handle_timeout`] must next be called;
    /// `None` if no timer is pending.
    pub fn poll_timeout(&mut self) -> Option<Instant> {
        while let Some(top) = self.timers.peek() {
            if self.is_live(top) {
                return Some(top.at);
            }
            self.timers.pop();
        }
        None
    }

    /// Run every timer due at or before `now`.
    pub fn handle_timeout(&mut self, now: Instant) {
        let now = self.tick(now);
        while let Some(&top) = self.timers.peek() {
            if top.at > now {
                break;
            }
            self.timers.pop();
            if !self.is_live(&top) {
                continue;
            }
            match top.target {
                Target::Macroflow(mf) => {
                    if let Some(m) = self.macroflows.get_mut(mf.key()) {
                        m.armed = None;
                    }
                    self.service(now, mf);
                }
                Target::Client(c) => {
                    if let Some(cl) = self.clients.get_mut(c.key()) {
                        cl.armed = None;
                    }
                    self.check_client(now, c);
                }
            }
        }
    }

    fn is_live(&self, e: &TimerEntry) -> bool {
        match e.target {
            Target::Macroflow(mf) => self
                .macroflows
                .get(mf.key())
                .is_some_and(|m| m.armed == Some(e.at)),
            Target::Client(c) => self
                .clients
                .get(c.key())
                .is_some_and(|cl| cl.armed == Some(e.at)),
        }
    }

    fn service(&mut self, now: Instant, mf: MacroflowId) {
        self.expire_grants(now, mf);
        self.age(now, mf);
        let linger = self.cfg.macroflow_linger;
        let gone = self.macroflows.get(mf.key()).is_some_and(|m| {
            m.flows.is_empty() && m.empty_since.is_some_and(|t| now >= t + linger)
        });
        if gone {
            if let Some(m) = self.macroflows.remove(mf.key()) {
                if let Some(k) = m.key {
                    if self.by_key.get(&k) == Some(&mf) {
                        self.by_key.remove(&k);
                    }
                }
            }
            return;
        }
        self.note_if_idle(now, mf);
        self.after_change(now, mf);
    }

    /// Register the macroflow's next wake-up if it is earlier than the one
    /// already registered.
    pub(crate) fn rearm(&mut self, now: Instant, mf: MacroflowId) {
        let aging = self.aging_due(mf);
        let linger = self.cfg.macroflow_linger;
        let Some(m) = self.macroflows.get_mut(mf.key()) else {
            return;
        };
        let mut next = m.expiry.front().map(|e| e.deadline);
        let mut consider = |t: Option<Instant>| {
            if let Some(t) = t {
                next = Some(next.map_or(t, |n| n.min(t)));
            }
        };
        consider(aging);
        let open_loop = m.aging.is_some_and(|a| a.steps > 0);
        if !m.scheduler.is_empty() && (open_loop || m.window_space() >= m.mtu) {
            // Waiting only on the shaper.
            let rate = m.shaping_rate();
            consider(m.shaper.next_release(now, rate).filter(|&t| t > now));
        }
        if m.flows.is_empty() {
            consider(m.empty_since.map(|t| t + linger));
        }
        let Some(t) = next else {
            // Nothing left to wait for: the registered wake-up (if any) is
            // moot and is dropped lazily by `poll_timeout`, never serviced.
            m.armed = None;
            return;
        };
        if m.armed.is_none_or(|a| t < a) {
            m.armed = Some(t);
            self.timers.push(TimerEntry {
                at: t,
                target: Target::Macroflow(mf),
            });
        }
    }

    pub(crate) fn arm_client(&mut self, c: ClientId, _now: Instant) {
        let Some(timeout) = self.cfg.client_timeout else {
            return;
        };
        let Some(cl) = self.clients.get_mut(c.key()) else {
            return;
        };
        let t = cl.last_seen + timeout;
        if cl.armed.is_none_or(|a| t < a) {
            cl.armed = Some(t);
            self.timers.push(TimerEntry {
                at: t,
                target: Target::Client(c),
            });
        }
    }

    /// Reclaim a client's flows if it has been silent too long
    /// (sigcomm1999 §3.1: "cleaned up by the CM after a timeout").
    fn check_client(&mut self, now: Instant, c: ClientId) {
        let Some(timeout) = self.cfg.client_timeout else {
            return;
        };
        let Some(cl) = self.clients.get(c.key()) else {
            return;
        };
        if now < cl.last_seen + timeout {
            self.arm_client(c, now);
            return;
        }
        let flows = cl.flows.clone();
        for &f in &flows {
            self.events
                .push_back(Event::FlowReclaimed { flow: f, client: c });
        }
        let _ = self.close_client(now, c);
    }
}
