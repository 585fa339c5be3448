//! What a simulated connection records: start and finish times, and
//! optional time series for plots (sigcomm1999 Fig 5 style traces).

use cm_core::Instant;
use serde::Serialize;

/// One sample of a time series: `(time in seconds, value)`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct TracePoint {
    /// Simulated time, seconds.
    pub t: f64,
    /// The sampled value.
    pub v: f64,
}

/// The record of one TCP connection.
#[derive(Clone, Debug, Default)]
pub struct ConnRecord {
    /// When the connection was opened (SYN sent).
    pub start: Option<Instant>,
    /// When the last data byte was acknowledged (finite transfers only).
    pub finish: Option<Instant>,
    /// Transfer size, bytes (`None` = bulk).
    pub bytes: Option<u64>,
    /// Whether series below are recorded.
    pub tracing: bool,
    /// Sequence number (bytes, relative to the first data byte) of every
    /// data segment sent, at its send time.
    pub seq: Vec<TracePoint>,
    /// Cumulative bytes acknowledged, sampled on every ACK.
    pub acked: Vec<TracePoint>,
    /// Congestion window in bytes (NewReno cwnd, or the CM macroflow's
    /// window for TCP/CM), sampled on every ACK.
    pub window: Vec<TracePoint>,
}

impl ConnRecord {
    /// Transfer time (start to finish), seconds.
    pub fn transfer_secs(&self) -> Option<f64> {
        Some((self.finish? - self.start?).as_secs_f64())
    }

    pub(crate) fn push(series: &mut Vec<TracePoint>, now: Instant, v: u64) {
        series.push(TracePoint {
            t: secs(now),
            v: v as f64,
        });
    }
}

/// An instant in seconds.
pub fn secs(t: Instant) -> f64 {
    t.as_micros() as f64 / 1e6
}
