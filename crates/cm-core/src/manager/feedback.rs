//! Feedback (`cm_update`), exponential aging, and rate callbacks
//! (`cmapp_update` with `cm_thresh`).

use crate::config::Aging;
use crate::controller::{AckEvent, AgingEvent, CongestionEvent, CongestionKind, Controller};
use crate::error::Error;
use crate::event::Event;
use crate::flow::{Feedback, Flow, LossMode, PathEstimate, Subscription, Thresholds};
use crate::id::{FlowId, MacroflowId};
use crate::macroflow::{AgingState, Macroflow};
use crate::manager::CongestionManager;
use crate::manager::send::MAX_BYTES;
use crate::time::{Duration, Instant};
use crate::units::{Bytes, Rate};

/// At most this many aging halvings are applied in one catch-up; after 64
/// halvings any window is at its floor anyway.
const MAX_AGING_CATCH_UP: u32 = 64;

impl CongestionManager {
    /// `cm_update`: feedback about the flow's past transmissions
    /// (sigcomm1999 §3.1 principle 4; cm-implementation-linux §2.1.3).
    /// Updates the RTT estimate, then the controller: received bytes open
    /// the window, a loss mode other than `None`/`NotCongestion` closes it.
    pub fn update(&mut self, now: Instant, flow: FlowId, fb: Feedback) -> Result<(), Error> {
        let now = self.tick(now);
        if fb.nrecd > fb.nsent {
            return Err(Error::ReceivedMoreThanSent {
                nsent: fb.nsent,
                nrecd: fb.nrecd,
            });
        }
        if fb.nsent > MAX_BYTES {
            return Err(Error::TooLarge(fb.nsent));
        }
        if let Some(r) = fb.rtt {
            if r.is_zero() || r > self.cfg.max_rtt_sample {
                return Err(Error::InvalidRtt(r));
            }
        }
        let f = self
            .flows
            .get_mut(flow.key())
            .ok_or(Error::UnknownFlow(flow))?;
        let (mf, client) = (f.macroflow, f.client);
        // Bytes the flow never notified cannot leave the network, and cannot
        // open the window (a misreporting client gains nothing, cf. ACK
        // division, cm-implementation-linux §5).
        let resolved = fb.nsent.min(f.in_flight);
        let acked = fb.nrecd.min(resolved);
        let lost = fb.nsent - fb.nrecd;
        f.in_flight = f.in_flight - resolved;
        f.counters.received += fb.nrecd;
        f.counters.lost += lost;
        self.touch(now, client);
        let Some(m) = self.macroflows.get_mut(mf.key()) else {
            return Ok(());
        };
        let in_flight_before = m.in_flight;
        m.in_flight = m.in_flight - resolved;
        if let Some(r) = fb.rtt {
            m.rtt.on_sample(r);
        }
        // Feedback closes the open loop (sigcomm1999 §4.4).
        m.feedback_clock = now;
        m.aging = None;
        let srtt = m.rtt.srtt();
        let kind = match fb.loss {
            LossMode::None | LossMode::NotCongestion => None,
            LossMode::Transient => Some(CongestionKind::Transient),
            LossMode::Ecn => Some(CongestionKind::Ecn),
            LossMode::Persistent => Some(CongestionKind::Persistent),
        };
        if acked > Bytes::ZERO {
            let lost_in_report = if kind.is_some() { lost } else { Bytes::ZERO };
            m.controller.on_ack(
                &AckEvent::new(now, acked, in_flight_before, srtt)
                    .with_window_limited(std::mem::take(&mut m.window_blocked))
                    .with_lost_in_report(lost_in_report),
            );
        }
        if let Some(kind) = kind {
            // Nothing was sent after the report arrived.
            let ev = CongestionEvent::new(now, kind, lost, m.in_flight, srtt)
                .with_lost_sent(fb.lost_sent.map(|t| t.min(now)));
            let before = m.controller.window();
            m.controller.on_congestion(&ev);
            if kind == CongestionKind::Persistent {
                m.congestion.timeouts += 1;
            } else if m.controller.window() < before {
                m.congestion.reductions += 1;
            }
        }
        let window = m.controller.window();
        m.loss.on_feedback(fb.nsent, lost, window);
        self.note_if_idle(now, mf);
        self.after_change(now, mf);
        Ok(())
    }

    /// Apply exponential aging steps that are due (sigcomm1999 §4.4): with
    /// data outstanding and no feedback for a round trip, halve the rate,
    /// then again every half-life (minimum RTT or srtt, per config).
    pub(crate) fn age(&mut self, now: Instant, mf: MacroflowId) {
        let Some(due) = self.aging_due(mf) else {
            return;
        };
        if now < due {
            return;
        }
        let (mode, initial_rto) = (self.cfg.aging, self.cfg.initial_rto);
        let Some(m) = self.macroflows.get_mut(mf.key()) else {
            return;
        };
        let half_life = match mode {
            Aging::MinRtt => m.rtt.min_rtt().or(m.rtt.srtt()),
            Aging::Srtt => m.rtt.srtt(),
            Aging::Off => return,
        }
        .unwrap_or(initial_rto)
        // Never below the clock granularity G that also delays the trigger
        // (RFC 6298 §2.2): a half-life of a few µs (a loopback minimum RTT)
        // would turn a 1 ms scheduling stall into a hundred halvings.
        .max(self.cfg.aging_grace)
        .max(Duration::from_micros(1));
        // The open-loop rate starts from window/srtt; with no RTT sample at
        // all, from window / initial RTO (RFC 6298 §2.1's conservative RTT),
        // never unpaced: open loop means no feedback to stop a burst.
        // At most one window per half-life, though: the paper's half-life is
        // about one RTT, so rate0/2 over the first half-life sends half a
        // window and the whole open loop about one. With the half-life
        // floored at G above a µs RTT, window/srtt would send G/srtt windows
        // (a hundred on loopback) into a path that has stopped answering.
        let window = m.controller.window();
        let per_half_life = Rate::per(window, half_life).unwrap_or(Rate::ZERO);
        let rate0 = m
            .controller
            .rate(m.rtt.srtt())
            .or_else(|| Rate::per(window, initial_rto))
            .map_or(Rate::ZERO, |r| r.min(per_half_life));
        let st = m.aging.get_or_insert(AgingState {
            steps: 0,
            next: due,
            rate0,
        });
        let mut taken = 0;
        while st.next <= now && taken < MAX_AGING_CATCH_UP {
            st.steps = st.steps.saturating_add(1);
            m.controller
                .on_feedback_timeout(&AgingEvent::new(now, st.steps));
            st.next += half_life;
            taken += 1;
        }
        if st.next <= now {
            st.next = now + half_life;
        }
    }

    /// When the next aging step is due, if aging applies at all.
    pub(crate) fn aging_due(&self, mf: MacroflowId) -> Option<Instant> {
        if self.cfg.aging == Aging::Off {
            return None;
        }
        let m = self.macroflows.get(mf.key())?;
        if m.in_flight == Bytes::ZERO {
            return None;
        }
        if let Some(a) = m.aging {
            // The open-loop rate has halved to zero: nothing is left to age,
            // and feedback (or the flows' own timers) must restart the loop.
            if a.steps > 0 && a.rate() == Rate::ZERO {
                return None;
            }
            return Some(a.next);
        }
        // "triggered when the CM does not receive a response ... within a
        // round-trip time" (sigcomm1999 §4.4). A response counts as late
        // only past the round trip's expected upper bound, srtt +
        // max(G, 4 rttvar) (RFC 6298 §2.2 without its 1 s floor, which is
        // about retransmission safety, not lateness): with the bare srtt,
        // microsecond loopback RTTs and scheduler jitter age an ack-clocked
        // flow's window away although every packet is acknowledged.
        let late = match (m.rtt.srtt(), m.rtt.rttvar()) {
            (Some(srtt), Some(var)) => srtt + self.cfg.aging_grace.max(var.saturating_mul(4)),
            (Some(srtt), None) => srtt + self.cfg.aging_grace,
            _ => self.cfg.initial_rto,
        };
        // A rate-based controller's receiver reports once per control
        // interval, not per packet, and a slow sender's receiver has
        // nothing to report between its packets: its feedback is late only
        // past RFC 5348 §4.4's no-feedback timer, max(4R, 2s/X). Four
        // round trips, and four packet times at the controller's rate
        // (which cover a packet bunch of three, iscc §VI-B, and the next
        // one). ACK-clocked windows keep the papers' rule.
        let packets = if m.controller.rate_based() {
            let four_rtts = m.rtt.srtt().map_or(Duration::ZERO, |r| r.saturating_mul(4));
            m.controller
                .rate(m.rtt.srtt())
                .and_then(|r| r.time_to_send(Bytes(m.mtu.get().saturating_mul(4))))
                .unwrap_or(Duration::ZERO)
                .max(four_rtts)
        } else {
            Duration::ZERO
        };
        Some(m.feedback_clock + late.max(packets))
    }

    /// `cm_register_update`: turn rate-change events for this flow on or off.
    /// Turning them on reports the current estimate at once (if any), then
    /// whenever the thresholds are crossed.
    pub fn set_rate_updates(&mut self, now: Instant, flow: FlowId, on: bool) -> Result<(), Error> {
        let now = self.tick(now);
        let defaults = self.cfg.default_thresholds;
        let f = self
            .flows
            .get_mut(flow.key())
            .ok_or(Error::UnknownFlow(flow))?;
        let mf = f.macroflow;
        let was = f.updates.is_some();
        if on && !was {
            f.updates = Some(Subscription {
                thresholds: defaults,
                last: None,
            });
        } else if !on {
            f.updates = None;
        }
        let client = f.client;
        self.touch(now, client);
        if let Some(m) = self.macroflows.get_mut(mf.key()) {
            if on && !was {
                m.subscribers.push(flow);
            } else if !on && was {
                if let Some(i) = m.subscribers.iter().position(|&x| x == flow) {
                    m.subscribers.swap_remove(i);
                }
            }
        }
        self.check_thresholds(now, mf);
        Ok(())
    }

    /// `cm_thresh`: set the flow's rate/RTT change factors (and subscribe it
    /// to rate-change events).
    pub fn set_thresholds(
        &mut self,
        now: Instant,
        flow: FlowId,
        t: Thresholds,
    ) -> Result<(), Error> {
        t.validate()?;
        self.set_rate_updates(now, flow, true)?;
        if let Some(sub) = self
            .flows
            .get_mut(flow.key())
            .and_then(|f| f.updates.as_mut())
        {
            sub.thresholds = t;
        }
        Ok(())
    }

    /// Emit rate-change events for subscribed flows whose thresholds were
    /// crossed (cm-implementation-linux §2.1.2 (iii)).
    pub(crate) fn check_thresholds(&mut self, _now: Instant, mf: MacroflowId) {
        let Some(m) = self.macroflows.get(mf.key()) else {
            return;
        };
        if m.subscribers.is_empty() {
            return;
        }
        for &flow in &m.subscribers {
            let Some(f) = self.flows.get_mut(flow.key()) else {
                continue;
            };
            let est = estimate(m, f);
            let (Some(rate), Some(srtt)) = (est.rate, est.srtt) else {
                continue;
            };
            let Some(sub) = f.updates.as_mut() else {
                continue;
            };
            let cur = (rate, srtt);
            if sub
                .last
                .is_none_or(|last| sub.thresholds.crossed(last, cur))
            {
                sub.last = Some(cur);
                self.events.push_back(Event::RateUpdate {
                    flow,
                    estimate: est,
                });
            }
        }
    }
}

/// A flow's view of its macroflow: its weighted share of the rate, and the
/// shared RTT and loss estimates.
pub(crate) fn estimate(m: &Macroflow, f: &Flow) -> PathEstimate {
    let rate = m
        .controller
        .rate(m.rtt.srtt())
        .map(|r| r.scale(u64::from(f.weight), m.total_weight.max(u64::from(f.weight))));
    PathEstimate {
        rate,
        srtt: m.rtt.srtt(),
        rttvar: m.rtt.rttvar(),
        loss: m.loss.fraction(),
    }
}
