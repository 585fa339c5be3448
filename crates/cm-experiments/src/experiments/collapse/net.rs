//! What `collapse` and `voip-proxy` share: the paper's Fig 1 network
//! (`experiments/topologies/collapse-fig1.toml`), the scenarios over it,
//! per-branch throughput on the wire, and what the network can carry.

use cm_sim::spec::TopologySpec;
use serde::Deserialize;

use crate::scenario::{Access, Bottleneck, FlowSpec, Scenario, Transport};
use crate::simulate::{FlowResult, ScenarioResult};

/// The Fig 1 topology file, compiled in.
const FIG1: &str = include_str!("../../../../../experiments/topologies/collapse-fig1.toml");

/// The application's payload per packet: §4.3.1's `packetSize_ 120` is
/// the whole packet in ns-2, so 92 bytes of payload, 120 on the wire with
/// IP and UDP headers.
pub(super) const PAYLOAD: u32 = 92;
/// IP + UDP header bytes of every datagram.
pub(super) const UDP_IP: u32 = 28;
/// CC-UDP's header, added by the proxy.
pub(super) const CCUDP: u32 = cm_transport::ccudp::wire::DATA_HEADER_LEN as u32;
/// The CM's MTU in the proxy runs: one proxy datagram (payload + CC-UDP
/// header), so one grant is one datagram.
pub(super) const PROXY_MTU: u32 = PAYLOAD + CCUDP;

/// The two branches: (name, sender, sink).
pub(super) const BRANCHES: [(&str, &str, &str); 2] = [("upper", "n0", "n4"), ("lower", "n1", "n5")];

/// The Fig 1 topology.
pub(super) fn fig1() -> Result<TopologySpec, String> {
    #[derive(Deserialize)]
    struct File {
        topology: TopologySpec,
    }
    toml::from_str::<File>(FIG1)
        .map(|f| f.topology)
        .map_err(|e| format!("collapse-fig1.toml: {e}"))
}

/// A scenario over Fig 1 with `flows`.
pub(super) fn scenario(name: &str, secs: f64, flows: Vec<FlowSpec>) -> Result<Scenario, String> {
    Ok(Scenario {
        name: name.into(),
        duration: secs,
        seed: 1,
        mss: PROXY_MTU,
        cm_initial_window: None,
        cm_controller: None,
        rcv_wnd: None,
        start_jitter_ms: 0.0,
        bottleneck: Bottleneck::default(),
        access: Access::default(),
        topology: Some(fig1()?),
        flows,
    })
}

/// A (ramping) CBR application from `host` to `dst`, plain or behind a
/// proxy with `controller`.
pub(super) fn app(
    name: &str,
    host: &str,
    dst: &str,
    rate_bps: u64,
    proxy: Option<&str>,
) -> FlowSpec {
    let t = if proxy.is_some() {
        Transport::Proxy
    } else {
        Transport::Cbr
    };
    let mut f = FlowSpec::new(name, t);
    f.host = Some(host.into());
    f.dst = Some(dst.into());
    f.rate_bps = Some(rate_bps);
    f.packet_bytes = Some(PAYLOAD);
    f.controller = proxy.map(str::to_owned);
    f
}

/// Bytes on the wire of one of `f`'s packets.
pub(super) fn wire_len(f: &FlowResult) -> u32 {
    match f.transport {
        Transport::Proxy => PAYLOAD + CCUDP + UDP_IP,
        _ => PAYLOAD + UDP_IP,
    }
}

/// Per branch: the flows to its sink.
pub(super) fn branch<'a>(
    r: &'a ScenarioResult,
    s: &'a Scenario,
    sink: &str,
) -> Vec<&'a FlowResult> {
    r.flows
        .iter()
        .zip(&s.flows)
        .filter(|(_, f)| f.dst.as_deref() == Some(sink))
        .map(|(r, _)| r)
        .collect()
}

/// Bytes on the wire received per second at `sink` (index = second).
pub(super) fn per_second(r: &ScenarioResult, s: &Scenario, sink: &str, secs: usize) -> Vec<f64> {
    let mut out = vec![0.0; secs];
    for f in branch(r, s, sink) {
        let k = f64::from(wire_len(f)) / f64::from(PAYLOAD);
        for (i, &b) in f.per_second_bytes.iter().enumerate().take(secs) {
            out[i] += b as f64 * k;
        }
    }
    out
}

/// Bytes on the wire received at `sink` over the run, per second.
pub(super) fn throughput_bps(r: &ScenarioResult, s: &Scenario, sink: &str) -> f64 {
    branch(r, s, sink)
        .iter()
        .map(|f| f.bytes_delivered as f64 * f64::from(wire_len(f)) / f64::from(PAYLOAD))
        .sum::<f64>()
        * 8.0
        / s.duration
}

/// Mean one-way delay over a branch's received packets, s.
pub(super) fn branch_delay(r: &ScenarioResult, s: &Scenario, sink: &str) -> Option<f64> {
    let (mut sum, mut n) = (0.0, 0.0);
    for f in branch(r, s, sink) {
        if let Some(d) = f.one_way_delay_s {
            let k = f.bytes_delivered as f64 / f64::from(PAYLOAD);
            sum += d * k;
            n += k;
        }
    }
    (n > 0.0).then(|| sum / n)
}

/// The rate of the link `a`–`b` of `t`, bit/s (0 if absent).
fn rate(t: &TopologySpec, a: &str, b: &str) -> f64 {
    t.links
        .iter()
        .find(|l| (l.a == a && l.b == b) || (l.a == b && l.b == a))
        .map_or(0.0, |l| l.rate_bps as f64)
}

/// What Fig 1 can carry, bit/s on the wire, for offered loads (on the
/// wire) `upper` (n0→n4) and `lower` (n1→n5): the maximum of
/// `x_u + x_l` with each branch at most its demand and its own links'
/// rates, and both together at most the shared n2–n3 link (each flow has
/// one route, so this linear program is the max-flow of the demands).
pub(super) fn capacity_bps(t: &TopologySpec, upper: f64, lower: f64) -> f64 {
    let up = upper.min(rate(t, "n0", "n2")).min(rate(t, "n3", "n4"));
    let low = lower.min(rate(t, "n1", "n2")).min(rate(t, "n3", "n5"));
    (up + low).min(rate(t, "n2", "n3"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn capacity_is_the_max_flow_of_the_demands() {
        let t = fig1().unwrap();
        // (1,1) of 120-byte packets at 100/s: 96 kbit/s per branch; the
        // lower branch carries at most its 10 kbit/s link.
        assert_eq!(capacity_bps(&t, 96_000.0, 96_000.0), 106_000.0);
        // Heavy loads: the shared 0.3 Mbit/s link.
        assert_eq!(capacity_bps(&t, 1e6, 1e6), 300_000.0);
        assert_eq!(capacity_bps(&t, 0.0, 1e6), 10_000.0);
    }
}
