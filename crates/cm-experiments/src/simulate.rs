//! Executes a [`Scenario`] on the simulator and summarizes it as a
//! [`ScenarioResult`] (what `cm sim` prints as JSON).

use std::collections::BTreeMap;

use cm_core::controller::{AimdConfig, ControllerConfig};
use cm_core::{Config, Duration, Instant};
use cm_sim::{DumbbellConfig, FlowTag, LinkConfig, NodeId, QueueLimit, Sim, dumbbell};
use cm_transport::{AudioConfig, CcMode, TcpConfig};
use serde::Serialize;

use crate::hosts::{AudioSpec, CbrSpec, CmHost, ConnRecord, ConnSpec, Pkt, ReceiverHost, WebSpec};
use crate::scenario::{Scenario, ScenarioError, Transport};

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
    /// The bottleneck.
    pub bottleneck: BottleneckResult,
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

fn ms(m: f64) -> Duration {
    Duration::from_micros((m * 1e3).round() as u64)
}

/// Runs `s` (validated first).
pub fn run(s: &Scenario) -> Result<ScenarioResult, ScenarioError> {
    run_traced(s).map(|(r, _)| r)
}

/// Runs `s` and also returns the traces of flows with `trace = true`.
pub fn run_traced(s: &Scenario) -> Result<(ScenarioResult, Vec<FlowTrace>), ScenarioError> {
    s.validate()?;
    let (left, right) = s.hosts();
    let b = &s.bottleneck;
    let one_way = ms(b.delay_ms);
    let queue = s.queue_limit();
    let access_delay = ms(s.access.delay_ms);
    let bottleneck = LinkConfig::new(b.rate_bps, one_way - access_delay.saturating_mul(2), queue)
        .with_loss(b.loss)
        .with_reorder(b.reorder, ms(b.reorder_delay_ms))
        .with_duplicate(b.duplicate);
    let mut reverse = bottleneck;
    reverse.loss = 0.0;
    reverse.reorder = 0.0;
    reverse.duplicate = 0.0;
    if let Some(r) = b.reverse_rate_bps {
        reverse.bandwidth_bps = r;
    }
    let cfg = DumbbellConfig {
        left: left.len(),
        right: right.len(),
        access: LinkConfig::new(s.access.rate_bps, access_delay, QueueLimit::Unlimited),
        bottleneck,
        reverse,
    };
    let d = dumbbell(&cfg)?;
    let mut sim = Sim::<Pkt>::new(d.topology, s.seed)?;
    let node_of = |names: &[String], nodes: &[NodeId], n: &str| {
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
    for (name, &n) in left.iter().zip(&d.left_hosts) {
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
        d.right_hosts.iter().map(|_| ReceiverHost::new()).collect();
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
        let dst = node_of(&right, &d.right_hosts, &f.dst_name()).unwrap_or(d.right_hosts[0]);
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
            Transport::Cbr => {
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
        placed.push((tag, hi, ri, conn, web, t));
    }
    for (h, &n) in hosts.into_iter().zip(&d.left_hosts) {
        sim.attach(n, h)?;
    }
    for (r, &n) in receivers.into_iter().zip(&d.right_hosts) {
        sim.attach(n, r)?;
    }
    sim.run_until(end);

    let mut flows = Vec::new();
    let mut traces = Vec::new();
    let mut errors = Vec::new();
    let mut drops_by_flow = BTreeMap::new();
    for &n in &d.left_hosts {
        if let Some(h) = sim.host::<CmHost>(n) {
            errors.extend(h.errors.iter().cloned());
        }
    }
    for (f, &(tag, hi, ri, conn, web, t)) in s.flows.iter().zip(&placed) {
        let host = sim.host::<CmHost>(d.left_hosts[hi]);
        let rx = sim.host::<ReceiverHost>(d.right_hosts[ri]);
        let stats = sim.flow_stats(tag).cloned().unwrap_or_default();
        let conns: Vec<&crate::hosts::Conn> = match (host, conn, web) {
            (Some(h), Some(c), _) => h.conn(c).into_iter().collect(),
            (Some(h), None, Some(w)) => h
                .web(w)
                .map(|w| w.transfers.iter().filter_map(|&i| h.conn(i)).collect())
                .unwrap_or_default(),
            _ => Vec::new(),
        };
        let bytes_delivered = match t {
            Transport::Newreno | Transport::Tcpcm | Transport::Web => {
                rx.map_or(0, |r| r.tcp_bytes(tag))
            }
            Transport::Cbr => rx.and_then(|r| r.cbr(tag)).map_or(0, |c| c.bytes()),
            Transport::Audio => stats.delivered_bytes,
        };
        let completion = match (t, conns.first()) {
            (Transport::Newreno | Transport::Tcpcm, Some(c)) => c.record.transfer_secs(),
            _ => None,
        };
        let active = completion.unwrap_or(s.duration - f.start);
        let goodput = if active > 0.0 {
            bytes_delivered as f64 * 8.0 / active
        } else {
            0.0
        };
        let drops = stats.dropped_at.get(&d.bottleneck).copied().unwrap_or(0);
        drops_by_flow.insert(f.name.clone(), drops);
        flows.push(FlowResult {
            name: f.name.clone(),
            transport: t,
            goodput_bps: goodput,
            bytes_delivered,
            sent_packets: stats.sent_packets,
            delivered_packets: stats.delivered_packets,
            dropped_packets: stats.dropped(),
            loss_rate: stats.loss_rate(),
            retransmits: conns.iter().map(|c| c.tcp.stats().retransmits).sum(),
            timeouts: conns.iter().map(|c| c.tcp.stats().timeouts).sum(),
            completion_s: completion,
            transfers: if web.is_some() { conns.len() } else { 0 },
        });
        if f.trace {
            traces.push(FlowTrace {
                name: f.name.clone(),
                conns: conns.iter().map(|c| c.record.clone()).collect(),
            });
        }
    }
    let ls = sim.link_stats(d.bottleneck).unwrap_or_default();
    Ok((
        ScenarioResult {
            name: s.name.clone(),
            seed: s.seed,
            duration_s: s.duration,
            events: sim.events_processed(),
            flows,
            bottleneck: BottleneckResult {
                drops: ls.dropped_overflow + ls.dropped_random,
                drops_by_flow,
                sent_packets: ls.sent_packets,
                utilization: ls.utilization(),
                queue_bytes: match queue {
                    QueueLimit::Bytes(q) => Some(q),
                    _ => None,
                },
            },
            errors,
        },
        traces,
    ))
}
