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

use std::any::Any;
use std::collections::VecDeque;

use cm_core::{
    Bytes, ClientId, Config, CongestionManager, Duration, Event, Feedback, FlowId, Instant,
    LossMode, OpenParams,
};
use cm_sim::{Ctx, FlowTag, Host, NodeId, Packet, Payload};

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

/// What travels in an ALF experiment.
#[derive(Clone, Debug)]
pub enum AlfPacket {
    /// Application data: `len` payload bytes of app `app`, number `seq`.
    Data {
        /// The sending application (index on its host).
        app: u32,
        /// Per-app sequence number.
        seq: u64,
        /// Payload bytes.
        len: u32,
    },
    /// The receiver's report: cumulative counts and the newest packet seen,
    /// with that packet's send time echoed for an RTT sample.
    Report {
        /// The application reported on.
        app: u32,
        /// Highest sequence number received so far.
        highest_seq: u64,
        /// Payload bytes received so far (cumulative).
        received_bytes: u64,
        /// When `highest_seq` was sent.
        echo: Instant,
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
            AlfPacket::Report { .. } => 40,
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
    next_seq: u64,
    /// Sent and not yet reported: (seq, bytes).
    unresolved: VecDeque<(u64, u64)>,
    received_reported: u64,
    /// Payload bytes the receiver reported, sampled at every report.
    pub progress: Vec<(Instant, u64)>,
    /// Payload bytes sent.
    pub sent_bytes: u64,
    /// Payload bytes reported lost.
    pub lost_bytes: u64,
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
            next_seq: 0,
            unresolved: VecDeque::new(),
            received_reported: 0,
            progress: Vec::new(),
            sent_bytes: 0,
            lost_bytes: 0,
        }
    }

    /// Payload bytes the receiver has reported by `t`.
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
    /// A host with the CM configured by `cfg`.
    pub fn new(cfg: Config, apps: Vec<AlfApp>) -> Result<Self, cm_core::ConfigError> {
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
            if app.flow.is_some() || app.start > now {
                continue;
            }
            // Fake addresses: one per destination node, so flows to the same
            // host share a macroflow (cm-implementation-linux §2).
            let dst = format!("10.0.{}.{}:{}", app.dst.0 >> 8, app.dst.0 & 255, 5000 + i);
            let Ok(addr) = dst.parse() else { continue };
            let Ok(flow) = self.cm.open(now, self.client, OpenParams::to(addr)) else {
                continue;
            };
            let _ = self.cm.set_weight(now, flow, app.weight);
            // Keep a few MTUs requested so the app is always backlogged.
            let _ = self.cm.request_mtus(now, flow, 4);
            app.flow = Some(flow);
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
            let app = &mut self.apps[i];
            let seq = app.next_seq;
            let len = u32::try_from(bytes.get()).unwrap_or(u32::MAX);
            let data = AlfPacket::Data {
                app: i as u32,
                seq,
                len,
            };
            let sent = if ctx.send(app.dst, app.tag, data).is_ok() {
                app.next_seq += 1;
                app.sent_bytes += bytes.get();
                app.unresolved.push_back((seq, bytes.get()));
                bytes
            } else {
                Bytes::ZERO
            };
            let _ = self.cm.notify(now, flow, sent);
            // Ask again for what was granted: always backlogged.
            let mtu = self.cm.mtu(flow).map_or(1, |m| m.get().max(1));
            let k = u32::try_from(bytes.get() / mtu).unwrap_or(1).max(1);
            let _ = self.cm.request_mtus(now, flow, k);
        }
        self.wake = self.cm.poll_timeout();
    }

    /// A report resolves every packet up to `highest_seq`: what the
    /// cumulative count says arrived was received, the rest lost
    /// (sigcomm1999 §4.2.2: nsent vs nrecd between reports).
    fn on_report(&mut self, now: Instant, app: u32, highest: u64, received: u64, echo: Instant) {
        let Some(a) = self.apps.get_mut(app as usize) else {
            return;
        };
        let Some(flow) = a.flow else { return };
        let mut nsent = 0;
        while a.unresolved.front().is_some_and(|&(s, _)| s <= highest) {
            if let Some((_, b)) = a.unresolved.pop_front() {
                nsent += b;
            }
        }
        let nrecd = received.saturating_sub(a.received_reported).min(nsent);
        a.received_reported = received;
        a.lost_bytes += nsent - nrecd;
        a.progress.push((now, received));
        let rtt = now - echo;
        let fb = Feedback {
            nsent: Bytes(nsent),
            nrecd: Bytes(nrecd),
            loss: if nrecd < nsent {
                LossMode::Transient
            } else {
                LossMode::None
            },
            rtt: (!rtt.is_zero()).then_some(rtt),
        };
        let _ = self.cm.update(now, flow, fb);
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
        if let AlfPacket::Report {
            app,
            highest_seq,
            received_bytes,
            echo,
        } = pkt.payload
        {
            self.on_report(now, app, highest_seq, received_bytes, echo);
        }
        self.serve(now, ctx);
    }

    fn on_timer(&mut self, now: Instant, ctx: &mut Ctx<'_, AlfPacket>) {
        self.start_due(now);
        self.cm.handle_timeout(now);
        self.serve(now, ctx);
    }

    fn next_timer(&self) -> Option<Instant> {
        let start = self
            .apps
            .iter()
            .filter(|a| a.flow.is_none())
            .map(|a| a.start)
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

#[derive(Clone, Copy, Debug, Default)]
struct RxApp {
    highest: Option<(u64, Instant)>,
    bytes: u64,
    dirty: bool,
    sender: Option<(NodeId, FlowTag)>,
}

/// The receiving host of ALF apps.
#[derive(Debug)]
pub struct AlfReceiver {
    reporting: Reporting,
    apps: Vec<RxApp>,
    next_report: Option<Instant>,
}

impl AlfReceiver {
    /// A receiver reporting as `reporting` says.
    pub fn new(reporting: Reporting) -> Self {
        AlfReceiver {
            reporting,
            apps: Vec::new(),
            next_report: None,
        }
    }

    fn report(&mut self, i: usize, ctx: &mut Ctx<'_, AlfPacket>) {
        let a = &mut self.apps[i];
        let (Some((seq, echo)), Some((to, tag))) = (a.highest, a.sender) else {
            return;
        };
        a.dirty = false;
        let r = AlfPacket::Report {
            app: i as u32,
            highest_seq: seq,
            received_bytes: a.bytes,
            echo,
        };
        let _ = ctx.send(to, tag, r);
    }
}

impl Host<AlfPacket> for AlfReceiver {
    fn on_packet(&mut self, now: Instant, pkt: Packet<AlfPacket>, ctx: &mut Ctx<'_, AlfPacket>) {
        let AlfPacket::Data { app, seq, len } = pkt.payload else {
            return;
        };
        let i = app as usize;
        if self.apps.len() <= i {
            self.apps.resize(i + 1, RxApp::default());
        }
        let a = &mut self.apps[i];
        a.bytes += u64::from(len);
        if a.highest.is_none_or(|(h, _)| seq > h) {
            a.highest = Some((seq, pkt.sent_at));
        }
        a.sender = Some((pkt.src, pkt.flow));
        a.dirty = true;
        match self.reporting {
            Reporting::EveryPacket => self.report(i, ctx),
            Reporting::Every(d) => {
                if self.next_report.is_none() {
                    self.next_report = Some(now + d);
                }
            }
        }
    }

    fn on_timer(&mut self, now: Instant, ctx: &mut Ctx<'_, AlfPacket>) {
        for i in 0..self.apps.len() {
            if self.apps[i].dirty {
                self.report(i, ctx);
            }
        }
        self.next_report = match self.reporting {
            Reporting::Every(d) => Some(now + d),
            Reporting::EveryPacket => None,
        };
    }

    fn next_timer(&self) -> Option<Instant> {
        self.next_report
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
