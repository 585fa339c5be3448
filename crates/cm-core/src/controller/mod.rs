//! Congestion controllers: one trait for window- and rate-based schemes.
//!
//! A controller owns the macroflow's congestion state and exposes a window
//! and a pacing rate (DESIGN.md "Controllers behind one trait"). Hooks take
//! small `#[non_exhaustive]` event structs so later controllers (binomial,
//! ISCC, TFRC) can read more fields without changing every signature.

mod aimd;

pub use aimd::{Aimd, AimdConfig};

use core::fmt;

use crate::time::{Duration, Instant};
use crate::units::{Bytes, Rate};

/// Bytes were acknowledged as received (application or transport feedback).
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct AckEvent {
    /// When the feedback arrived.
    pub now: Instant,
    /// Bytes newly known to have been received (byte counting, not ACK counting).
    pub acked: Bytes,
    /// Bytes in flight on the macroflow before this feedback was applied.
    pub in_flight_before: Bytes,
    /// The macroflow's smoothed RTT after this feedback, if known.
    pub srtt: Option<Duration>,
    /// Requests waited for window room since the last feedback: the window,
    /// not the application, limited the macroflow (RFC 7661 §3's
    /// "cwnd-limited"), whatever the bytes in flight. Grants reserve whole
    /// MTUs, so a flow of small packets is held back by its grants long
    /// before its bytes in flight fill the window.
    pub window_limited: bool,
}

/// Why the window must shrink.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CongestionKind {
    /// A loss within a window, e.g. TCP duplicate ACKs (sigcomm1999 §3.1 TRANSIENT).
    Transient,
    /// An ECN congestion-experienced mark echoed by the receiver (RFC 3168).
    Ecn,
    /// Persistent congestion, e.g. a TCP retransmission timeout (PERSISTENT).
    Persistent,
}

/// The network signalled congestion.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct CongestionEvent {
    /// When the signal arrived.
    pub now: Instant,
    /// Transient loss, ECN or persistent congestion.
    pub kind: CongestionKind,
    /// Bytes reported lost with this signal (may be zero for ECN).
    pub lost: Bytes,
    /// Bytes in flight on the macroflow when the signal arrived.
    pub in_flight: Bytes,
    /// The macroflow's smoothed RTT, if known.
    pub srtt: Option<Duration>,
}

/// Bytes were handed to the network.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct SentEvent {
    /// When they were sent.
    pub now: Instant,
    /// How many bytes.
    pub bytes: Bytes,
    /// Bytes in flight after the send.
    pub in_flight: Bytes,
}

/// No feedback has arrived for a round trip while data was outstanding:
/// one step of exponential aging (sigcomm1999 §4.4).
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct AgingEvent {
    /// When the step is taken.
    pub now: Instant,
    /// 1 for the first halving after feedback stopped, 2 for the next, ...
    pub step: u32,
}

/// The macroflow becomes active again after an idle period.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct IdleEvent {
    /// When activity resumed.
    pub now: Instant,
    /// How long nothing was in flight or requested.
    pub idle: Duration,
    /// The retransmission-timeout bound used to count idle periods.
    pub rto: Duration,
}

/// A congestion controller for one macroflow.
pub trait Controller: fmt::Debug + Send {
    /// Short name for `cm stat` and logs.
    fn name(&self) -> &'static str;
    /// The congestion window: bytes that may be in flight (never below one MTU).
    fn window(&self) -> Bytes;
    /// The sustainable rate reported to applications, `None` with no estimate.
    fn rate(&self, srtt: Option<Duration>) -> Option<Rate>;
    /// The rate at which the shaper releases grants; `None` means unpaced.
    fn pacing_rate(&self, srtt: Option<Duration>) -> Option<Rate>;
    /// Whether the controller is probing exponentially (slow start).
    fn in_slow_start(&self) -> bool;
    /// The maximum transmission unit changed.
    fn set_mtu(&mut self, mtu: Bytes);
    /// Feedback: bytes received.
    fn on_ack(&mut self, ev: &AckEvent);
    /// Feedback: congestion.
    fn on_congestion(&mut self, ev: &CongestionEvent);
    /// Bytes were sent (for controllers that track send times).
    fn on_sent(&mut self, _ev: &SentEvent) {}
    /// One half-life passed without feedback while data was outstanding.
    fn on_feedback_timeout(&mut self, ev: &AgingEvent);
    /// The macroflow restarts after being idle.
    fn on_idle_restart(&mut self, ev: &IdleEvent);
}

/// Which controller a macroflow runs, with its parameters.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum ControllerConfig {
    /// The papers' window-based AIMD with slow start (sigcomm1999 §4.1).
    Aimd(AimdConfig),
}

impl Default for ControllerConfig {
    fn default() -> Self {
        ControllerConfig::Aimd(AimdConfig::default())
    }
}

impl ControllerConfig {
    /// Build a controller for a macroflow with the given MTU.
    pub fn build(&self, mtu: Bytes) -> AnyController {
        match self {
            ControllerConfig::Aimd(c) => AnyController::Aimd(Aimd::new(c.clone(), mtu)),
        }
    }
}

/// Static dispatch over the controllers the core ships.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum AnyController {
    /// Window-based AIMD.
    Aimd(Aimd),
}

macro_rules! dispatch {
    ($self:ident, $c:ident => $e:expr) => {
        match $self {
            AnyController::Aimd($c) => $e,
        }
    };
}

impl Controller for AnyController {
    fn name(&self) -> &'static str {
        dispatch!(self, c => c.name())
    }
    fn window(&self) -> Bytes {
        dispatch!(self, c => c.window())
    }
    fn rate(&self, srtt: Option<Duration>) -> Option<Rate> {
        dispatch!(self, c => c.rate(srtt))
    }
    fn pacing_rate(&self, srtt: Option<Duration>) -> Option<Rate> {
        dispatch!(self, c => c.pacing_rate(srtt))
    }
    fn in_slow_start(&self) -> bool {
        dispatch!(self, c => c.in_slow_start())
    }
    fn set_mtu(&mut self, mtu: Bytes) {
        dispatch!(self, c => c.set_mtu(mtu))
    }
    fn on_ack(&mut self, ev: &AckEvent) {
        dispatch!(self, c => c.on_ack(ev))
    }
    fn on_congestion(&mut self, ev: &CongestionEvent) {
        dispatch!(self, c => c.on_congestion(ev))
    }
    fn on_sent(&mut self, ev: &SentEvent) {
        dispatch!(self, c => c.on_sent(ev))
    }
    fn on_feedback_timeout(&mut self, ev: &AgingEvent) {
        dispatch!(self, c => c.on_feedback_timeout(ev))
    }
    fn on_idle_restart(&mut self, ev: &IdleEvent) {
        dispatch!(self, c => c.on_idle_restart(ev))
    }
}

impl AckEvent {
    /// An acknowledgement event (for drivers and tests of custom controllers).
    pub fn new(
        now: Instant,
        acked: Bytes,
        in_flight_before: Bytes,
        srtt: Option<Duration>,
    ) -> Self {
        AckEvent {
            now,
            acked,
            in_flight_before,
            srtt,
            window_limited: false,
        }
    }

    /// The same event, with whether requests waited for window room.
    pub fn with_window_limited(mut self, limited: bool) -> Self {
        self.window_limited = limited;
        self
    }
}

impl CongestionEvent {
    /// A congestion event.
    pub fn new(
        now: Instant,
        kind: CongestionKind,
        lost: Bytes,
        in_flight: Bytes,
        srtt: Option<Duration>,
    ) -> Self {
        CongestionEvent {
            now,
            kind,
            lost,
            in_flight,
            srtt,
        }
    }
}

impl SentEvent {
    /// A send event.
    pub fn new(now: Instant, bytes: Bytes, in_flight: Bytes) -> Self {
        SentEvent {
            now,
            bytes,
            in_flight,
        }
    }
}

impl AgingEvent {
    /// An aging step.
    pub fn new(now: Instant, step: u32) -> Self {
        AgingEvent { now, step }
    }
}

impl IdleEvent {
    /// An idle-restart event.
    pub fn new(now: Instant, idle: Duration, rto: Duration) -> Self {
        IdleEvent { now, idle, rto }
    }
}
