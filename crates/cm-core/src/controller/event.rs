//! The events a [`Controller`](super::Controller) reacts to, one struct
//! per hook. Each is `#[non_exhaustive]` so a later controller can read a new
//! field without changing every signature; drivers build them with `new`.

use crate::time::{Duration, Instant};
use crate::units::Bytes;

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
    /// Bytes the same report says were lost, when it carried a congestion
    /// signal: the manager calls [`Controller::on_congestion`] right after
    /// this hook. Rate-based controllers take one step per report (iscc
    /// §II eq. 2: increase only when the interval's feedback `f = 0`), so
    /// they must not increase on the received half of a report whose lost
    /// half decreases.
    ///
    /// [`Controller::on_congestion`]: super::Controller::on_congestion
    pub lost_in_report: Bytes,
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
    /// When the most recently sent of the lost bytes left the sender, if
    /// the transport said ([`Feedback::lost_sent`]).
    ///
    /// [`Feedback::lost_sent`]: crate::Feedback::lost_sent
    pub lost_sent: Option<Instant>,
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
            lost_in_report: Bytes::ZERO,
        }
    }

    /// The same event, with the bytes the same report says were lost.
    pub fn with_lost_in_report(mut self, lost: Bytes) -> Self {
        self.lost_in_report = lost;
        self
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
            lost_sent: None,
        }
    }

    /// The same event, with when the most recently sent of the lost bytes
    /// left the sender.
    pub fn with_lost_sent(mut self, at: Option<Instant>) -> Self {
        self.lost_sent = at;
        self
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
