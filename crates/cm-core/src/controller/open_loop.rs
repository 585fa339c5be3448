//! Rate-based increase-decrease control, open loop between loss reports
//! (iscc §II eq. 2): the NACK-based streaming the ISCC paper studies. The
//! rate changes at most once per control interval `R`: down by `R_D(x)` if
//! the interval's report says something was lost (`f > 0`), up by `R_I(x)`
//! if it says nothing was (`f = 0`).
//!
//! One driver serves every rate-based law: binomial schemes
//! ([`BinomialConfig`]) and ISCC ([`IsccConfig`]).
//!
//! Timing rules, for reports that arrive with real delays and jitter:
//! - a report may step the rate if at least ¾ R passed since the last step
//!   (reports sent once per `R` arrive with queueing jitter; a strict `R`
//!   would skip every other one);
//! - losses reported within one smoothed RTT after a decrease are for data
//!   sent before it took effect, and do not decrease again (one reduction
//!   per window of data, as TCP's; iscc §VII on delayed feedback). With
//!   immediate feedback (the model of iscc §V-B) no RTT is known and every
//!   lossy interval decreases.

use crate::controller::binomial::BinomialConfig;
use crate::controller::iscc::IsccConfig;
use crate::controller::{AckEvent, AgingEvent, CongestionEvent, Controller, IdleEvent};
use crate::time::{Duration, Instant};
use crate::units::{Bytes, Rate};

/// The control interval before any RTT sample (RFC 6298 §2.1's initial RTO).
const NO_RTT_INTERVAL: Duration = Duration::from_secs(1);

/// Which increase-decrease law an [`OpenLoop`] runs.
#[derive(Clone, Debug, PartialEq)]
pub enum Law {
    /// A binomial scheme (iscc eq. 3).
    Binomial(BinomialConfig),
    /// ISCC(l) on the macroflow's capacity (iscc eqs. 34–36).
    Iscc(IsccConfig),
}

/// A rate-based increase-decrease controller.
#[derive(Clone, Debug)]
pub struct OpenLoop {
    law: Law,
    mtu: Bytes,
    /// The sending rate, bytes per second.
    x: f64,
    /// Doubling per interval until the first loss.
    slow_start: bool,
    last_step: Option<Instant>,
    last_decrease: Option<Instant>,
    srtt: Option<Duration>,
    /// The capacity `C`, bytes per second, once known.
    capacity: Option<f64>,
    /// The configured capacity, used while no estimate is known.
    configured_capacity: Option<f64>,
    /// Steps taken: (increases, decreases), for inspection.
    steps: (u64, u64),
    /// The previous report's time and the rate it showed received.
    last_report: Option<Instant>,
    x_recv: Option<f64>,
}

impl OpenLoop {
    /// A controller running `law` for a macroflow with the given MTU.
    pub fn new(law: Law, mtu: Bytes) -> Self {
        let mtu = Bytes(mtu.0.max(1));
        let (slow_start, capacity) = match &law {
            Law::Binomial(c) => (c.slow_start, None),
            Law::Iscc(c) => (c.slow_start, c.capacity.map(|r| r.bytes_per_sec() as f64)),
        };
        let mut s = OpenLoop {
            law,
            mtu,
            x: 0.0,
            slow_start,
            last_step: None,
            last_decrease: None,
            srtt: None,
            capacity: capacity.filter(|c| *c > 0.0),
            configured_capacity: capacity.filter(|c| *c > 0.0),
            steps: (0, 0),
            last_report: None,
            x_recv: None,
        };
        s.x = s.initial();
        s.clamp();
        s
    }

    /// The exact sending rate in bytes per second (the [`Rate`] the trait
    /// returns is rounded down to whole bytes).
    pub fn rate_bytes_per_sec(&self) -> f64 {
        self.x
    }

    /// Set the rate (bytes per second), e.g. to start a model run from a
    /// chosen state; clamped to the law's bounds.
    pub fn set_rate_bytes_per_sec(&mut self, x: f64) {
        if x.is_finite() {
            self.x = x;
            self.clamp();
        }
    }

    /// Leave slow start (as after a first loss).
    pub fn end_slow_start(&mut self) {
        self.slow_start = false;
    }

    /// Increases and decreases taken so far.
    pub fn steps(&self) -> (u64, u64) {
        self.steps
    }

    /// The law it runs.
    pub fn law(&self) -> &Law {
        &self.law
    }

    fn configured_interval(&self) -> Option<Duration> {
        match &self.law {
            Law::Binomial(c) => c.interval,
            Law::Iscc(c) => c.interval,
        }
    }

    /// The control interval `R`: configured, else the smoothed RTT.
    pub fn interval(&self) -> Duration {
        self.configured_interval()
            .or(self.srtt)
            .unwrap_or(NO_RTT_INTERVAL)
            .max(Duration::from_micros(1))
    }

    fn per_interval(&self, mtus: u64) -> f64 {
        (mtus * self.mtu.0) as f64 / self.interval().as_secs_f64()
    }

    fn initial(&self) -> f64 {
        let configured = match &self.law {
            Law::Binomial(c) => c.initial_rate,
            Law::Iscc(c) => c.initial_rate,
        };
        configured.map_or_else(|| self.per_interval(2), |r| r.bytes_per_sec() as f64)
    }

    fn min_rate(&self) -> f64 {
        let configured = match &self.law {
            Law::Binomial(c) => c.min_rate,
            Law::Iscc(c) => c.min_rate,
        };
        configured
            .map_or_else(|| self.per_interval(1), |r| r.bytes_per_sec() as f64)
            .max(1.0)
    }

    /// The binomial law in force: the configured one, or ISCC's fallback
    /// while no capacity is known.
    fn binomial(&self) -> Option<&BinomialConfig> {
        match &self.law {
            Law::Binomial(c) => Some(c),
            Law::Iscc(c) if self.capacity.is_none() => Some(&c.fallback),
            Law::Iscc(_) => None,
        }
    }

    /// `MTU/RTT` for the binomial constants (iscc eq. 4).
    fn unit(&self, c: &BinomialConfig) -> f64 {
        c.mtu_per_rtt.map_or_else(
            || self.mtu.0 as f64 / self.srtt.unwrap_or(self.interval()).as_secs_f64(),
            |r| r.bytes_per_sec() as f64,
        )
    }

    fn clamp(&mut self) {
        let mut lo = self.min_rate();
        let mut x = if self.x.is_finite() { self.x } else { lo };
        if let (Law::Iscc(_), Some(c)) = (&self.law, self.capacity) {
            // iscc §V-D: "each application will limit its sending rate to be
            // no higher than C", and a floor above C cannot be carried
            // either: the capacity wins.
            x = x.min(c);
            lo = lo.min(c);
        }
        self.x = x.max(lo);
    }

    fn increase(&mut self) {
        let x = self.x;
        let step = if self.slow_start {
            // Double, but never past twice what the last report showed
            // received (RFC 5348 §4.3: X = min(2X, 2 X_recv)): an open-loop
            // sender's reports lag a filling queue, so doubling alone would
            // overshoot the path many times over.
            self.x_recv.map_or(x, |r| (2.0 * x).min(2.0 * r) - x)
        } else if let Some(b) = self.binomial() {
            b.increase(x, self.unit(b))
        } else if let (Law::Iscc(c), Some(cap)) = (&self.law, self.capacity) {
            c.increase(x, cap)
        } else {
            0.0
        };
        self.x = x + step;
        if self.slow_start
            && let (Law::Iscc(_), Some(c)) = (&self.law, self.capacity)
            && self.x >= c
        {
            self.slow_start = false;
        }
        self.steps.0 += 1;
        self.clamp();
    }

    fn decrease(&mut self) {
        let x = self.x;
        let step = if let Some(b) = self.binomial() {
            b.decrease(x, self.unit(b))
        } else if let (Law::Iscc(c), Some(cap)) = (&self.law, self.capacity) {
            c.decrease(x, cap)
        } else {
            0.0
        };
        // Slow start overshoots by up to a doubling: leaving it halves at
        // least, as TCP does (RFC 5681 §3.1).
        let step = if self.slow_start {
            step.max(x / 2.0)
        } else {
            step
        };
        self.slow_start = false;
        self.x = x - step;
        self.steps.1 += 1;
        self.clamp();
    }

    fn may_step(&self, now: Instant) -> bool {
        let gap = Duration::from_micros(self.interval().as_micros() * 3 / 4);
        self.last_step.is_none_or(|t| now >= t + gap)
    }

    fn window_for(&self) -> Bytes {
        // Open loop: the window only bounds what is outstanding if reports
        // stop, at four control intervals (or smoothed RTTs) of data.
        let span = self.interval().max(self.srtt.unwrap_or(Duration::ZERO));
        let w = self.x * span.as_secs_f64() * 4.0;
        let w = if w.is_finite() { w.min(1e12) as u64 } else { 0 };
        Bytes(w.max(4 * self.mtu.0))
    }
}

impl Controller for OpenLoop {
    fn name(&self) -> &'static str {
        match &self.law {
            Law::Binomial(c) => c.name(),
            Law::Iscc(_) => "iscc",
        }
    }

    fn window(&self) -> Bytes {
        self.window_for()
    }

    fn rate(&self, _srtt: Option<Duration>) -> Option<Rate> {
        Some(Rate::from_bytes_per_sec(self.x as u64))
    }

    fn pacing_rate(&self, srtt: Option<Duration>) -> Option<Rate> {
        self.rate(srtt)
    }

    fn in_slow_start(&self) -> bool {
        self.slow_start
    }

    fn rate_based(&self) -> bool {
        true
    }

    fn set_mtu(&mut self, mtu: Bytes) {
        self.mtu = Bytes(mtu.0.max(1));
        self.clamp();
    }

    fn on_ack(&mut self, ev: &AckEvent) {
        self.srtt = ev.srtt.or(self.srtt);
        if let Some(prev) = self.last_report {
            let dt = ev.now.saturating_since(prev).as_secs_f64();
            if dt > 0.0 {
                self.x_recv = Some(ev.acked.get() as f64 / dt);
            }
        }
        self.last_report = Some(ev.now);
        // A report with losses decreases in on_congestion; its received
        // half is no "f = 0" (iscc eq. 2).
        if ev.acked == Bytes::ZERO || ev.lost_in_report > Bytes::ZERO {
            return;
        }
        if self.may_step(ev.now) {
            self.increase();
            self.last_step = Some(ev.now);
        }
    }

    fn on_congestion(&mut self, ev: &CongestionEvent) {
        self.srtt = ev.srtt.or(self.srtt);
        let echo = self
            .last_decrease
            .zip(self.srtt)
            .is_some_and(|(t, rtt)| ev.now < t + rtt);
        if echo || !self.may_step(ev.now) {
            return;
        }
        // A timeout (persistent congestion) is one more lossy interval:
        // eq. 2 knows only increase and decrease, and an open-loop sender
        // paced at its rate has no window to restart from. (A NACK-based
        // receiver that got nothing sends nothing, so a sender's timeout is
        // how a wholly lost burst shows up at low rates.)
        self.decrease();
        self.last_step = Some(ev.now);
        self.last_decrease = Some(ev.now);
    }

    fn on_feedback_timeout(&mut self, _ev: &AgingEvent) {
        // sigcomm1999 §4.4: halve the open-loop rate per half-life without
        // feedback (RFC 5348 §4.4's no-feedback timer does the same).
        self.x /= 2.0;
        self.clamp();
    }

    fn on_idle_restart(&mut self, ev: &IdleEvent) {
        // RFC 2861 §3 in rate form: halve per RTO idle, not below the
        // initial rate.
        if ev.rto.is_zero() || ev.idle < ev.rto {
            return;
        }
        let periods = (ev.idle.as_micros() / ev.rto.as_micros()).min(63) as i32;
        let restart = self.initial().min(self.x);
        self.x = (self.x / 2f64.powi(periods)).max(restart);
        self.clamp();
    }

    /// The rate another CM reached on this path: `window / srtt`, out of
    /// slow start (as AIMD resumes into congestion avoidance). Without an
    /// RTT the controller keeps its own start.
    fn resume(&mut self, window: Bytes, srtt: Option<Duration>) {
        let Some(r) = srtt.filter(|r| !r.is_zero()) else {
            return;
        };
        self.srtt = Some(r);
        self.set_rate_bytes_per_sec(window.get() as f64 / r.as_secs_f64());
        self.slow_start = false;
    }

    fn set_capacity(&mut self, capacity: Option<Rate>) {
        self.capacity = capacity
            .map(|r| r.bytes_per_sec() as f64)
            .filter(|c| *c > 0.0)
            .or(self.configured_capacity);
        self.clamp();
    }
}
