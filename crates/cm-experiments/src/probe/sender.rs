//! The sender host: the CM, its protocol endpoint, and feedback-less
//! always-backlogged applications.

use std::any::Any;

use cm_core::{
    ClientId, Config, CongestionManager, Duration, Event, FlowId, Instant, LossMode, OpenParams,
};
use cm_proto::undo::{NaiveCount, ReorderUndo, Verdict};
use cm_proto::{Endpoint, EndpointConfig, PeerState, ProberConfig, Report};
use cm_sim::{Ctx, FlowTag, Host, NodeId, Packet};

use super::{CONTROL, Inference, Mode, ProbePacket, bare_tag};

/// The round trip the header-less inference assumes before any probe
/// answered (RFC 6298 §2.1's initial RTO).
const NO_RTT: Duration = Duration::from_secs(1);

/// One always-backlogged request/callback application with no feedback
/// of its own.
#[derive(Clone, Debug)]
pub struct ProbeApp {
    /// Destination host.
    pub dst: NodeId,
    /// Flow tag of its accounted data (statistics).
    pub tag: FlowTag,
    /// When it opens its flow and starts sending.
    pub start: Instant,
    /// Scheduler weight (sigcomm1999 §4.6).
    pub weight: u32,
    flow: Option<FlowId>,
    /// Whether the handshake towards `dst` was started for it.
    connected: bool,
    /// The flow's number in the CM header.
    id: u32,
    /// Datagrams sent under the prober's accounting (headed, or header-less
    /// after the handshake), and their payload bytes.
    pub sent_packets: u64,
    /// Payload bytes of those.
    pub sent_bytes: u64,
    /// Datagrams sent outside the prober's accounting (during the
    /// handshake).
    pub bare_packets: u64,
    /// Reports applied to the CM.
    pub reports: u64,
    /// Reports given to the CM as congestion (`Transient`).
    pub congestion_reports: u64,
    /// Header-less: decreases the inference called for.
    pub decreases: u64,
    /// Header-less: decreases undone.
    pub undone: u64,
    /// `(time, window bytes)` of its macroflow after every report.
    pub window_trace: Vec<(Instant, u64)>,
    /// Exponential aging steps its macroflow took (sigcomm1999 §4.4),
    /// summed over the open-loop periods that feedback ended.
    pub aging_steps: u64,
    /// Sum over reports of the bytes in flight just before each, for the
    /// mean in-flight.
    pub in_flight_sum: u64,
    undo: ReorderUndo,
    naive: NaiveCount,
    /// Why `cm_open` refused the flow, if it did.
    pub open_error: Option<String>,
}

impl ProbeApp {
    /// An app sending to `dst` from `start`, with scheduler weight `weight`.
    pub fn new(dst: NodeId, tag: FlowTag, start: Instant, weight: u32) -> Self {
        ProbeApp {
            dst,
            tag,
            start,
            weight,
            flow: None,
            connected: false,
            id: 0,
            sent_packets: 0,
            sent_bytes: 0,
            bare_packets: 0,
            reports: 0,
            congestion_reports: 0,
            decreases: 0,
            undone: 0,
            window_trace: Vec::new(),
            aging_steps: 0,
            in_flight_sum: 0,
            undo: ReorderUndo::new(),
            naive: NaiveCount::default(),
            open_error: None,
        }
    }
}

/// A host running the CM, the CM protocol's sender side, and apps that
/// give no feedback.
#[derive(Debug)]
pub struct ProbeSender {
    cm: CongestionManager,
    client: ClientId,
    endpoint: Endpoint<NodeId>,
    mode: Mode,
    /// The applications, in the order given.
    pub apps: Vec<ProbeApp>,
    /// The CM's next wake-up, refreshed after every callback.
    wake: Option<Instant>,
}

impl ProbeSender {
    /// A host with the CM configured by `cfg`, probing `probes_per_rtt`
    /// times per smoothed RTT, learning loss as `mode` says. `secret`
    /// seeds the protocol's initial sequence numbers. The client silence
    /// timeout is off (the host is the CM's one client for the whole run).
    pub fn new(
        cfg: Config,
        mode: Mode,
        probes_per_rtt: f64,
        secret: u64,
        apps: Vec<ProbeApp>,
    ) -> Result<Self, cm_core::ConfigError> {
        let cfg = Config {
            client_timeout: None,
            ..cfg
        };
        let mut cm = CongestionManager::new(cfg)?;
        let client = cm
            .register_client(Instant::ZERO)
            .map_err(|e| cm_core::ConfigError(e.to_string()))?;
        let ecfg = EndpointConfig {
            prober: ProberConfig {
                probes_per_rtt,
                ..ProberConfig::default()
            },
            ..EndpointConfig::default()
        };
        let mut apps = apps;
        for (i, a) in apps.iter_mut().enumerate() {
            a.id = u32::try_from(i).unwrap_or(u32::MAX);
        }
        Ok(ProbeSender {
            cm,
            client,
            endpoint: Endpoint::new(ecfg, secret),
            mode,
            apps,
            wake: None,
        })
    }

    /// The congestion manager (for inspection).
    pub fn cm(&self) -> &CongestionManager {
        &self.cm
    }

    /// The protocol endpoint (for inspection: probers, counters).
    pub fn endpoint(&self) -> &Endpoint<NodeId> {
        &self.endpoint
    }

    /// The prober's loss estimate towards `dst`: packets the receiver
    /// declared lost over headed packets sent.
    pub fn loss_estimate(&self, dst: NodeId) -> Option<f64> {
        self.endpoint.prober(&dst)?.loss_estimate()
    }

    /// Opens the flows that are due. Header mode opens at once (bare
    /// sends while the handshake runs); header-less mode once negotiated.
    fn start_due(&mut self, now: Instant) {
        for (i, app) in self.apps.iter_mut().enumerate() {
            if app.flow.is_some() || app.start > now || app.open_error.is_some() {
                continue;
            }
            if self.endpoint.connect(now, app.dst).is_none() {
                app.open_error = Some("the destination table is full".into());
                continue;
            }
            app.connected = true;
            if matches!(self.mode, Mode::Headerless(_))
                && self.endpoint.state(&app.dst) != Some(PeerState::Negotiated)
            {
                continue;
            }
            let Some(addr) = crate::alf::app_addr(app.dst, i) else {
                continue;
            };
            let flow = match self.cm.open(now, self.client, OpenParams::to(addr)) {
                Ok(f) => f,
                Err(e) => {
                    app.open_error = Some(e.to_string());
                    continue;
                }
            };
            let _ = self.cm.set_weight(now, flow, app.weight);
            // The flow's feedback comes from probe responses (sigcomm1999
            // §4.2.1): let the window allow for their batching.
            if let (Some(p), Ok(mf)) = (self.endpoint.prober(&app.dst), self.cm.macroflow_of(flow))
            {
                let _ = self
                    .cm
                    .set_feedback_lag(now, mf, Some(p.feedback_lag_per_mille()));
            }
            // Keep a few MTUs requested so the app is always backlogged.
            let _ = self.cm.request_mtus(now, flow, 4);
            app.flow = Some(flow);
        }
    }

    /// Control packets to the receiver CM, then reports into `cm_update`.
    fn pump(&mut self, now: Instant, ctx: &mut Ctx<'_, ProbePacket>) {
        while let Some((peer, bytes)) = self.endpoint.poll_transmit() {
            let _ = ctx.send(peer, CONTROL, ProbePacket::Control(bytes));
        }
        while let Some((peer, r)) = self.endpoint.poll_report() {
            self.on_report(now, peer, r);
        }
    }

    /// One report: straight into `cm_update` with the header; through the
    /// §4.2.2 inference without it.
    fn on_report(&mut self, now: Instant, peer: NodeId, r: Report) {
        let rtt = self
            .endpoint
            .prober(&peer)
            .and_then(|p| p.srtt())
            .unwrap_or(NO_RTT);
        let Some(app) = self
            .apps
            .iter_mut()
            .find(|a| a.dst == peer && a.id == r.flow)
        else {
            return;
        };
        let Some(flow) = app.flow else { return };
        let Ok(mf) = self.cm.macroflow_of(flow) else {
            return;
        };
        if let Some(h) = r.hint {
            if h.weight > 0 {
                let _ = self.cm.set_weight(now, flow, u32::from(h.weight));
            }
        }
        if let Ok(m) = self.cm.macroflow_info(mf) {
            app.aging_steps += u64::from(m.aging_steps);
            app.in_flight_sum += m.in_flight.get();
        }
        let mut fb = r.feedback;
        // Handshake and reset resolutions are `NotCongestion`: not the
        // inference's business.
        if let (Mode::Headerless(inf), LossMode::None) = (self.mode, fb.loss) {
            let (sent, recd) = r.interval;
            let was_storing = app.undo.storing();
            let verdict = match inf {
                Inference::Undo => app.undo.on_report(now, sent, recd, rtt),
                Inference::Naive => app.naive.on_report(now, sent, recd, rtt),
            };
            match verdict {
                Verdict::Decrease => {
                    if inf == Inference::Undo {
                        let _ = self.cm.checkpoint(mf);
                    }
                    fb.loss = LossMode::Transient;
                    app.decreases += 1;
                }
                Verdict::Undo(n) => {
                    let _ = self.cm.undo_reduction(now, mf);
                    app.undone += u64::from(n);
                }
                Verdict::Nothing => {
                    if was_storing && !app.undo.storing() {
                        // The stored period closed with the counts apart:
                        // its decreases were real.
                        let _ = self.cm.commit_reduction(mf);
                    }
                }
            }
        }
        app.reports += 1;
        if matches!(fb.loss, LossMode::Transient | LossMode::Persistent) {
            app.congestion_reports += 1;
        }
        let _ = self.cm.update(now, flow, fb);
        if let Ok(m) = self.cm.macroflow_info(mf) {
            app.window_trace.push((now, m.window.get()));
        }
    }

    /// `cmapp_send`: one datagram per grant, headed when the prober
    /// accounts it, then `cm_notify` and ask again.
    fn serve(&mut self, now: Instant, ctx: &mut Ctx<'_, ProbePacket>) {
        while let Some(ev) = self.cm.poll_event() {
            let Event::Grant { flow, bytes } = ev else {
                continue;
            };
            let Some(i) = self.apps.iter().position(|a| a.flow == Some(flow)) else {
                continue;
            };
            let mtu = self.cm.mtu(flow).map_or(1, |m| m.get().max(1));
            let app = &mut self.apps[i];
            let len = u32::try_from(bytes.get()).unwrap_or(u32::MAX);
            let (payload, tag) = match self.endpoint.on_send(now, app.dst, app.id, len) {
                Some(h) => {
                    let header = (self.mode == Mode::Header).then_some(h);
                    let d = ProbePacket::Data {
                        flow: app.id,
                        header,
                        len,
                    };
                    (d, app.tag)
                }
                None => {
                    self.endpoint.on_send_bare(app.dst, app.id, len);
                    let d = ProbePacket::Data {
                        flow: app.id,
                        header: None,
                        len,
                    };
                    (d, bare_tag(app.tag))
                }
            };
            let accounted = tag == app.tag;
            if ctx.send(app.dst, tag, payload).is_ok() {
                if accounted {
                    app.sent_packets += 1;
                    app.sent_bytes += bytes.get();
                } else {
                    app.bare_packets += 1;
                }
            }
            let _ = self.cm.notify(now, flow, bytes);
            let k = u32::try_from(bytes.get() / mtu).unwrap_or(1).max(1);
            let _ = self.cm.request_mtus(now, flow, k);
        }
        self.wake = self.cm.poll_timeout();
    }

    fn run(&mut self, now: Instant, ctx: &mut Ctx<'_, ProbePacket>) {
        self.pump(now, ctx);
        self.serve(now, ctx);
        self.pump(now, ctx);
    }
}

impl Host<ProbePacket> for ProbeSender {
    fn start(&mut self, now: Instant, ctx: &mut Ctx<'_, ProbePacket>) {
        self.start_due(now);
        self.run(now, ctx);
    }

    fn on_packet(
        &mut self,
        now: Instant,
        pkt: Packet<ProbePacket>,
        ctx: &mut Ctx<'_, ProbePacket>,
    ) {
        if let ProbePacket::Control(bytes) = &pkt.payload {
            self.endpoint.on_datagram(now, now, pkt.src, bytes);
        }
        // A SYN-ACK may let a header-less app open its flow.
        self.start_due(now);
        self.run(now, ctx);
    }

    fn on_timer(&mut self, now: Instant, ctx: &mut Ctx<'_, ProbePacket>) {
        self.start_due(now);
        if self.endpoint.poll_timeout().is_some_and(|t| t <= now) {
            self.endpoint.handle_timeout(now);
        }
        self.pump(now, ctx);
        self.cm.handle_timeout(now);
        self.run(now, ctx);
    }

    fn next_timer(&self) -> Option<Instant> {
        self.apps
            .iter()
            // A header-less app waiting for the handshake has connected:
            // the endpoint's timers and packets wake it.
            .filter(|a| !a.connected && a.open_error.is_none())
            .map(|a| a.start)
            .chain(self.wake)
            .chain(self.endpoint.poll_timeout())
            .min()
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
