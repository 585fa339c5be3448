//! X_recv, the receive rate over the last round trip (RFC 5348 §3.2.2,
//! §4.3), measured at the sender from the bytes that feedback reports as
//! received.
//!
//! RFC 5348's receiver measures the rate at which data arrived since its
//! last feedback (about one RTT) and reports it. The CM's sender has the
//! same information one half round trip later: the bytes each report says
//! were received. The meter sums them over a measurement period of at
//! least one RTT; when a report ends a period, X_recv is the sum over the
//! period's length. Bytes of the report that opens a period arrived before
//! it and are not counted.

use crate::time::{Duration, Instant};
use crate::units::Bytes;

/// The per-RTT accumulator behind X_recv.
#[derive(Clone, Debug, Default)]
pub(crate) struct ReceiveRate {
    /// When the current measurement period started; `None` until a report
    /// opens one.
    start: Option<Instant>,
    /// Bytes reported received since `start`.
    bytes: u64,
    /// The last complete measurement, bytes per second.
    x_recv: Option<f64>,
}

impl ReceiveRate {
    /// Bytes reported received at `now`; a period of at least `rtt` ends
    /// with this report and yields a new X_recv.
    pub(crate) fn on_received(&mut self, now: Instant, bytes: Bytes, rtt: Duration) {
        let Some(start) = self.start else {
            self.start = Some(now);
            self.bytes = 0;
            return;
        };
        self.bytes = self.bytes.saturating_add(bytes.0);
        let elapsed = now.saturating_since(start);
        if elapsed.is_zero() || elapsed < rtt {
            return;
        }
        let x = self.bytes as f64 / elapsed.as_secs_f64();
        if x.is_finite() {
            self.x_recv = Some(x);
        }
        self.start = Some(now);
        self.bytes = 0;
    }

    /// The last X_recv, bytes per second.
    pub(crate) fn get(&self) -> Option<f64> {
        self.x_recv
    }

    /// Cap X_recv at `x` (RFC 5348 §4.4: the no-feedback timer halves the
    /// receive-rate limit, so the reduction holds until new feedback
    /// measures the path again).
    pub(crate) fn cap(&mut self, x: f64) {
        if !x.is_nan() {
            self.x_recv = Some(self.x_recv.map_or(x, |v| v.min(x)));
        }
    }

    /// Start a new measurement period at the next report (after an idle
    /// period, which must not count as a period of slow receiving).
    pub(crate) fn restart(&mut self) {
        self.start = None;
        self.bytes = 0;
    }
}
