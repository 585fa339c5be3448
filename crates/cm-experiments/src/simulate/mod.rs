//! Executes a [`Scenario`] on the simulator and summarizes it as a
//! [`ScenarioResult`] (what `cm sim` prints as JSON).

use std::collections::BTreeMap;

use cm_core::controller::{AimdConfig, ControllerConfig};
use cm_core::{Config, Duration, Instant};
use cm_sim::{FlowTag, QueueLimit, Sim};
use cm_transport::{AudioConfig, CcMode, TcpConfig};
use serde::Serialize;

use crate::hosts::{
    AudioSpec, CbrSpec, CmHost, ConnRecord, ConnSpec, Pkt, ProxySpec, RampSpec, ReceiverHost,
    WebSpec,
};
use crate::scenario::{FlowSpec, Scenario, ScenarioError, Transport};

mod network;
mod result;

pub use result::{LinkResult, ProxyResult};

/// Per-flow outcome.
#[derive(Clone, Debug, Serialize)]
pub struct FlowResult {
    /// Flow name.
    pub name: String,
    /// Transport.
    pub transport: Transport,
    /// Application bytes delivered in order (TCP), or payload bytes received
    /// (CBR, audio), ×8 / (end − start), where end is the completion time
    /// of a finite transfer, else the end of the run.
    pub goodput_bps: f64,
    /// Application bytes delivered.
    pub bytes_delivered: u64,
    /// Data packets the sender handed to the network (reverse ACKs excluded).
    pub sent_packets: u64,
    /// Data packets that reached the receiver.
    pub delivered_packets: u64,
    /// Data packets dropped anywhere.
    pub dropped_packets: u64,
    /// dropped / sent (sigcomm1999 Fig 6's loss rate).
    pub loss_rate: f64,
    /// TCP retransmitted segments (all connections of the flow).
    pub retransmits: u64,
    /// TCP retransmission timeouts.
    pub timeouts: u64,
    /// Finite transfers: start-to-last-ACK time, s.
    pub completion_s: Option<f64>,
    /// Web sources: transfers started.
    pub transfers: usize,
    /// Cbr and proxy flows: mean one-way delay of the received packets,
    /// from the application's send time to arrival, s.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub one_way_delay_s: Option<f64>,
    /// Cbr and proxy flows: payload bytes received in each second.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub per_second_bytes: Vec<u64>,
    /// Proxy flows: what the proxy did with the application's packets.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub proxy: Option<ProxyResult>,
}

/// The bottleneck's counters.
#[derive(Clone, Debug, Serialize)]
pub struct BottleneckResult {
    /// Packets dropped at the bottleneck (overflow + random).
    pub drops: u64,
    /// Drops per flow name.
    pub drops_by_flow: BTreeMap<String, u64>,
    /// Packets sent over it.
    pub sent_packets: u64,
    /// Busy fraction.
    pub utilization: f64,
    /// Queue limit in bytes, if byte-limited.
    pub queue_bytes: Option<u64>,
}

/// The outcome of a scenario.
#[derive(Clone, Debug, Serialize)]
pub struct ScenarioResult {
    /// Scenario name.
    pub name: String,
    /// Seed used.
    pub seed: u64,
    /// Simulated seconds.
    pub duration_s: f64,
    /// Engine events processed.
    pub events: u64,
    /// Per flow, in scenario order.
    pub flows: Vec<FlowResult>,
    /// The bottleneck (of a `[topology]`: the link direction with the most
    /// drops).
    pub bottleneck: BottleneckResult,
    /// A `[topology]`'s link directions (empty for the dumbbell).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub links: Vec<LinkResult>,
    /// Host errors met while running (should be empty).
    pub errors: Vec<String>,
}

/// Traces of the connections of flows with `trace = true`.
#[derive(Clone, Debug)]
pub struct FlowTrace {
    /// Flow name.
    pub name: String,
    /// Its connections' records.
    pub conns: Vec<ConnRecord>,
}

fn secs(s: f64) -> Instant {
    Instant::from_micros((s * 1e6).round() as u64)
}

/// Runs `s` (validated first).
pub fn run(s: &Scenario) -> Result<ScenarioResult, ScenarioError> {
    run_traced(s).map(|(r, _)| r)
}

/// Runs `s` and also returns the traces of flows with `trace = true`.
pub fn run_traced(s: &Scenario) -> Result<(ScenarioResult, Vec<FlowTrace>), ScenarioError> {
    s.validate()?;
    let (left, right) = s.hosts();
    let net = network::build(s, &left, &right)?;
    let mut sim = Sim::<Pkt>::new(net.topology.clone(), s.seed)?;
    let node_of = |names: &[String], nodes: &[cm_sim::NodeId], n: &str| {
        names
            .iter()
            .position(|x| x == n)
            .and_then(|i| nodes.get(i).copied())
    };
    let iw = u64::from(s.cm_initial_window.unwrap_or(2)) * u64::from(s.mss);
    let aimd = ControllerConfig::Aimd(AimdConfig {
        initial_window: Some(cm_core::Bytes(iw)),
        ..AimdConfig::default()
    });
    let controller = match &s.cm_controller {
        Some(c) => match c
            .parse::<ControllerConfig>()
            .map_err(|e| ScenarioError::Invalid(format!("cm_controller: {e}")))?
        {
            ControllerConfig::Aimd(_) => aimd.clone(),
            other => other,
        },
        None => aimd.clone(),
    };
    let cm_cfg = Config {
        mtu: cm_core::Bytes(u64::from(s.mss)),
        controller,
        ..Config::default()
    };
    // The flows' `controller` keys, per sender host, override the
    // scenario's `cm_controller`; plain `aimd` is the scenario's AIMD (with
    // `cm_initial_window`).
    let controllers = s.host_controllers()?;
    let mut hosts: Vec<CmHost> = Vec::new();
    for (name, &n) in left.iter().zip(&net.senders) {
        let mut cfg = cm_cfg.clone();
        match controllers.get(name) {
            None => {}
            Some(ControllerConfig::Aimd(_)) => cfg.controller = aimd.clone(),
            Some(c) => cfg.controller = c.clone(),
        }
        hosts.push(CmHost::new(n, cfg).map_err(|e| ScenarioError::Host {
            flow: String::new(),
            error: e,
        })?);
    }
    let mut receivers: Vec<ReceiverHost> =
        net.receivers.iter().map(|_| ReceiverHost::new()).collect();
    if let Some(w) = s.rcv_wnd {
        receivers.iter_mut().for_each(|r| r.set_rcv_wnd(w));
    }
    let end = secs(s.duration);
    // Per flow: (tag, host index, receiver index, conn index if a plain TCP flow, web index).
    let mut placed = Vec::new();
    for (k, f) in s.flows.iter().enumerate() {
        let tag = FlowTag(u32::try_from(k + 1).unwrap_or(u32::MAX >> 2));
        let hi = left.iter().position(|x| *x == f.host_name()).unwrap_or(0);
        let ri = right.iter().position(|x| *x == f.dst_name()).unwrap_or(0);
        let dst = node_of(&right, &net.receivers, &f.dst_name()).unwrap_or(net.receivers[0]);
        let t = f.transport()?;
        let (ssthresh_rule, rto_in_recovery) = f.tcp_rules()?;
        let tcp = TcpConfig {
            mss: s.mss,
            initial_window: f.initial_window.unwrap_or(2),
            sack: f.sack,
            ssthresh_rule,
            rto_in_recovery,
            ..TcpConfig::default()
        };
        if f.delayed_ack {
            receivers[ri].delayed_ack(tag, Duration::from_millis(f.delayed_ack_ms.unwrap_or(200)));
        }
        let err = |e| ScenarioError::Host {
            flow: f.name.clone(),
            error: e,
        };
        let start = secs(s.start_s(k));
        let stop = f.stop.map(secs).unwrap_or(end);
        let host = &mut hosts[hi];
        let mut proxy = None;
        let (conn, web) = match t {
            Transport::Newreno | Transport::Tcpcm => {
                let cc = if t == Transport::Tcpcm {
                    CcMode::Cm
                } else {
                    CcMode::NewReno
                };
                let mut spec = ConnSpec::new(dst, tag, cc)
                    .start(start)
                    .tcp(tcp)
                    .trace(f.trace);
                spec.bytes = f.bytes;
                spec.weight = f.weight.unwrap_or(1);
                (Some(host.add_conn(spec).map_err(err)?), None)
            }
            Transport::Web => {
                let mut w = WebSpec::new(dst, tag, start, stop);
                w.tcp = tcp;
                if let Some(m) = f.mean_bytes {
                    w.mean_bytes = m;
                }
                if let Some(th) = f.think_s {
                    w.think_mean_s = th;
                }
                (None, Some(host.add_web(w)))
            }
            Transport::Cbr | Transport::Proxy if t == Transport::Proxy || f.ramp_bps.is_some() => {
                let app = ramp_spec(f, dst, tag, start, stop);
                if t == Transport::Proxy {
                    let overflow = f.overflow()?;
                    let maxq = f.maxq.unwrap_or(cm_transport::maxq::DEFAULT_MAXQ);
                    proxy = Some(host.add_proxy(ProxySpec {
                        app,
                        maxq,
                        overflow,
                    }));
                } else {
                    host.add_ramp(app);
                }
                (None, None)
            }
            Transport::Cbr | Transport::Proxy => {
                let spec = CbrSpec {
                    dst,
                    tag,
                    rate_bps: f.rate_bps.unwrap_or(1),
                    len: f.packet_bytes.unwrap_or(1000),
                    start,
                    stop: Some(stop),
                };
                host.add_cbr(spec).map_err(err)?;
                (None, None)
            }
            Transport::Audio => {
                let spec = AudioSpec {
                    dst,
                    tag,
                    start,
                    config: AudioConfig::default(),
                    thresholds: cm_core::Thresholds::default(),
                };
                host.add_audio(spec).map_err(err)?;
                (None, None)
            }
        };
        placed.push(Placed {
            tag,
            hi,
            ri,
            conn,
            web,
            proxy,
            t,
        });
    }
    for (h, &n) in hosts.into_iter().zip(&net.senders) {
        sim.attach(n, h)?;
    }
    for (r, &n) in receivers.into_iter().zip(&net.receivers) {
        sim.attach(n, r)?;
    }
    sim.run_until(end);
    result::collect(s, &sim, &net, &placed, queue_limit_bytes(s))
}

/// Where flow `k` of a scenario was placed.
struct Placed {
    tag: FlowTag,
    /// Its sender host (index into the senders).
    hi: usize,
    /// Its receiver host.
    ri: usize,
    /// Its connection on the host, if a plain TCP flow.
    conn: Option<usize>,
    /// Its web source.
    web: Option<usize>,
    /// Its proxy.
    proxy: Option<usize>,
    t: Transport,
}

fn queue_limit_bytes(s: &Scenario) -> Option<u64> {
    if s.topology.is_some() {
        return None;
    }
    match s.queue_limit() {
        QueueLimit::Bytes(q) => Some(q),
        _ => None,
    }
}

/// The (ramping) CBR application of a cbr or proxy flow.
fn ramp_spec(
    f: &FlowSpec,
    dst: cm_sim::NodeId,
    tag: FlowTag,
    start: Instant,
    stop: Instant,
) -> RampSpec {
    RampSpec {
        dst,
        tag,
        rate_bps: f.rate_bps.unwrap_or(1),
        ramp_bps: f.ramp_bps.unwrap_or(0),
        ramp_every: Duration::from_micros((f.ramp_every_s.unwrap_or(0.0) * 1e6).round() as u64),
        len: f.packet_bytes.unwrap_or(1000),
        start,
        stop: Some(stop),
    }
}
