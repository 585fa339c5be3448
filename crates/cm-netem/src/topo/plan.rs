//! What a [`Network`](super::Network) will consist of, worked out from a
//! [`TopologySpec`] before anything is created: namespace and interface names,
//! addresses, the static routes of every node, and each link direction's
//! rate, burst, queue and delay. Pure data, so it is tested without root.

use std::net::Ipv4Addr;
use std::time::Duration;

use cm_sim::Sim;
use cm_sim::spec::{NodeRole, TopologySpec};
use serde::{Deserialize, Serialize};

use crate::error::{NetemError, Result};

/// Largest IP packet a link carries (the veths' and TUNs' MTU).
pub const MTU: u64 = 1500;

/// `tbf` burst of a link direction: one MTU plus 100 bytes of slack (so a
/// full-size packet always fits the bucket after the kernel's rounding), or
/// 1 ms of tokens when that is more. Smallest that passes every packet: at
/// 10 kbit/s it is already 1.28 s of tokens.
pub fn link_burst(rate_bps: u64) -> u64 {
    (rate_bps / 8 / 1000).max(MTU + 100)
}

/// One node of a network.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TopoNode {
    /// Its name in the topology.
    pub name: String,
    /// Host or router.
    pub router: bool,
    /// Its network namespace (`ip netns exec <ns> ...`).
    pub ns: String,
    /// Its addresses, one per link it is on, in link order (the first is
    /// [`Network::node_addr`](super::Network::node_addr)).
    pub addrs: Vec<Ipv4Addr>,
}

/// One direction of a duplex link; ids follow the simulator's numbering
/// (entry `i` of the spec's links is `2i`, a→b, and `2i + 1`, b→a).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TopoLink {
    /// Directional link id.
    pub id: usize,
    /// Transmitting node's name.
    pub from: String,
    /// Receiving node's name.
    pub to: String,
    /// Transmitting node's address on the link.
    pub from_addr: Ipv4Addr,
    /// Receiving node's address on the link.
    pub to_addr: Ipv4Addr,
    /// Rate, bit/s (IP level).
    pub rate_bps: u64,
    /// One-way delay.
    pub delay: Duration,
    /// DropTail limit, packets (as in the spec).
    pub queue_packets: u32,
    /// `tbf` burst, bytes ([`link_burst`]).
    pub burst_bytes: u64,
}

/// The whole plan.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    pub(crate) nodes: Vec<TopoNode>,
    pub(crate) links: Vec<TopoLink>,
    /// Node index of each directional link's ends: (from, to).
    pub(crate) ends: Vec<(usize, usize)>,
    /// `next[v][d]`: the directional link node `v` sends on toward node `d`.
    pub(crate) next: Vec<Vec<Option<usize>>>,
}

/// Veth of duplex link `i` (the same name at both ends).
pub(crate) fn veth(i: usize) -> String {
    format!("l{i}")
}

/// TUN of duplex link `i` in its transmitting node (one per end).
pub(crate) fn tun(i: usize) -> String {
    format!("q{i}")
}

/// Policy-routing table of duplex link `i` (packets the delay box wrote back).
pub(crate) fn table(i: usize) -> u32 {
    1000 + i as u32
}

/// Address of end `end` (0 = a, 1 = b) of duplex link `i`: `10.<i/256>.<i%256>.<end+1>/24`.
pub(crate) fn link_addr(i: usize, end: usize) -> Ipv4Addr {
    Ipv4Addr::new(10, (i / 256) as u8, (i % 256) as u8, end as u8 + 1)
}

/// Most duplex links a network may have (each gets a /24 of 10.0.0.0/8).
pub const MAX_LINKS: usize = 1 << 16;

impl Plan {
    /// The plan for `spec` with namespaces named `<prefix>t<node index>`.
    pub(crate) fn new(spec: &TopologySpec, prefix: &str) -> Result<Plan> {
        let built = spec.build()?;
        if spec.links.len() > MAX_LINKS {
            return Err(NetemError::Parse {
                what: "topology".into(),
                detail: format!("{} links, at most {MAX_LINKS}", spec.links.len()),
            });
        }
        let index = |name: &str| spec.nodes.iter().position(|n| n.name == name);
        let mut nodes: Vec<TopoNode> = spec
            .nodes
            .iter()
            .enumerate()
            .map(|(k, n)| TopoNode {
                name: n.name.clone(),
                router: n.kind == NodeRole::Router,
                ns: format!("{prefix}t{k}"),
                addrs: Vec::new(),
            })
            .collect();
        let mut links = Vec::with_capacity(2 * spec.links.len());
        let mut ends = Vec::with_capacity(2 * spec.links.len());
        for (i, l) in spec.links.iter().enumerate() {
            let (Some(a), Some(b)) = (index(&l.a), index(&l.b)) else {
                return Err(NetemError::UnknownNode(format!("{} or {}", l.a, l.b)));
            };
            nodes[a].addrs.push(link_addr(i, 0));
            nodes[b].addrs.push(link_addr(i, 1));
            let delay = Duration::from_micros((l.delay_ms * 1000.0).round() as u64);
            let queue_packets = spec.queue_of(l);
            for (dir, (from, to, rate)) in [(a, b, l.rate_bps), (b, a, l.reverse_rate())]
                .into_iter()
                .enumerate()
            {
                links.push(TopoLink {
                    id: 2 * i + dir,
                    from: nodes[from].name.clone(),
                    to: nodes[to].name.clone(),
                    from_addr: link_addr(i, dir),
                    to_addr: link_addr(i, 1 - dir),
                    rate_bps: rate,
                    delay,
                    queue_packets,
                    burst_bytes: link_burst(rate),
                });
                ends.push((from, to));
            }
        }
        // The simulator's own hop-count routes (ties to the lowest link id,
        // hosts never forward), so the emulated packets take the simulated paths.
        let ids: Vec<_> = spec
            .nodes
            .iter()
            .map(|n| built.node(&n.name))
            .collect::<Option<_>>()
            .ok_or_else(|| NetemError::UnknownNode("(a spec node)".into()))?;
        let sim = Sim::<cm_sim::RawPayload>::new(built.topology, 0)
            .map_err(cm_sim::spec::SpecError::from)?;
        let n = nodes.len();
        let next = (0..n)
            .map(|v| {
                (0..n)
                    .map(|d| {
                        if v == d {
                            return None;
                        }
                        sim.path(ids[v], ids[d])
                            .and_then(|p| p.first().map(|l| l.index()))
                    })
                    .collect()
            })
            .collect();
        Ok(Plan {
            nodes,
            links,
            ends,
            next,
        })
    }

    /// Index of the node named `name`.
    pub(crate) fn node_index(&self, name: &str) -> Result<usize> {
        self.nodes
            .iter()
            .position(|n| n.name == name)
            .ok_or_else(|| NetemError::UnknownNode(name.to_string()))
    }

    /// The directional links from node `from` to node `to` along the routes.
    pub(crate) fn route(&self, from: usize, to: usize) -> Option<Vec<usize>> {
        let mut at = from;
        let mut path = Vec::new();
        while at != to {
            let l = (*self.next.get(at)?.get(to)?)?;
            path.push(l);
            at = self.ends.get(l)?.1;
            if path.len() > self.links.len() {
                return None;
            }
        }
        Some(path)
    }

    /// The `ip -batch` lines of node `v`: per link it is on, the policy rule and
    /// table that send what its delay box wrote back out of the veth; per
    /// address of every other node, a /32 route into the TUN of the next link
    /// (also for neighbours, so their traffic crosses the link's queue and delay
    /// like everyone else's, instead of the veth's connected /24).
    pub(crate) fn ip_lines(&self, v: usize) -> Vec<String> {
        let mut lines = Vec::new();
        for (l, &(from, _)) in self.ends.iter().enumerate() {
            if from != v {
                continue;
            }
            let (i, link) = (l / 2, &self.links[l]);
            lines.push(format!(
                "rule add iif {} lookup {} pref 100",
                tun(i),
                table(i)
            ));
            lines.push(format!(
                "route add default via {} dev {} onlink table {}",
                link.to_addr,
                veth(i),
                table(i)
            ));
        }
        for (d, node) in self.nodes.iter().enumerate() {
            let Some(l) = self.next[v][d] else { continue };
            for a in &node.addrs {
                lines.push(format!("route add {a}/32 dev {}", tun(l / 2)));
            }
        }
        lines
    }

    /// The `tc -batch` lines of directional link `l`, on its TUN in the
    /// transmitting node: `tbf` for the rate, a `pfifo` of queue + 1 packets
    /// under it for the DropTail queue.
    pub(crate) fn tc_lines(&self, l: usize) -> Vec<String> {
        let link = &self.links[l];
        let dev = tun(l / 2);
        let limit = u64::from(link.queue_packets) + 1;
        vec![
            format!(
                "qdisc add dev {dev} root handle 1: tbf rate {}bit burst {} limit {}",
                link.rate_bps,
                link.burst_bytes,
                limit * MTU
            ),
            format!("qdisc add dev {dev} parent 1:1 handle 10: pfifo limit {limit}"),
        ]
    }
}

/// The `[topology]` table of a scenario file or of a topology-only file.
pub fn parse_topology(text: &str) -> Result<TopologySpec> {
    #[derive(Deserialize)]
    struct File {
        topology: Option<toml::Value>,
    }
    let parse = |e: toml::de::Error| NetemError::Parse {
        what: "topology file".into(),
        detail: e.to_string(),
    };
    let file: File = toml::from_str(text).map_err(parse)?;
    let table = file.topology.ok_or_else(|| NetemError::Parse {
        what: "topology file".into(),
        detail: "no [topology] table".into(),
    })?;
    let spec: TopologySpec = table.try_into().map_err(parse)?;
    spec.validate()?;
    Ok(spec)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn collapse() -> TopologySpec {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../experiments/topologies/collapse-fig1.toml"
        );
        parse_topology(&std::fs::read_to_string(path).unwrap()).unwrap()
    }

    #[test]
    fn collapse_plan_routes_along_the_branches() {
        let spec = collapse();
        let p = Plan::new(&spec, "cmn1x0-").unwrap();
        assert_eq!(p.nodes.len(), 6);
        assert_eq!(p.links.len(), 10);
        assert_eq!(p.nodes[0].ns, "cmn1x0-t0");
        let (n0, n1, n4, n5) = (0, 1, 4, 5);
        // n0 -> n2 (link 0 a->b), n2 -> n3 (link 2 a->b), n3 -> n4 (link 3 a->b).
        assert_eq!(p.route(n0, n4).unwrap(), [0, 4, 6]);
        assert_eq!(p.route(n1, n5).unwrap(), [2, 4, 8]);
        assert_eq!(p.route(n5, n1).unwrap(), [9, 5, 3]);
        let l8 = &p.links[8];
        assert_eq!((l8.from.as_str(), l8.to.as_str()), ("n3", "n5"));
        assert_eq!(l8.rate_bps, 10_000);
        assert_eq!(l8.queue_packets, 50);
        assert_eq!(l8.delay, Duration::from_millis(5));
        assert_eq!(l8.to_addr, Ipv4Addr::new(10, 0, 4, 2));
        assert_eq!(p.nodes[n5].addrs, [Ipv4Addr::new(10, 0, 4, 2)]);
        // Hosts route everything into their one link's TUN.
        let lines = p.ip_lines(n0);
        assert!(lines.contains(&"route add 10.0.3.2/32 dev q0".to_string()));
        assert!(lines.contains(&"route add 10.0.0.2/32 dev q0".to_string()));
        assert!(lines.contains(&"rule add iif q0 lookup 1000 pref 100".to_string()));
        let tc = p.tc_lines(8);
        assert!(tc[0].contains("tbf rate 10000bit burst 1600"), "{tc:?}");
        assert!(tc[1].ends_with("pfifo limit 51"), "{tc:?}");
    }

    #[test]
    fn files_with_and_without_a_scenario_and_bad_ones() {
        let spec = collapse();
        assert_eq!(spec.links.len(), 5);
        assert!(matches!(
            parse_topology("[sim]\nx = 1"),
            Err(NetemError::Parse { .. })
        ));
        assert!(matches!(
            parse_topology("[topology]\nnode = []\nlink = []"),
            Err(NetemError::Spec(_))
        ));
        let scenario = "name = \"x\"\n[topology]\n[[topology.node]]\nname = \"a\"\n\
             [[topology.node]]\nname = \"b\"\n[[topology.link]]\na = \"a\"\nb = \"b\"\n\
             rate_bps = 1000\ndelay_ms = 0.0\n";
        assert_eq!(parse_topology(scenario).unwrap().nodes.len(), 2);
    }

    #[test]
    fn bursts_fit_one_mtu() {
        assert_eq!(link_burst(10_000), 1600);
        assert_eq!(link_burst(100_000_000), 12_500);
    }
}
