//! ALF senders on a simulated CM host, and a receiver that reports what it
//! got — per packet or only now and then.
//!
//! The sender host owns one `cm_core::CongestionManager`, exactly as the
//! daemon does, and runs always-backlogged request/callback applications
//! (sigcomm1999 §3.1, "put the application in control"): each keeps a
//! request pending, sends one datagram per `cmapp_send` grant, notifies, and
//! turns the receiver's reports into `cm_update` calls (§4.2.2, application
//! notification). The receiver's report interval sets how scarce feedback
//! is, which is what exponential aging (§4.4) is for.
//!
//! Both ends run CC-UDP's sans-IO feedback loop, the code libcm's
//! `CcUdpSocket` ships (`cm_transport::ccudp`): data carries its
//! [`DataHeader`], the receiver's [`AckState`] makes the acks, and the
//! sender's [`Accounting`] turns them into `cm_update` feedback. The host
//! does not run the accounting's retransmission timeout: between sparse
//! reports an ALF sender is in open loop, which the CM's own aging handles
//! (sigcomm1999 §4.4); calling that silence persistent congestion would
//! take the experiment away.
//!
//! An app may send in packet bunches (iscc §VI-B): it asks for a whole
//! burst of grants at once after pausing one burst interval, so the CM's
//! shaper releases them back to back; the receiver's
//! [`cm_core::BunchSampler`] takes one bottleneck-capacity sample per burst
//! and returns the samples with its next report, and the sender hands them
//! to `CongestionManager::capacity_sample`, which keeps one estimate per
//! macroflow for controllers that use it (ISCC).

use std::any::Any;

use cm_core::bandwidth::BurstTag;
use cm_core::{
    BunchSampler, BurstSchedule, Bytes, ClientId, Config, CongestionManager, Duration, Event,
    FlowId, Instant, OpenParams, Rate,
};
use cm_sim::{Ctx, FlowTag, Host, NodeId, Packet, Payload};
use cm_transport::ccudp::feedback::Accounting;
use cm_transport::ccudp::receiver::{AckPolicy, AckState};
use cm_transport::ccudp::wire::{self, Ack, DataHeader};

/// The fake address app `i` of a sender host opens its flow to: one IP per
/// destination node, so flows to the same host share a macroflow
/// (cm-implementation-linux §2), and one port per app.
pub(crate) fn app_addr(dst: NodeId, i: usize) -> Option<std::net::SocketAddr> {
    format!("10.0.{}.{}:{}", dst.0 >> 8, dst.0 & 255, 5000 + i)
        .parse()
        .ok()
}

/// Why an ALF experiment could not run.
#[derive(Debug, thiserror::Error)]
pub enum AlfError {
    /// The topology was rejected.
    #[error(transparent)]
    Topology(#[from] cm_sim::TopologyError),
    /// The CM configuration was rejected.
    #[error(transparent)]
    Config(#[from] cm_core::ConfigError),
    /// The sender host was not found after the run.
    #[error("the ALF sender host is missing from the simulation")]
    MissingHost,
}

/// IP + UDP header bytes added to every datagram on the wire.
const HEADERS: u32 = 28;
/// Bytes a report takes on the simulated wire. A CC-UDP ack is
/// `ACK_LEN + HEADERS` = 80 bytes; the experiments' checks are calibrated
/// with 40 (the scheduler's convergence bins move with the reverse path's
/// timing), so reports keep that size.
const REPORT_WIRE_LEN: u32 = 40;

/// What travels in an ALF experiment.
#[derive(Clone, Debug)]
pub enum AlfPacket {
    /// A CC-UDP datagram of app `app`: `len` bytes, its header included.
    Data {
        /// The sending application (index on its host).
        app: u32,
        /// The CC-UDP header (session = `app`).
        header: DataHeader,
        /// Bytes of the datagram (as granted and notified).
        len: u32,
        /// Its place in a packet bunch, if the app sends bunches.
        burst: Option<BurstTag>,
    },
    /// The receiver's CC-UDP ack for app `app`.
    Report {
        /// The application reported on.
        app: u32,
        /// The ack.
        ack: Ack,
        /// Capacity samples taken since the last report (iscc §VI-B).
        samples: Vec<Rate>,
    },
    /// Cross traffic (not CM-controlled).
    Cross {
        /// Bytes on the wire.
        len: u32,
    },
}

impl Payload for AlfPacket {
    fn wire_len(&self) -> u32 {
        match self {
            AlfPacket::Data { len, .. } => len + HEADERS,
            AlfPacket::Report { .. } => REPORT_WIRE_LEN,
            AlfPacket::Cross { len } => *len,
        }
    }
}

/// One always-backlogged request/callback application.
#[derive(Clone, Debug)]
pub struct AlfApp {
    /// Destination host.
    pub dst: NodeId,
    /// Flow tag for the simulator's per-flow statistics.
    pub tag: FlowTag,
    /// When it opens its flow and starts sending.
    pub start: Instant,
    /// Scheduler weight (sigcomm1999 §4.6).
    pub weight: u32,
    flow: Option<FlowId>,
    /// What was sent and what became of it (CC-UDP's sender side).
    acct: Accounting,
    /// Bytes the receiver reported, sampled at every report.
    pub progress: Vec<(Instant, u64)>,
    /// Bytes sent.
    pub sent_bytes: u64,
    /// Bytes reported lost.
    pub lost_bytes: u64,
    /// Packet bunches, if the app sends them.
    bursts: Option<BurstSchedule>,
    /// When the next bunch may be requested.
    next_burst: Option<Instant>,
    /// When the last bunch's last packet went out, and the shaper credit
    /// (bytes) it left.
    burst_done: Option<(Instant, i64)>,
    /// When its macroflow was first seen out of slow start.
    pub slow_start_end: Option<Instant>,
    /// Whether the sender runs CC-UDP's retransmission timeout.
    timeouts: bool,
    /// Why `cm_open` refused the app's flow, if it did.
    pub open_error: Option<String>,
}

impl AlfApp {
    /// An app sending to `dst` from `start`, with scheduler weight `weight`.
    pub fn new(dst: NodeId, tag: FlowTag, start: Instant, weight: u32) -> Self {
        AlfApp {
            dst,
            tag,
            start,
            weight,
            flow: None,
            acct: Accounting::new(),
            progress: Vec::new(),
            sent_bytes: 0,
            lost_bytes: 0,
            bursts: None,
            next_burst: None,
            burst_done: None,
            slow_start_end: None,
            timeouts: false,
            open_error: None,
        }
    }

    /// The same app, running CC-UDP's retransmission timeout: when no
    /// report resolves anything for an RTO while datagrams are out, they
    /// are reported lost as persistent congestion (RFC 6298; `CM_NO_FEEDBACK`).
    /// A streaming sender needs it: a receiver that got nothing sends no
    /// report, and without the timeout a flow whose whole window was lost
    /// would wait for feedback forever.
    pub fn with_timeouts(mut self) -> Self {
        self.timeouts = true;
        self
    }

    /// The same app, for a receiver that acknowledges once per RTT: the
    /// retransmission timeout waits one smoothed RTT longer
    /// (`Accounting::acks_once_per_rtt`).
    pub fn with_acks_once_per_rtt(mut self) -> Self {
        self.acct = std::mem::take(&mut self.acct).acks_once_per_rtt();
        self
    }

    /// The same app, sending bunches of `len` packets (at least 3).
    pub fn with_bursts(mut self, len: u8) -> Result<Self, cm_core::ConfigError> {
        self.bursts = Some(BurstSchedule::new(len)?);
        Ok(self)
    }

    /// The sender's CC-UDP accounting (counters of acked and lost datagrams).
    pub fn accounting(&self) -> &Accounting {
        &self.acct
    }

    /// Bytes the receiver has reported by `t`.
    pub fn received_by(&self, t: Instant) -> u64 {
        let i = self.progress.partition_point(|&(at, _)| at <= t);
        if i == 0 { 0 } else { self.progress[i - 1].1 }
    }
}

/// A host running the CM and ALF applications.
#[derive(Debug)]
pub struct AlfSender {
    cm: CongestionManager,
    client: ClientId,
    /// The applications, in the order given.
    pub apps: Vec<AlfApp>,
    /// `(time, window, shaping rate bytes/s)` of the first app's macroflow
    /// at every report, for plots.
    pub window_trace: Vec<(Instant, u64, u64)>,
    /// The CM's next wake-up, refreshed after every callback.
    wake: Option<Instant>,
}

impl AlfSender {
    /// A host with the CM configured by `cfg`. The host is the CM's one
    /// client for the whole run, so the client silence timeout is off (an
    /// app that starts after it would find its client reclaimed).
    pub fn new(cfg: Config, apps: Vec<AlfApp>) -> Result<Self, cm_core::ConfigError> {
        let cfg = Config {
            client_timeout: None,
            ..cfg
        };
        let mut cm = CongestionManager::new(cfg)?;
        let client = cm
            .register_client(Instant::ZERO)
            .map_err(|e| cm_core::ConfigError(e.to_string()))?;
        Ok(AlfSender {
            cm,
            client,
            apps,
            window_trace: Vec::new(),
            wake: None,
        })
    }

    /// The congestion manager (for inspection).
    pub fn cm(&self) -> &CongestionManager {
        &self.cm
    }

    fn start_due(&mut self, now: Instant) {
        for (i, app) in self.apps.iter_mut().enumerate() {
            if app.flow.is_some() || app.start > now || app.open_error.is_some() {
                continue;
            }
            let Some(addr) = app_addr(app.dst, i) else {
                continue;
            };
            let flow = match self.cm.open(now, self.client, OpenParams::to(addr)) {
                Ok(f) => f,
                Err(e) => {
                    // Never retried: a timer at a start that cannot happen
                    // would fire forever.
                    app.open_error = Some(e.to_string());
                    continue;
                }
            };
            let _ = self.cm.set_weight(now, flow, app.weight);
            if app.bursts.is_some() {
                app.next_burst = Some(now);
            } else {
                // Keep a few MTUs requested so the app is always backlogged.
                let _ = self.cm.request_mtus(now, flow, 4);
            }
            app.flow = Some(flow);
        }
    }

    /// Bunch senders whose pause is over ask for a whole burst at once,
    /// once the shaper has the credit to release it back to back (its
    /// bucket holds two MTUs, so a 3-packet bunch needs it full): a rate
    /// cut during the pause would otherwise space the bunch out and turn
    /// its sample into a measure of the sender's pacing.
    fn request_bursts(&mut self, now: Instant) {
        for app in &mut self.apps {
            let (Some(flow), Some(b)) = (app.flow, app.bursts.as_ref()) else {
                continue;
            };
            if app.next_burst.is_none_or(|t| t > now) {
                continue;
            }
            let mtu = self.cm.mtu(flow).map_or(1, |m| m.get().max(1)) as f64;
            let rate = self.cm.query(flow).ok().and_then(|q| q.rate);
            if let (Some((t0, c0)), Some(r)) = (app.burst_done, rate) {
                let r = r.bytes_per_sec().max(1) as f64;
                let credit = c0 as f64 + r * now.saturating_since(t0).as_secs_f64();
                let need = (f64::from(b.remaining()) - 1.0) * mtu;
                if credit < need {
                    let wait = (need - credit) / r;
                    app.next_burst = Some(now + Duration::from_micros((wait * 1e6) as u64 + 1));
                    continue;
                }
            }
            app.next_burst = None;
            let _ = self.cm.request_mtus(now, flow, u32::from(b.remaining()));
        }
    }

    /// `cmapp_send`: one datagram per grant, `cm_notify`, then ask again.
    fn serve(&mut self, now: Instant, ctx: &mut Ctx<'_, AlfPacket>) {
        while let Some(ev) = self.cm.poll_event() {
            let Event::Grant { flow, bytes } = ev else {
                continue;
            };
            let Some(i) = self.apps.iter().position(|a| a.flow == Some(flow)) else {
                continue;
            };
            let mtu = self.cm.mtu(flow).map_or(1, |m| m.get().max(1));
            let app = &mut self.apps[i];
            // One datagram per grant; a bunch sender sends one per MTU of
            // it, so each packet of the bunch carries its tag.
            let mut left = bytes.get();
            let mut sent = Bytes::ZERO;
            while left > 0 {
                let chunk = if app.bursts.is_some() {
                    left.min(mtu)
                } else {
                    left
                };
                left -= chunk;
                let len = u32::try_from(chunk).unwrap_or(u32::MAX);
                let header = DataHeader {
                    session: i as u16,
                    seq: app.acct.next_seq(),
                    ts: wire::timestamp(now),
                };
                let burst = app.bursts.as_mut().map(BurstSchedule::next_packet);
                let data = AlfPacket::Data {
                    app: i as u32,
                    header,
                    len,
                    burst,
                };
                if ctx.send(app.dst, app.tag, data).is_ok() {
                    app.acct.on_queued(len as usize);
                    app.acct.on_departed(now);
                    app.sent_bytes += chunk;
                    sent += Bytes(chunk);
                }
            }
            let _ = self.cm.notify(now, flow, sent);
            if let Some(b) = self.apps[i].bursts.as_ref() {
                // A bunch is complete: pause one burst interval at the
                // current rate (iscc §VI-B), then ask for the next.
                if b.starts_burst() {
                    let rate = self.cm.query(flow).ok().and_then(|q| q.rate);
                    let gap = rate
                        .and_then(|r| b.burst_interval(r, Bytes(mtu)))
                        .unwrap_or(Duration::from_millis(100));
                    let credit = self
                        .cm
                        .macroflow_of(flow)
                        .and_then(|m| self.cm.macroflow_info(m))
                        .map_or(0, |m| m.shaper_credit);
                    self.apps[i].next_burst = Some(now + gap);
                    self.apps[i].burst_done = Some((now, credit));
                }
                continue;
            }
            // Ask again for what was granted: always backlogged.
            let k = u32::try_from(bytes.get() / mtu).unwrap_or(1).max(1);
            let _ = self.cm.request_mtus(now, flow, k);
        }
        self.wake = self.cm.poll_timeout();
    }

    /// An ack: CC-UDP's accounting says what it resolved (sigcomm1999
    /// §4.2.2: nsent vs nrecd between reports), and that goes to
    /// `cm_update`.
    fn on_report(&mut self, now: Instant, app: u32, ack: &Ack, samples: &[Rate]) {
        let Some(a) = self.apps.get_mut(app as usize) else {
            return;
        };
        let Some(flow) = a.flow else { return };
        a.progress.push((now, ack.recv_bytes));
        for &s in samples {
            let _ = self.cm.capacity_sample(now, flow, s);
        }
        let Some(fb) = a.acct.on_ack(now, ack) else {
            return;
        };
        a.lost_bytes += fb.nsent.get() - fb.nrecd.get();
        let _ = self.cm.update(now, flow, fb);
        if a.slow_start_end.is_none() {
            let out = self
                .cm
                .macroflow_of(flow)
                .and_then(|m| self.cm.macroflow_info(m))
                .is_ok_and(|m| !m.slow_start);
            if out {
                a.slow_start_end = Some(now);
            }
        }
        if app == 0 {
            let info = self
                .cm
                .macroflow_of(flow)
                .and_then(|m| self.cm.macroflow_info(m));
            if let Ok(m) = info {
                let rate = m.shaping_rate.map_or(0, |r| r.bytes_per_sec());
                self.window_trace.push((now, m.window.get(), rate));
            }
        }
    }
}

impl Host<AlfPacket> for AlfSender {
    fn start(&mut self, now: Instant, ctx: &mut Ctx<'_, AlfPacket>) {
        self.start_due(now);
        self.serve(now, ctx);
    }

    fn on_packet(&mut self, now: Instant, pkt: Packet<AlfPacket>, ctx: &mut Ctx<'_, AlfPacket>) {
        if let AlfPacket::Report { app, ack, samples } = pkt.payload {
            self.on_report(now, app, &ack, &samples);
        }
        self.serve(now, ctx);
    }

    fn on_timer(&mut self, now: Instant, ctx: &mut Ctx<'_, AlfPacket>) {
        self.start_due(now);
        for a in self.apps.iter_mut().filter(|a| a.timeouts) {
            let Some(flow) = a.flow else { continue };
            if let Some(fb) = a.acct.handle_timeout(now) {
                a.lost_bytes += fb.nsent.get() - fb.nrecd.get();
                let _ = self.cm.update(now, flow, fb);
            }
        }
        self.request_bursts(now);
        self.cm.handle_timeout(now);
        self.serve(now, ctx);
    }

    fn next_timer(&self) -> Option<Instant> {
        let start = self
            .apps
            .iter()
            .filter(|a| a.flow.is_none() && a.open_error.is_none())
            .map(|a| a.start)
            .chain(self.apps.iter().filter_map(|a| a.next_burst))
            .chain(
                self.apps
                    .iter()
                    .filter(|a| a.timeouts && a.flow.is_some())
                    .filter_map(|a| a.acct.poll_timeout()),
            )
            .min();
        match (self.wake, start) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// How often the receiver reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reporting {
    /// A report for every data packet (as TCP's per-packet ACKs).
    EveryPacket,
    /// A report per app every `interval`, if anything arrived since the last
    /// (infrequent feedback, sigcomm1999 §4.2.1).
    Every(Duration),
}

/// One app's receive side: CC-UDP's ack state, the bunch sampler, and
/// where acks go.
#[derive(Debug)]
struct RxApp {
    acks: AckState,
    sender: Option<(NodeId, FlowTag)>,
    sampler: BunchSampler,
    /// Samples not yet reported.
    pending: Vec<Rate>,
}

/// The receiving host of ALF apps.
#[derive(Debug)]
pub struct AlfReceiver {
    policy: AckPolicy,
    apps: Vec<RxApp>,
    /// Every capacity sample taken: (when, app, sample).
    pub samples: Vec<(Instant, u32, Rate)>,
    /// Whether reports carry the report wait (see [`AlfReceiver::with_echo_delay`]).
    echo_delay: bool,
}

impl AlfReceiver {
    /// A receiver reporting as `reporting` says.
    pub fn new(reporting: Reporting) -> Self {
        AlfReceiver {
            policy: match reporting {
                Reporting::EveryPacket => AckPolicy::Every(1),
                Reporting::Every(d) => AckPolicy::Period(d),
            },
            apps: Vec::new(),
            samples: Vec::new(),
            echo_delay: false,
        }
    }

    /// The same receiver, reporting how long the newest datagram waited
    /// for the report, as the shipped CC-UDP receiver does, so the sender's
    /// RTT samples are the path's (rate-based controllers use the RTT as
    /// their control interval, TFRC in its equation).
    pub fn with_echo_delay(mut self) -> Self {
        self.echo_delay = true;
        self
    }

    fn send(&mut self, i: usize, ack: Option<Ack>, ctx: &mut Ctx<'_, AlfPacket>) {
        let (Some(mut ack), Some((to, tag))) = (ack, self.apps[i].sender) else {
            return;
        };
        // By default the experiments' receiver does not time how long the
        // newest datagram waited for the report: its RTT samples include
        // that wait (up to one report interval), as the aging experiment's
        // checks are calibrated with. The shipped CC-UDP receiver reports
        // the wait and the sender subtracts it; with it, sparse reports
        // give the true path RTT and both half-lives age alike in the
        // quick sweep (302 vs 302 lost).
        if !self.echo_delay {
            ack.echo_delay_us = 0;
        }
        let samples = std::mem::take(&mut self.apps[i].pending);
        let report = AlfPacket::Report {
            app: i as u32,
            ack,
            samples,
        };
        let _ = ctx.send(to, tag, report);
    }
}

impl Host<AlfPacket> for AlfReceiver {
    fn on_packet(&mut self, now: Instant, pkt: Packet<AlfPacket>, ctx: &mut Ctx<'_, AlfPacket>) {
        let wire = pkt.payload.wire_len();
        let AlfPacket::Data {
            app,
            header,
            len,
            burst,
        } = pkt.payload
        else {
            return;
        };
        let i = app as usize;
        while self.apps.len() <= i {
            self.apps.push(RxApp {
                acks: AckState::new(self.policy),
                sender: None,
                sampler: BunchSampler::new(),
                pending: Vec::new(),
            });
        }
        let a = &mut self.apps[i];
        if let Some(b) = burst {
            let sample = a
                .sampler
                .on_packet(now, b.burst, b.index, b.len, Bytes(u64::from(wire)));
            if let Some(s) = sample {
                a.pending.push(s);
                self.samples.push((now, app, s));
            }
        }
        a.sender = Some((pkt.src, pkt.flow));
        a.acks.on_data(&header, len as usize, now);
        if a.acks.ack_due() {
            let ack = a.acks.take_ack(now);
            self.send(i, ack, ctx);
        }
    }

    fn on_timer(&mut self, now: Instant, ctx: &mut Ctx<'_, AlfPacket>) {
        for i in 0..self.apps.len() {
            let ack = self.apps[i].acks.handle_timeout(now);
            self.send(i, ack, ctx);
        }
    }

    fn next_timer(&self) -> Option<Instant> {
        self.apps.iter().filter_map(|a| a.acks.poll_timeout()).min()
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
