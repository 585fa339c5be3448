//! [`CmHost`]: a simulated sender host that owns one CM and runs TCP,
//! web-like, CBR and layered-audio applications (cm-implementation-linux
//! §3.2: the CM is host-wide, transports call into it).

use std::any::Any;
use std::collections::BTreeMap;

use cm_core::{Bytes, ClientId, Config, CongestionManager, Event, FlowId, Instant, OpenParams};
use cm_sim::{Ctx, FlowTag, Host, NodeId, Packet};
use cm_transport::{AudioSender, CbrSource, CcMode, CmCall, Datagram, TcpSegment, TcpSender};

use super::apps::{AudioApp, CbrApp};
pub use super::apps::{AudioSpec, CbrSpec};
use super::conn::{Conn, ConnSpec, Phase};
pub use super::error::HostError;
use super::proxy::{Calls, ProxyApps, ProxySpec, ProxyStats, RampSpec};
use super::record::ConnRecord;
use super::web::{WebSource, WebSpec};
use super::{Pkt, node_sockaddr};

#[derive(Clone, Copy, Debug)]
enum Owner {
    Conn(usize),
    Audio(usize),
    Proxy(usize),
}

/// A sender host with one congestion manager shared by all its apps.
#[derive(Debug)]
pub struct CmHost {
    node: NodeId,
    cm: CongestionManager,
    client: ClientId,
    conns: Vec<Conn>,
    active: Vec<usize>,
    by_port: BTreeMap<(FlowTag, u16), usize>,
    next_port: u16,
    webs: Vec<WebSource>,
    cbrs: Vec<CbrApp>,
    audios: Vec<AudioApp>,
    proxies: ProxyApps,
    owners: BTreeMap<FlowId, Owner>,
    next: Option<Instant>,
    /// Errors met while running (the engine's callbacks cannot fail).
    pub errors: Vec<String>,
}

/// A host whose connections are all NewReno: a [`CmHost`] whose CM idles.
pub type TcpHost = CmHost;

impl CmHost {
    /// A host on sim node `node` running a CM with `cfg` (client
    /// reclamation is switched off: simulated apps never vanish).
    pub fn new(node: NodeId, mut cfg: Config) -> Result<Self, HostError> {
        cfg.client_timeout = None;
        let mut cm = CongestionManager::new(cfg)?;
        let client = cm.register_client(Instant::ZERO)?;
        Ok(CmHost {
            node,
            cm,
            client,
            conns: Vec::new(),
            active: Vec::new(),
            by_port: BTreeMap::new(),
            next_port: 1000,
            webs: Vec::new(),
            cbrs: Vec::new(),
            audios: Vec::new(),
            proxies: ProxyApps::default(),
            owners: BTreeMap::new(),
            next: None,
            errors: Vec::new(),
        })
    }

    /// Adds a TCP connection; returns its index for [`CmHost::conn`].
    pub fn add_conn(&mut self, spec: ConnSpec) -> Result<usize, HostError> {
        self.add_conn_inner(spec, None)
    }

    fn add_conn_inner(&mut self, spec: ConnSpec, web: Option<usize>) -> Result<usize, HostError> {
        let port = self.next_port;
        self.next_port = self.next_port.wrapping_add(1).max(1000);
        let mut cfg = spec.tcp;
        cfg.src_port = port;
        cfg.dst_port = 80;
        cfg.total = spec.bytes;
        cfg.cc = spec.cc;
        let tcp = TcpSender::new(cfg, spec.start)?;
        let i = self.conns.len();
        self.conns.push(Conn {
            spec,
            port,
            tcp,
            flow: None,
            record: ConnRecord {
                bytes: spec.bytes,
                tracing: spec.trace,
                ..ConnRecord::default()
            },
            phase: Phase::Waiting,
            web,
        });
        self.by_port.insert((spec.tag, port), i);
        self.next = min_opt(self.next, Some(spec.start));
        Ok(i)
    }

    /// Adds a web-like on/off source.
    pub fn add_web(&mut self, spec: WebSpec) -> usize {
        self.webs.push(WebSource {
            spec,
            next_start: Some(spec.start),
            transfers: Vec::new(),
        });
        self.next = min_opt(self.next, Some(spec.start));
        self.webs.len() - 1
    }

    /// Adds a CBR source.
    pub fn add_cbr(&mut self, spec: CbrSpec) -> Result<usize, HostError> {
        let source = CbrSource::new(spec.rate_bps, spec.len, spec.start, spec.stop)?;
        self.cbrs.push(CbrApp { spec, source });
        self.next = min_opt(self.next, Some(spec.start));
        Ok(self.cbrs.len() - 1)
    }

    /// Adds a layered audio sender (opened on the CM at `spec.start`).
    pub fn add_audio(&mut self, spec: AudioSpec) -> Result<usize, HostError> {
        AudioSender::new(spec.config.clone(), spec.start)?;
        self.next = min_opt(self.next, Some(spec.start));
        self.audios.push(AudioApp {
            spec,
            sender: None,
            flow: None,
        });
        Ok(self.audios.len() - 1)
    }

    /// Connection `i` (as returned by [`CmHost::add_conn`]).
    pub fn conn(&self, i: usize) -> Option<&Conn> {
        self.conns.get(i)
    }

    /// All connections, including those of web sources.
    pub fn conns(&self) -> &[Conn] {
        &self.conns
    }

    /// Web source `i`.
    pub fn web(&self, i: usize) -> Option<&WebSource> {
        self.webs.get(i)
    }

    /// Audio sender `i` (once started).
    pub fn audio(&self, i: usize) -> Option<&AudioSender> {
        self.audios.get(i).and_then(|a| a.sender.as_ref())
    }

    /// The host's congestion manager.
    pub fn cm(&self) -> &CongestionManager {
        &self.cm
    }

    /// Adds a ramping CBR source (not congestion controlled).
    pub fn add_ramp(&mut self, spec: RampSpec) -> usize {
        self.next = min_opt(self.next, Some(spec.start));
        self.proxies.add_ramp(spec)
    }

    /// Adds a congestion-forcing proxy (its CM flow opens at `app.start`).
    pub fn add_proxy(&mut self, spec: ProxySpec) -> usize {
        self.next = min_opt(self.next, Some(spec.app.start));
        self.proxies.add_proxy(spec)
    }

    /// Proxy `i`'s counters (as returned by [`CmHost::add_proxy`]).
    pub fn proxy_stats(&self, i: usize) -> Option<ProxyStats> {
        self.proxies.stats(i)
    }

    fn send(&mut self, ctx: &mut Ctx<'_, Pkt>, dst: NodeId, tag: FlowTag, d: Datagram) {
        if let Err(e) = ctx.send(dst, tag, Pkt::Net(d)) {
            self.errors.push(format!("send: {e}"));
        }
    }

    fn forward_all(&mut self, now: Instant, calls: Calls) {
        for (flow, call) in calls {
            self.forward(now, flow, call);
        }
    }

    fn forward(&mut self, now: Instant, flow: FlowId, call: CmCall) {
        let r = match call {
            CmCall::Request => self.cm.request(now, flow),
            CmCall::RequestMtus(k) => self.cm.request_mtus(now, flow, k),
            CmCall::Notify(n) => self.cm.notify(now, flow, n),
            CmCall::Update(fb) => self.cm.update(now, flow, fb),
        };
        if let Err(e) = r {
            self.errors.push(format!("cm call {call:?}: {e}"));
        }
    }

    fn record_send(&mut self, i: usize, now: Instant, seg: &TcpSegment) {
        let rec = &mut self.conns[i].record;
        if rec.tracing && seg.len > 0 {
            ConnRecord::push(&mut rec.seq, now, seg.seq.saturating_sub(1));
        }
    }

    fn drain_conn(&mut self, i: usize, now: Instant, ctx: &mut Ctx<'_, Pkt>) -> bool {
        let mut busy = false;
        while let Some(seg) = self.conns[i].tcp.poll_transmit(now) {
            busy = true;
            self.record_send(i, now, &seg);
            let c = &self.conns[i];
            let (dst, tag) = (c.spec.dst, c.spec.tag);
            self.send(ctx, dst, tag, Datagram::Tcp(seg));
        }
        while let Some(call) = self.conns[i].tcp.poll_cm() {
            busy = true;
            if let Some(flow) = self.conns[i].flow {
                self.forward(now, flow, call);
            }
        }
        busy
    }

    fn drain_audio(&mut self, i: usize, now: Instant, ctx: &mut Ctx<'_, Pkt>) -> bool {
        let mut busy = false;
        let (dst, tag) = (self.audios[i].spec.dst, self.audios[i].spec.tag);
        loop {
            let Some(s) = self.audios[i].sender.as_mut() else {
                return busy;
            };
            let Some(p) = s.poll_transmit(now) else { break };
            busy = true;
            self.send(ctx, dst, tag, Datagram::Audio(p));
        }
        while let Some(call) = self.audios[i]
            .sender
            .as_mut()
            .and_then(AudioSender::poll_cm)
        {
            busy = true;
            if let Some(flow) = self.audios[i].flow {
                self.forward(now, flow, call);
            }
        }
        busy
    }

    fn on_event(&mut self, ev: Event, now: Instant, ctx: &mut Ctx<'_, Pkt>) {
        match ev {
            Event::Grant { flow, bytes } => match self.owners.get(&flow) {
                Some(&Owner::Conn(i)) => {
                    if let Some(seg) = self.conns[i].tcp.on_grant(now, bytes) {
                        self.record_send(i, now, &seg);
                        let c = &self.conns[i];
                        let (dst, tag) = (c.spec.dst, c.spec.tag);
                        self.send(ctx, dst, tag, Datagram::Tcp(seg));
                    }
                    self.drain_conn(i, now, ctx);
                }
                Some(&Owner::Proxy(i)) => {
                    let mut calls = Calls::new();
                    let errors = &mut self.errors;
                    self.proxies.on_grant(i, flow, now, ctx, &mut calls, errors);
                    self.forward_all(now, calls);
                }
                _ => self.forward(now, flow, CmCall::Notify(Bytes::ZERO)),
            },
            Event::RateUpdate { flow, estimate } => {
                if let Some(&Owner::Audio(i)) = self.owners.get(&flow) {
                    if let Some(s) = self.audios[i].sender.as_mut() {
                        s.on_rate_update(now, estimate);
                    }
                }
            }
            _ => {}
        }
    }

    fn open_flow(&mut self, now: Instant, dst: NodeId, port: u16) -> Option<FlowId> {
        let mut params = OpenParams::to(node_sockaddr(dst, 80));
        params.src = Some(node_sockaddr(self.node, port));
        match self.cm.open(now, self.client, params) {
            Ok(f) => Some(f),
            Err(e) => {
                self.errors.push(format!("cm open: {e}"));
                None
            }
        }
    }

    fn start_conn(&mut self, i: usize, now: Instant) {
        let spec = self.conns[i].spec;
        if spec.cc == CcMode::Cm {
            if let Some(flow) = self.open_flow(now, spec.dst, self.conns[i].port) {
                if spec.weight != 1 {
                    if let Err(e) = self.cm.set_weight(now, flow, spec.weight) {
                        self.errors.push(format!("cm set_weight: {e}"));
                    }
                }
                self.owners.insert(flow, Owner::Conn(i));
                self.conns[i].flow = Some(flow);
            }
        }
        let c = &mut self.conns[i];
        c.phase = Phase::Running;
        c.record.start = Some(now);
        self.active.push(i);
    }

    fn finish_conn(&mut self, i: usize, now: Instant) {
        let c = &mut self.conns[i];
        c.phase = Phase::Done;
        c.record.finish = Some(now);
        if let Some(flow) = c.flow.take() {
            self.owners.remove(&flow);
            if let Err(e) = self.cm.close(now, flow) {
                self.errors.push(format!("cm close: {e}"));
            }
        }
        self.active.retain(|&j| j != i);
    }

    fn start_web_transfer(&mut self, w: usize, now: Instant, ctx: &mut Ctx<'_, Pkt>) {
        let spec = self.webs[w].spec;
        self.webs[w].next_start = None;
        if now >= spec.stop {
            return;
        }
        let size = spec.draw_size(ctx.rng());
        let mut cs = ConnSpec::new(spec.dst, spec.tag, spec.cc)
            .bytes(size)
            .start(now)
            .tcp(spec.tcp);
        cs.trace = false;
        match self.add_conn_inner(cs, Some(w)) {
            Ok(i) => {
                self.webs[w].transfers.push(i);
                self.start_conn(i, now);
            }
            Err(e) => self.errors.push(format!("web transfer: {e}")),
        }
    }

    /// Runs every application and the CM until nothing more happens at `now`.
    fn pump(&mut self, now: Instant, ctx: &mut Ctx<'_, Pkt>) {
        loop {
            let mut busy = false;
            for k in 0..self.active.len() {
                if let Some(&i) = self.active.get(k) {
                    busy |= self.drain_conn(i, now, ctx);
                }
            }
            for i in 0..self.audios.len() {
                busy |= self.drain_audio(i, now, ctx);
            }
            for k in 0..self.cbrs.len() {
                while let Some(p) = self.cbrs[k].source.poll_transmit(now) {
                    busy = true;
                    let (dst, tag) = (self.cbrs[k].spec.dst, self.cbrs[k].spec.tag);
                    self.send(ctx, dst, tag, Datagram::Cbr(p));
                }
            }
            let mut calls = Calls::new();
            busy |= self.proxies.pump(now, ctx, &mut calls, &mut self.errors);
            self.forward_all(now, calls);
            while let Some(ev) = self.cm.poll_event() {
                busy = true;
                self.on_event(ev, now, ctx);
            }
            let done: Vec<usize> = self
                .active
                .iter()
                .copied()
                .filter(|&i| self.conns[i].tcp.is_complete())
                .collect();
            for i in done {
                busy = true;
                self.finish_conn(i, now);
                if let Some(w) = self.conns[i].web {
                    let think = ctx.rng().exponential(self.webs[w].spec.think_mean_s);
                    let t = now + cm_core::Duration::from_micros((think * 1e6) as u64);
                    self.webs[w].next_start = Some(t);
                }
            }
            if !busy {
                break;
            }
        }
        self.next = self.compute_next();
    }

    fn compute_next(&mut self) -> Option<Instant> {
        let mut t = self.cm.poll_timeout();
        for c in &self.conns {
            match c.phase {
                Phase::Waiting if c.web.is_none() => t = min_opt(t, Some(c.spec.start)),
                Phase::Running => t = min_opt(t, c.tcp.poll_timeout()),
                _ => {}
            }
        }
        for w in &self.webs {
            t = min_opt(t, w.next_start.filter(|&s| s < w.spec.stop));
        }
        for c in &self.cbrs {
            t = min_opt(t, c.source.poll_timeout());
        }
        for a in &self.audios {
            t = match &a.sender {
                Some(s) => min_opt(t, s.poll_timeout()),
                None => min_opt(t, Some(a.spec.start)),
            };
        }
        min_opt(t, self.proxies.poll_timeout())
    }

    fn start_audio(&mut self, i: usize, now: Instant) {
        let spec = self.audios[i].spec.clone();
        let flow = self.open_flow(now, spec.dst, 5000 + (i as u16 % 1000));
        if let Some(flow) = flow {
            if let Err(e) = self.cm.set_thresholds(now, flow, spec.thresholds) {
                self.errors.push(format!("cm set_thresholds: {e}"));
            }
            self.owners.insert(flow, Owner::Audio(i));
        }
        match AudioSender::new(spec.config, now) {
            Ok(s) => self.audios[i].sender = Some(s),
            Err(e) => self.errors.push(format!("audio: {e}")),
        }
        self.audios[i].flow = flow;
    }

    fn on_ack(&mut self, i: usize, now: Instant, seg: &TcpSegment) {
        self.conns[i].tcp.handle_segment(now, seg);
        let c = &self.conns[i];
        if !c.record.tracing {
            return;
        }
        let acked = c.tcp.stats().bytes_acked;
        let window = match (c.tcp.cwnd(), c.flow) {
            (Some(w), _) => Some(w),
            (None, Some(f)) => self
                .cm
                .macroflow_of(f)
                .and_then(|m| self.cm.macroflow_info(m))
                .ok()
                .map(|m| m.window.get()),
            (None, None) => None,
        };
        let rec = &mut self.conns[i].record;
        ConnRecord::push(&mut rec.acked, now, acked);
        if let Some(w) = window {
            ConnRecord::push(&mut rec.window, now, w);
        }
    }
}

impl Host<Pkt> for CmHost {
    fn start(&mut self, now: Instant, ctx: &mut Ctx<'_, Pkt>) {
        self.on_timer(now, ctx);
    }

    fn on_packet(&mut self, now: Instant, pkt: Packet<Pkt>, ctx: &mut Ctx<'_, Pkt>) {
        let tag = FlowTag(pkt.flow.0 & !super::REVERSE_BIT);
        let d = match pkt.payload {
            Pkt::Net(d) => d,
            Pkt::ProxyAck(ack) => {
                let mut calls = Calls::new();
                self.proxies.on_ack(now, tag, &ack, &mut calls);
                self.forward_all(now, calls);
                self.pump(now, ctx);
                return;
            }
            Pkt::ProxyData(_) => return,
        };
        match d {
            Datagram::Tcp(seg) => {
                if let Some(&i) = self.by_port.get(&(tag, seg.dst_port)) {
                    if self.conns[i].phase == Phase::Running {
                        self.on_ack(i, now, &seg);
                    }
                }
            }
            Datagram::AudioFeedback(fb) => {
                if let Some(a) = self.audios.iter_mut().find(|a| a.spec.tag == tag) {
                    if let Some(s) = a.sender.as_mut() {
                        s.handle_feedback(now, &fb);
                    }
                }
            }
            Datagram::Cbr(_) | Datagram::Audio(_) => {}
        }
        self.pump(now, ctx);
    }

    fn on_timer(&mut self, now: Instant, ctx: &mut Ctx<'_, Pkt>) {
        if self.cm.poll_timeout().is_some_and(|t| t <= now) {
            self.cm.handle_timeout(now);
        }
        for i in 0..self.conns.len() {
            let c = &self.conns[i];
            match c.phase {
                Phase::Waiting if c.web.is_none() && c.spec.start <= now => {
                    self.start_conn(i, now);
                }
                Phase::Running if c.tcp.poll_timeout().is_some_and(|t| t <= now) => {
                    self.conns[i].tcp.handle_timeout(now);
                }
                _ => {}
            }
        }
        for w in 0..self.webs.len() {
            if self.webs[w].next_start.is_some_and(|t| t <= now) {
                self.start_web_transfer(w, now, ctx);
            }
        }
        for i in 0..self.audios.len() {
            if self.audios[i].sender.is_none() && self.audios[i].spec.start <= now {
                self.start_audio(i, now);
            }
        }
        for (i, dst, port) in self.proxies.take_due_opens(now) {
            if let Some(flow) = self.open_flow(now, dst, port) {
                self.owners.insert(flow, Owner::Proxy(i));
                self.proxies.set_flow(i, flow);
            }
        }
        let mut calls = Calls::new();
        self.proxies.handle_timeouts(now, &mut calls);
        self.forward_all(now, calls);
        self.pump(now, ctx);
    }

    fn next_timer(&self) -> Option<Instant> {
        self.next
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// The earlier of two optional instants.
pub(crate) fn min_opt(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, None) => x,
        (None, y) => y,
    }
}
