//! Macroflows: flows that share one congestion state (cm-implementation-linux
//! §2): one controller, one RTT estimator, one shaper, one scheduler.

use std::collections::VecDeque;

use crate::bandwidth::CapacityFilter;
use crate::controller::{AnyController, Controller};
use crate::flow::{CongestionCounters, MacroflowKey};
use crate::id::FlowId;
use crate::rtt::RttEstimator;
use crate::scheduler::AnyScheduler;
use crate::shaper::Shaper;
use crate::time::Instant;
use crate::units::{Bytes, Rate};

/// Exponential-aging state while feedback is missing (sigcomm1999 §4.4).
#[derive(Clone, Copy, Debug)]
pub(crate) struct AgingState {
    /// Halvings taken so far.
    pub steps: u32,
    /// When the next halving is due.
    pub next: Instant,
    /// The rate when feedback stopped; the open-loop rate is
    /// `rate0 / 2^steps`, decaying on below the controller's window floor.
    /// Always known: without an RTT sample it is window / initial RTO, so
    /// open-loop sending is never unpaced.
    pub rate0: Rate,
}

impl AgingState {
    /// The open-loop rate after `steps` halvings: `rate0 / 2^steps`.
    pub fn rate(&self) -> Rate {
        Rate::from_bytes_per_sec(self.rate0.bytes_per_sec() >> self.steps.min(63))
    }
}

/// Recent loss fraction, weighted by bytes over about eight windows.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct LossEstimator {
    sent: f64,
    lost: f64,
}

impl LossEstimator {
    pub fn on_feedback(&mut self, nsent: Bytes, lost: Bytes, window: Bytes) {
        if nsent.0 == 0 {
            return;
        }
        let horizon = (window.0 as f64 * 8.0).max(1.0);
        let keep = (1.0 - nsent.0 as f64 / horizon).max(0.0);
        self.sent = self.sent * keep + nsent.0 as f64;
        self.lost = self.lost * keep + lost.0 as f64;
    }

    pub fn fraction(&self) -> Option<f64> {
        (self.sent > 0.0).then(|| (self.lost / self.sent).clamp(0.0, 1.0))
    }
}

/// A grant's expiry, queued per macroflow in grant order.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Expiry {
    pub deadline: Instant,
    pub flow: FlowId,
    pub seq: u64,
}

/// The shared state of a group of flows.
#[derive(Clone, Debug)]
pub(crate) struct Macroflow {
    /// The default-aggregation key, `None` for macroflows made by `set_macroflow`.
    pub key: Option<MacroflowKey>,
    pub controller: AnyController,
    pub rtt: RttEstimator,
    pub shaper: Shaper,
    pub scheduler: AnyScheduler,
    pub mtu: Bytes,
    pub flows: Vec<FlowId>,
    pub total_weight: u64,
    /// Flows subscribed to rate updates.
    pub subscribers: Vec<FlowId>,
    /// Bytes notified as sent and not yet resolved by feedback.
    pub in_flight: Bytes,
    /// Bytes granted and not yet notified.
    pub reserved: Bytes,
    /// A request waited for window room since the last feedback.
    pub window_blocked: bool,
    pub expiry: VecDeque<Expiry>,
    /// Last feedback, or the start of the current flight if none since.
    pub feedback_clock: Instant,
    pub aging: Option<AgingState>,
    /// Since when nothing was in flight, granted or requested.
    pub idle_since: Option<Instant>,
    /// Since when the macroflow has had no flows.
    pub empty_since: Option<Instant>,
    /// The wake-up time registered in the timer heap.
    pub armed: Option<Instant>,
    pub loss: LossEstimator,
    pub created: Instant,
    /// The bottleneck capacity estimate every flow of the macroflow shares
    /// (iscc §VI-B), handed to the controller when it changes.
    pub capacity: Option<Rate>,
    /// The packet-bunch samples of all its flows, filtered into a capacity
    /// estimate (iscc §VI-B; `CongestionManager::capacity_sample`).
    pub filter: CapacityFilter,
    /// The controller as it was before a reduction that may prove false
    /// (sigcomm1999 §4.2.2; `CongestionManager::checkpoint`).
    pub checkpoint: Option<AnyController>,
    /// How long a byte waits for the report that resolves it beyond an
    /// ACK-clocked flow's round trip, in thousandths of an RTT, when the
    /// feedback comes in batches (probe responses, sigcomm1999 §4.2.1);
    /// `None`: per-packet acknowledgements.
    pub feedback_lag: Option<u16>,
    /// The loss events and timeouts its controller answered.
    pub congestion: CongestionCounters,
}

impl Macroflow {
    pub fn new(
        now: Instant,
        key: Option<MacroflowKey>,
        controller: AnyController,
        scheduler: AnyScheduler,
        shaper: Shaper,
        mtu: Bytes,
    ) -> Self {
        Macroflow {
            key,
            controller,
            rtt: RttEstimator::new(),
            shaper,
            scheduler,
            mtu,
            flows: Vec::new(),
            total_weight: 0,
            subscribers: Vec::new(),
            in_flight: Bytes::ZERO,
            reserved: Bytes::ZERO,
            window_blocked: false,
            expiry: VecDeque::new(),
            feedback_clock: now,
            aging: None,
            idle_since: Some(now),
            empty_since: Some(now),
            armed: None,
            loss: LossEstimator::default(),
            created: now,
            capacity: None,
            checkpoint: None,
            feedback_lag: None,
            filter: CapacityFilter::default(),
            congestion: CongestionCounters::default(),
        }
    }

    /// Whether nothing is in flight, granted or waiting.
    pub fn is_idle(&self) -> bool {
        self.in_flight == Bytes::ZERO && self.reserved == Bytes::ZERO && self.scheduler_empty()
    }

    fn scheduler_empty(&self) -> bool {
        use crate::scheduler::Scheduler;
        self.scheduler.is_empty()
    }

    /// The rate the shaper releases grants at: the controller's pacing rate
    /// in closed loop; while aging, the rate when feedback stopped halved
    /// once per half-life (sigcomm1999 §4.4), which keeps falling
    /// exponentially even after the window reaches its one-MTU floor.
    pub fn shaping_rate(&self) -> Option<Rate> {
        match self.aging {
            Some(a) if a.steps > 0 => Some(a.rate()),
            _ => self.controller.pacing_rate(self.rtt.srtt()),
        }
    }

    /// Room in the window for new grants (closed-loop mode).
    ///
    /// With batched feedback a byte stays "in flight" until the report
    /// after it: `feedback_lag` (a fraction f of an RTT) longer than under
    /// per-packet acknowledgements (f = 1/(2n) for n probes per RTT, a
    /// quarter at the paper's two). A window-limited sender would then run
    /// at window / (RTT (1 + f)) instead of window / RTT, the rate TCP's
    /// window and the TCP-friendly equation assume. The window check
    /// allows that lag's worth more, window × f (at most one window), so a
    /// silent peer still stops the sender.
    pub fn window_space(&self) -> Bytes {
        let w = self.controller.window();
        let lag = self.feedback_lag.map_or(Bytes::ZERO, |f| {
            Bytes(w.get().saturating_mul(u64::from(f.min(1000))) / 1000)
        });
        (w + lag).saturating_sub(self.in_flight + self.reserved)
    }
}
