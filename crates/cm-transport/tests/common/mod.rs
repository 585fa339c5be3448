//! A tiny deterministic test pipe: one bottleneck direction with a rate and
//! a DropTail queue, a fixed one-way delay both ways, and an optional list
//! of forward data segments (by ordinal, counting retransmissions) to drop.
//! Not a simulator: just enough to drive a TcpSender/TcpReceiver pair.
#![allow(dead_code, clippy::unwrap_used)]

use std::collections::{BTreeSet, VecDeque};

use cm_core::{Config, CongestionManager, Duration, Event, FlowId, Instant, OpenParams};
use cm_transport::{CmCall, Flags, SackBlocks, TcpReceiver, TcpSegment, TcpSender};

/// One forward data transmission seen by the pipe.
#[derive(Clone, Copy, Debug)]
pub struct Sent {
    pub at: Instant,
    pub seq: u64,
    pub len: u32,
    pub dropped: bool,
}

pub struct Pipe {
    pub delay: Duration,
    /// Bottleneck rate, bytes/s (forward direction).
    pub rate: u64,
    /// DropTail limit in packets waiting (not counting the one in service).
    pub queue_limit: usize,
    /// Forward data segments to drop, by ordinal (0 = first data segment).
    pub drop_data: BTreeSet<u64>,
    data_ordinal: u64,
    link_free: Instant,
    waiting: VecDeque<Instant>,
    /// (arrival, order, to_receiver, segment)
    flight: Vec<(Instant, u64, bool, TcpSegment)>,
    order: u64,
    pub log: Vec<Sent>,
    pub queue_drops: u64,
}

impl Pipe {
    pub fn new(delay_ms: u64, rate_bytes_per_sec: u64, queue_limit: usize) -> Self {
        Pipe {
            delay: Duration::from_millis(delay_ms),
            rate: rate_bytes_per_sec,
            queue_limit,
            drop_data: BTreeSet::new(),
            data_ordinal: 0,
            link_free: Instant::ZERO,
            waiting: VecDeque::new(),
            flight: Vec::new(),
            order: 0,
            log: Vec::new(),
            queue_drops: 0,
        }
    }

    pub fn drop(mut self, ordinals: &[u64]) -> Self {
        self.drop_data.extend(ordinals);
        self
    }

    pub fn forward(&mut self, now: Instant, s: TcpSegment) {
        let mut dropped = false;
        if s.len > 0 {
            dropped = self.drop_data.contains(&self.data_ordinal);
            self.data_ordinal += 1;
        }
        while self.waiting.front().is_some_and(|&t| t <= now) {
            self.waiting.pop_front();
        }
        if !dropped && self.waiting.len() >= self.queue_limit {
            dropped = true;
            self.queue_drops += 1;
        }
        if s.len > 0 {
            self.log.push(Sent {
                at: now,
                seq: s.seq,
                len: s.len,
                dropped,
            });
        }
        if dropped {
            return;
        }
        let start = self.link_free.max(now);
        let tx = Duration::from_micros(u64::from(s.wire_len()) * 1_000_000 / self.rate);
        self.link_free = start + tx;
        if start > now {
            self.waiting.push_back(start);
        }
        self.push(self.link_free + self.delay, true, s);
    }

    pub fn reverse(&mut self, now: Instant, s: TcpSegment) {
        self.push(now + self.delay, false, s);
    }

    fn push(&mut self, at: Instant, fwd: bool, s: TcpSegment) {
        self.order += 1;
        self.flight.push((at, self.order, fwd, s));
    }

    pub fn next_arrival(&self) -> Option<Instant> {
        self.flight.iter().map(|f| f.0).min()
    }

    /// The earliest arrival due at `now`, FIFO among equal times.
    pub fn pop_due(&mut self, now: Instant) -> Option<(bool, TcpSegment)> {
        let i = self
            .flight
            .iter()
            .enumerate()
            .filter(|(_, f)| f.0 <= now)
            .min_by_key(|(_, f)| (f.0, f.1))
            .map(|(i, _)| i)?;
        let (_, _, fwd, s) = self.flight.swap_remove(i);
        Some((fwd, s))
    }
}

/// A TCP/CM sender's CM: the real core with one flow.
pub struct Cm {
    pub cm: CongestionManager,
    pub flow: FlowId,
    pub calls: Vec<CmCall>,
}

impl Cm {
    pub fn new() -> Self {
        Cm::with_config(Config::default())
    }

    pub fn with_config(cfg: Config) -> Self {
        let mut cm = CongestionManager::new(cfg).unwrap();
        let c = cm.register_client(Instant::ZERO).unwrap();
        let flow = cm
            .open(
                Instant::ZERO,
                c,
                OpenParams::to("192.0.2.1:80".parse().unwrap()),
            )
            .unwrap();
        Cm {
            cm,
            flow,
            calls: Vec::new(),
        }
    }

    pub fn in_flight(&self) -> u64 {
        let mf = self.cm.macroflow_of(self.flow).unwrap();
        self.cm.macroflow_info(mf).unwrap().in_flight.get()
    }
}

pub struct Conn {
    pub snd: TcpSender,
    pub rcv: TcpReceiver,
    pub pipe: Pipe,
    pub cm: Option<Cm>,
    pub now: Instant,
    /// (time, cwnd, ssthresh) after every segment the sender processes.
    pub trace: Vec<(Instant, Option<u64>, Option<u64>)>,
    pub established_at: Option<Instant>,
}

impl Conn {
    pub fn new(snd: TcpSender, rcv: TcpReceiver, pipe: Pipe, cm: Option<Cm>) -> Self {
        Conn {
            snd,
            rcv,
            pipe,
            cm,
            now: Instant::ZERO,
            trace: Vec::new(),
            established_at: None,
        }
    }

    fn forward_calls(&mut self) {
        let now = self.now;
        let Some(cm) = self.cm.as_mut() else { return };
        while let Some(call) = self.snd.poll_cm() {
            cm.calls.push(call);
            match call {
                CmCall::Request => cm.cm.request(now, cm.flow).unwrap(),
                CmCall::RequestMtus(k) => cm.cm.request_mtus(now, cm.flow, k).unwrap(),
                CmCall::Notify(n) => cm.cm.notify(now, cm.flow, n).unwrap(),
                CmCall::Update(fb) => cm.cm.update(now, cm.flow, fb).unwrap(),
            }
        }
    }

    /// Emit everything that is ready at `now`.
    fn drain(&mut self) {
        let now = self.now;
        loop {
            let mut progress = false;
            while let Some(s) = self.snd.poll_transmit(now) {
                self.pipe.forward(now, s);
                progress = true;
            }
            self.forward_calls();
            while let Some(ev) = self.cm.as_mut().and_then(|c| c.cm.poll_event()) {
                if let Event::Grant { bytes, .. } = ev {
                    if let Some(s) = self.snd.on_grant(now, bytes) {
                        self.pipe.forward(now, s);
                    }
                    self.forward_calls();
                    progress = true;
                }
            }
            while let Some(a) = self.rcv.poll_transmit(now) {
                self.pipe.reverse(now, a);
            }
            if !progress {
                break;
            }
        }
    }

    /// One event step; false when nothing is left to happen.
    pub fn step(&mut self) -> bool {
        self.drain();
        let next = [
            self.pipe.next_arrival(),
            self.snd.poll_timeout(),
            self.rcv.poll_timeout(),
            self.cm.as_mut().and_then(|c| c.cm.poll_timeout()),
        ]
        .into_iter()
        .flatten()
        .min();
        let Some(next) = next else { return false };
        self.now = self.now.max(next);
        let now = self.now;
        while let Some((fwd, s)) = self.pipe.pop_due(now) {
            if fwd {
                self.rcv.handle_segment(now, &s);
            } else {
                self.snd.handle_segment(now, &s);
                if self.established_at.is_none() && self.snd.is_established() {
                    self.established_at = Some(now);
                }
                let st = self.snd.stats();
                self.trace.push((now, st.cwnd, st.ssthresh));
            }
        }
        if self.snd.poll_timeout().is_some_and(|t| t <= now) {
            self.snd.handle_timeout(now);
        }
        if self.rcv.poll_timeout().is_some_and(|t| t <= now) {
            self.rcv.handle_timeout(now);
        }
        if let Some(c) = self.cm.as_mut() {
            if c.cm.poll_timeout().is_some_and(|t| t <= now) {
                c.cm.handle_timeout(now);
            }
        }
        self.forward_calls();
        true
    }

    /// Step until `done` or `limit` is passed; returns whether `done` held.
    pub fn run_until(&mut self, limit: Instant, mut done: impl FnMut(&Conn) -> bool) -> bool {
        while self.now <= limit {
            if done(self) {
                return true;
            }
            if !self.step() {
                return done(self);
            }
        }
        false
    }

    /// Times at which the data byte at `seq` was transmitted.
    pub fn sends_of(&self, seq: u64) -> Vec<Instant> {
        self.pipe
            .log
            .iter()
            .filter(|s| s.seq == seq)
            .map(|s| s.at)
            .collect()
    }
}

pub fn secs(s: u64) -> Instant {
    Instant::from_micros(s * 1_000_000)
}

/// A pure ACK from the receiver (port 2 to port 1) acknowledging `ack`, with
/// `flags` and SACK blocks `sack`, for driving a sender by hand.
pub fn ack_segment(ack: u64, flags: Flags, sack: &[(u64, u64)]) -> TcpSegment {
    TcpSegment {
        src_port: 2,
        dst_port: 1,
        seq: 1,
        ack,
        flags,
        wnd: 1 << 24,
        len: 0,
        ts_val: 0,
        ts_ecr: 0,
        sack: SackBlocks::from_blocks(sack).unwrap(),
    }
}
