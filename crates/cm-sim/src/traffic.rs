//! Built-in traffic hosts that need no transport: a constant-bit-rate
//! source and a counting sink (engine tests, benchmarks, cross traffic).

use std::any::Any;

use cm_core::{Bytes, Duration, Instant, Rate};

use crate::host::{Ctx, Host};
use crate::packet::{FlowTag, NodeId, Packet, Payload};

/// Sends a copy of one payload to `dst` every `interval`, from `start`
/// (inclusive) until `stop` (exclusive). Ignores packets it receives.
#[derive(Clone, Debug)]
pub struct CbrSource<P> {
    dst: NodeId,
    flow: FlowTag,
    payload: P,
    interval: Duration,
    next: Instant,
    stop: Instant,
    sent: u64,
    send_errors: u64,
}

impl<P: Payload> CbrSource<P> {
    /// A source sending every `interval` (a zero interval is treated as 1 µs).
    pub fn with_interval(
        dst: NodeId,
        flow: FlowTag,
        payload: P,
        interval: Duration,
        start: Instant,
        stop: Instant,
    ) -> Self {
        CbrSource {
            dst,
            flow,
            payload,
            interval: interval.max(Duration::from_micros(1)),
            next: start,
            stop,
            sent: 0,
            send_errors: 0,
        }
    }

    /// A source sending at `rate` (wire bytes per second); the interval is
    /// `wire_len / rate` rounded up to 1 µs. `None` at rate zero.
    pub fn with_rate(
        dst: NodeId,
        flow: FlowTag,
        payload: P,
        rate: Rate,
        start: Instant,
        stop: Instant,
    ) -> Option<Self> {
        let interval = rate.time_to_send(Bytes(u64::from(payload.wire_len())))?;
        Some(Self::with_interval(
            dst, flow, payload, interval, start, stop,
        ))
    }

    /// Packets handed to the engine.
    pub fn sent(&self) -> u64 {
        self.sent
    }

    /// Sends refused by the engine (no route, bad destination).
    pub fn send_errors(&self) -> u64 {
        self.send_errors
    }

    /// The sending interval.
    pub fn interval(&self) -> Duration {
        self.interval
    }
}

impl<P: Payload + 'static> Host<P> for CbrSource<P> {
    fn on_packet(&mut self, _now: Instant, _pkt: Packet<P>, _ctx: &mut Ctx<'_, P>) {}

    fn on_timer(&mut self, now: Instant, ctx: &mut Ctx<'_, P>) {
        while self.next <= now && self.next < self.stop {
            match ctx.send(self.dst, self.flow, self.payload.clone()) {
                Ok(_) => self.sent += 1,
                Err(_) => self.send_errors += 1,
            }
            self.next += self.interval;
        }
    }

    fn next_timer(&self) -> Option<Instant> {
        (self.next < self.stop).then_some(self.next)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// Counts what it receives; optionally records every arrival.
#[derive(Clone, Debug, Default)]
pub struct Sink {
    /// Packets received.
    pub packets: u64,
    /// Bytes received.
    pub bytes: u64,
    /// First arrival time.
    pub first: Option<Instant>,
    /// Last arrival time.
    pub last: Option<Instant>,
    record: bool,
    /// `(arrival time, packet id, flow)` of every packet, if recording.
    pub arrivals: Vec<(Instant, u64, FlowTag)>,
}

impl Sink {
    /// A sink that only counts.
    pub fn new() -> Self {
        Self::default()
    }

    /// A sink that also records every arrival.
    pub fn recording() -> Self {
        Sink {
            record: true,
            ..Self::default()
        }
    }
}

impl<P: Payload> Host<P> for Sink {
    fn on_packet(&mut self, now: Instant, pkt: Packet<P>, _ctx: &mut Ctx<'_, P>) {
        self.packets += 1;
        self.bytes += u64::from(pkt.wire_len());
        self.first.get_or_insert(now);
        self.last = Some(now);
        if self.record {
            self.arrivals.push((now, pkt.id, pkt.flow));
        }
    }

    fn on_timer(&mut self, _now: Instant, _ctx: &mut Ctx<'_, P>) {}

    fn next_timer(&self) -> Option<Instant> {
        None
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
