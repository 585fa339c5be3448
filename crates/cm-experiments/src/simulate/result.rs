//! A finished run summarized: per-flow results, the bottleneck, and a
//! topology's links.

use std::collections::BTreeMap;

use cm_sim::{LinkId, Sim};
use serde::Serialize;

use super::network::Network;
use super::{BottleneckResult, FlowResult, FlowTrace, Placed, ScenarioResult};
use crate::hosts::{CmHost, Pkt, ReceiverHost};
use crate::scenario::{Scenario, ScenarioError, Transport};

/// What a proxy flow's proxy did (transport-selection-middleware §4.3).
#[derive(Clone, Debug, Serialize)]
pub struct ProxyResult {
    /// Packets the application offered.
    pub offered: u64,
    /// Packets the proxy sent (as the CM granted).
    pub sent: u64,
    /// Packets dropped at the proxy's full queue.
    pub dropped: u64,
    /// Mean wait of a sent packet in the proxy's queue, s.
    pub mean_queue_wait_s: f64,
    /// Datagrams CC-UDP saw acked.
    pub acked: u64,
    /// Datagrams CC-UDP reported lost to the CM.
    pub lost: u64,
}

/// One link direction of a `[topology]`.
#[derive(Clone, Debug, Serialize)]
pub struct LinkResult {
    /// `a->b`.
    pub name: String,
    /// Packets sent over it.
    pub sent_packets: u64,
    /// Packets dropped at it (overflow + random).
    pub drops: u64,
    /// Busy fraction.
    pub utilization: f64,
}

pub(super) fn collect(
    s: &Scenario,
    sim: &Sim<Pkt>,
    net: &Network,
    placed: &[Placed],
    queue_bytes: Option<u64>,
) -> Result<(ScenarioResult, Vec<FlowTrace>), ScenarioError> {
    let mut links = Vec::new();
    for (name, l) in &net.links {
        let ls = sim.link_stats(*l).unwrap_or_default();
        links.push(LinkResult {
            name: name.clone(),
            sent_packets: ls.sent_packets,
            drops: ls.dropped_overflow + ls.dropped_random,
            utilization: ls.utilization(),
        });
    }
    // A topology's "bottleneck" is the direction that dropped the most
    // (the first of equals).
    let bottleneck: Option<LinkId> = net.bottleneck.or_else(|| {
        let mut best: Option<(u64, LinkId)> = None;
        for ((_, l), r) in net.links.iter().zip(&links) {
            if best.is_none_or(|(d, _)| r.drops > d) {
                best = Some((r.drops, *l));
            }
        }
        best.map(|(_, l)| l)
    });
    let mut flows = Vec::new();
    let mut traces = Vec::new();
    let mut errors = Vec::new();
    let mut drops_by_flow = BTreeMap::new();
    for &n in &net.senders {
        if let Some(h) = sim.host::<CmHost>(n) {
            errors.extend(h.errors.iter().cloned());
        }
    }
    for (f, p) in s.flows.iter().zip(placed) {
        let (tag, t) = (p.tag, p.t);
        let host = net.senders.get(p.hi).and_then(|&n| sim.host::<CmHost>(n));
        let rx = net
            .receivers
            .get(p.ri)
            .and_then(|&n| sim.host::<ReceiverHost>(n));
        let stats = sim.flow_stats(tag).cloned().unwrap_or_default();
        let conns: Vec<&crate::hosts::Conn> = match (host, p.conn, p.web) {
            (Some(h), Some(c), _) => h.conn(c).into_iter().collect(),
            (Some(h), None, Some(w)) => h
                .web(w)
                .map(|w| w.transfers.iter().filter_map(|&i| h.conn(i)).collect())
                .unwrap_or_default(),
            _ => Vec::new(),
        };
        let arrivals = rx.and_then(|r| r.arrivals(tag));
        let bytes_delivered = match t {
            Transport::Newreno | Transport::Tcpcm | Transport::Web => {
                rx.map_or(0, |r| r.tcp_bytes(tag))
            }
            Transport::Cbr => rx.and_then(|r| r.cbr(tag)).map_or(0, |c| c.bytes()),
            Transport::Proxy => arrivals.map_or(0, |a| a.bytes),
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
        let drops = bottleneck
            .and_then(|b| stats.dropped_at.get(&b).copied())
            .unwrap_or(0);
        drops_by_flow.insert(f.name.clone(), drops);
        let proxy = match (host, p.proxy) {
            (Some(h), Some(i)) => h.proxy_stats(i).map(|ps| ProxyResult {
                offered: ps.queue.offered,
                sent: ps.queue.sent,
                dropped: ps.queue.dropped,
                mean_queue_wait_s: ps.queue.mean_wait().map_or(0.0, |d| d.as_secs_f64()),
                acked: ps.ccudp.acked,
                lost: ps.ccudp.lost,
            }),
            _ => None,
        };
        let datagrams = matches!(t, Transport::Cbr | Transport::Proxy);
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
            transfers: if p.web.is_some() { conns.len() } else { 0 },
            one_way_delay_s: arrivals
                .filter(|_| datagrams)
                .and_then(|a| a.mean_delay_s()),
            per_second_bytes: match arrivals {
                Some(a) if datagrams => a.per_second.clone(),
                _ => Vec::new(),
            },
            proxy,
        });
        if f.trace {
            traces.push(FlowTrace {
                name: f.name.clone(),
                conns: conns.iter().map(|c| c.record.clone()).collect(),
            });
        }
    }
    let ls = bottleneck
        .and_then(|b| sim.link_stats(b))
        .unwrap_or_default();
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
                queue_bytes,
            },
            links,
            errors,
        },
        traces,
    ))
}
