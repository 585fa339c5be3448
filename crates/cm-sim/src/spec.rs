//! Multi-node topologies as data: the `[topology]` table of a scenario
//! file, read by the simulator (`cm-experiments`) and by the real-network
//! emulator (`cm-netem`) alike, so one file describes both.
//!
//! ```toml
//! [topology]
//! queue_packets = 50          # DropTail limit of every link direction
//!                             # (default 50, ns-2's `Queue set limit_ 50`)
//! [[topology.node]]
//! name = "n0"
//! kind = "host"               # host (default) | router
//! [[topology.node]]
//! name = "n2"
//! kind = "router"
//! [[topology.node]]
//! name = "n4"
//!
//! [[topology.link]]           # a duplex link, like ns-2's `duplex-link`
//! a = "n0"
//! b = "n2"
//! rate_bps = 300_000          # both directions unless reverse_rate_bps
//! delay_ms = 10.0             # one-way propagation delay
//! # queue_packets = 20        # this link's limit, both directions
//! # reverse_rate_bps = 64_000 # b -> a
//! [[topology.link]]
//! a = "n2"
//! b = "n4"
//! rate_bps = 1_000_000
//! delay_ms = 10.0
//! ```
//!
//! Routing is static and by hop count ([`Topology`]); hosts never
//! forward. [`TopologySpec::build`] validates the whole description and
//! returns the simulator's [`Topology`] with the node and link ids each
//! name and entry became.

use std::collections::{BTreeMap, BTreeSet};

use cm_core::Duration;
use serde::{Deserialize, Serialize};

use crate::error::TopologyError;
use crate::link::{LinkConfig, QueueLimit};
use crate::packet::{LinkId, NodeId};
use crate::topology::Topology;

/// DropTail limit of a link direction when neither the link nor the
/// topology gives one: ns-2's default (`Queue set limit_ 50`).
pub const DEFAULT_QUEUE_PACKETS: u32 = 50;

/// A multi-node topology: named nodes and duplex links between them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TopologySpec {
    /// DropTail limit of every link direction that does not give its own
    /// (default [`DEFAULT_QUEUE_PACKETS`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_packets: Option<u32>,
    /// The nodes, in id order.
    #[serde(rename = "node")]
    pub nodes: Vec<NodeSpec>,
    /// The duplex links, in id order (entry `i` becomes links `2i`, a→b,
    /// and `2i + 1`, b→a).
    #[serde(rename = "link")]
    pub links: Vec<DuplexSpec>,
}

/// One node.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeSpec {
    /// Its name (flows and links refer to it).
    pub name: String,
    /// End host or router.
    #[serde(default)]
    pub kind: NodeRole,
}

/// Whether a node is an end host or a router.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NodeRole {
    /// An end host: runs applications, never forwards.
    #[default]
    Host,
    /// A router: forwards along the shortest path, runs nothing.
    Router,
}

/// One duplex link.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DuplexSpec {
    /// One end.
    pub a: String,
    /// The other end.
    pub b: String,
    /// Rate a→b (and b→a unless `reverse_rate_bps`), bits per second.
    pub rate_bps: u64,
    /// Rate b→a, bits per second (default `rate_bps`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reverse_rate_bps: Option<u64>,
    /// One-way propagation delay, milliseconds.
    pub delay_ms: f64,
    /// DropTail limit of both directions (default the topology's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_packets: Option<u32>,
}

/// Why a [`TopologySpec`] is unusable.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum SpecError {
    /// No nodes, or no links.
    #[error("a topology needs at least two nodes and one link")]
    Empty,
    /// A node without a name.
    #[error("node {0} has an empty name")]
    EmptyName(usize),
    /// Two nodes with one name.
    #[error("two nodes are named {0:?}")]
    DuplicateNode(String),
    /// A link naming a node that does not exist.
    #[error("link {link} ({a}–{b}) names unknown node {name:?}")]
    UnknownNode {
        /// The link's index.
        link: usize,
        /// Its `a`.
        a: String,
        /// Its `b`.
        b: String,
        /// The name that matches no node.
        name: String,
    },
    /// A link from a node to itself.
    #[error("link {0} joins node {1:?} to itself")]
    SelfLoop(usize, String),
    /// Two links between the same pair of nodes.
    #[error("links {0} and {1} join the same two nodes")]
    DuplicateLink(usize, usize),
    /// A zero rate.
    #[error("link {0} has a zero rate")]
    ZeroRate(usize),
    /// A negative, infinite or NaN delay.
    #[error("link {0} has delay_ms {1}: give a finite value >= 0")]
    BadDelay(usize, f64),
    /// A zero queue limit.
    #[error("link {0} has a zero queue limit")]
    ZeroQueue(usize),
    /// A zero default queue limit.
    #[error("topology queue_packets is zero")]
    ZeroDefaultQueue,
    /// The topology builder refused it (e.g. a host that reaches no other).
    #[error("{0}")]
    Topology(#[from] TopologyError),
}

/// A [`TopologySpec`] turned into the simulator's [`Topology`].
#[derive(Clone, Debug)]
pub struct BuiltTopology {
    /// The topology, ready for [`Sim::new`](crate::Sim::new).
    pub topology: Topology,
    /// Each node's id, by name.
    pub nodes: BTreeMap<String, NodeId>,
    /// Each duplex link's (a→b, b→a) link ids, in spec order.
    pub links: Vec<(LinkId, LinkId)>,
}

impl BuiltTopology {
    /// The id of the node named `name`.
    pub fn node(&self, name: &str) -> Option<NodeId> {
        self.nodes.get(name).copied()
    }
}

impl DuplexSpec {
    /// The rate b→a.
    pub fn reverse_rate(&self) -> u64 {
        self.reverse_rate_bps.unwrap_or(self.rate_bps)
    }
}

impl TopologySpec {
    /// The DropTail limit of link `i`'s two directions.
    pub fn queue_of(&self, link: &DuplexSpec) -> u32 {
        link.queue_packets
            .or(self.queue_packets)
            .unwrap_or(DEFAULT_QUEUE_PACKETS)
    }

    /// The names of the host nodes, in id order.
    pub fn hosts(&self) -> impl Iterator<Item = &str> {
        self.nodes
            .iter()
            .filter(|n| n.kind == NodeRole::Host)
            .map(|n| n.name.as_str())
    }

    /// The node named `name`.
    pub fn node(&self, name: &str) -> Option<&NodeSpec> {
        self.nodes.iter().find(|n| n.name == name)
    }

    /// Checks everything but routing (names, link ends, rates, delays,
    /// queues); [`TopologySpec::build`] also checks that every host
    /// reaches every other.
    pub fn validate(&self) -> Result<(), SpecError> {
        if self.nodes.len() < 2 || self.links.is_empty() {
            return Err(SpecError::Empty);
        }
        if self.queue_packets == Some(0) {
            return Err(SpecError::ZeroDefaultQueue);
        }
        let mut names = BTreeSet::new();
        for (i, n) in self.nodes.iter().enumerate() {
            if n.name.trim().is_empty() {
                return Err(SpecError::EmptyName(i));
            }
            if !names.insert(n.name.as_str()) {
                return Err(SpecError::DuplicateNode(n.name.clone()));
            }
        }
        let mut pairs: BTreeMap<(&str, &str), usize> = BTreeMap::new();
        for (i, l) in self.links.iter().enumerate() {
            for name in [&l.a, &l.b] {
                if !names.contains(name.as_str()) {
                    return Err(SpecError::UnknownNode {
                        link: i,
                        a: l.a.clone(),
                        b: l.b.clone(),
                        name: name.clone(),
                    });
                }
            }
            if l.a == l.b {
                return Err(SpecError::SelfLoop(i, l.a.clone()));
            }
            let key = if l.a < l.b {
                (l.a.as_str(), l.b.as_str())
            } else {
                (l.b.as_str(), l.a.as_str())
            };
            if let Some(&j) = pairs.get(&key) {
                return Err(SpecError::DuplicateLink(j, i));
            }
            pairs.insert(key, i);
            if l.rate_bps == 0 || l.reverse_rate_bps == Some(0) {
                return Err(SpecError::ZeroRate(i));
            }
            if !l.delay_ms.is_finite() || l.delay_ms < 0.0 {
                return Err(SpecError::BadDelay(i, l.delay_ms));
            }
            if l.queue_packets == Some(0) {
                return Err(SpecError::ZeroQueue(i));
            }
        }
        Ok(())
    }

    /// Validates the description and builds the simulator's topology.
    pub fn build(&self) -> Result<BuiltTopology, SpecError> {
        self.validate()?;
        let mut topology = Topology::new();
        let mut nodes = BTreeMap::new();
        for n in &self.nodes {
            let id = match n.kind {
                NodeRole::Host => topology.add_host(),
                NodeRole::Router => topology.add_router(),
            };
            nodes.insert(n.name.clone(), id);
        }
        let mut links = Vec::with_capacity(self.links.len());
        for l in &self.links {
            let (a, b) = (nodes[&l.a], nodes[&l.b]);
            let delay = Duration::from_micros((l.delay_ms * 1000.0).round() as u64);
            let queue = QueueLimit::Packets(self.queue_of(l));
            let ab = LinkConfig::new(l.rate_bps, delay, queue);
            let ba = LinkConfig::new(l.reverse_rate(), delay, queue);
            links.push(topology.add_duplex(a, b, ab, ba)?);
        }
        topology.routes()?;
        Ok(BuiltTopology {
            topology,
            nodes,
            links,
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn parse(s: &str) -> TopologySpec {
        #[derive(Deserialize)]
        struct File {
            topology: TopologySpec,
        }
        toml::from_str::<File>(s).unwrap().topology
    }

    const LINE: &str = r#"
        [topology]
        [[topology.node]]
        name = "a"
        [[topology.node]]
        name = "r"
        kind = "router"
        [[topology.node]]
        name = "b"
        [[topology.link]]
        a = "a"
        b = "r"
        rate_bps = 1_000_000
        delay_ms = 5.0
        [[topology.link]]
        a = "r"
        b = "b"
        rate_bps = 300_000
        delay_ms = 2.5
        queue_packets = 7
    "#;

    #[test]
    fn builds_links_in_order_with_queues_and_delays() {
        let spec = parse(LINE);
        let built = spec.build().unwrap();
        assert_eq!(built.nodes.len(), 3);
        let links = built.topology.links();
        assert_eq!(links.len(), 4);
        assert_eq!(
            links[0].config.queue,
            QueueLimit::Packets(DEFAULT_QUEUE_PACKETS)
        );
        assert_eq!(links[2].config.queue, QueueLimit::Packets(7));
        assert_eq!(links[3].config.bandwidth_bps, 300_000);
        assert_eq!(links[3].config.delay, Duration::from_micros(2500));
        assert_eq!(links[1].from, built.node("r").unwrap());
        assert_eq!(spec.hosts().collect::<Vec<_>>(), ["a", "b"]);
    }

    #[test]
    fn refuses_bad_descriptions_with_their_reason() {
        let base = parse(LINE);
        let mut s = base.clone();
        s.links[1].b = "c".into();
        assert!(matches!(s.build(), Err(SpecError::UnknownNode { name, .. }) if name == "c"));
        let mut s = base.clone();
        s.links[0].delay_ms = f64::NAN;
        assert!(matches!(s.build(), Err(SpecError::BadDelay(0, _))));
        let mut s = base.clone();
        s.links[1].rate_bps = 0;
        assert_eq!(s.build().unwrap_err(), SpecError::ZeroRate(1));
        let mut s = base.clone();
        s.links.push(DuplexSpec {
            a: "b".into(),
            ..base.links[1].clone()
        });
        assert!(matches!(s.build(), Err(SpecError::SelfLoop(2, _))));
        let mut s = base.clone();
        s.links[1] = DuplexSpec {
            a: "a".into(),
            b: "r".into(),
            ..base.links[1].clone()
        };
        assert_eq!(s.build().unwrap_err(), SpecError::DuplicateLink(0, 1));
        let mut s = base.clone();
        s.nodes[2].name = "a".into();
        assert_eq!(s.build().unwrap_err(), SpecError::DuplicateNode("a".into()));
        // A host behind another host: hosts do not forward.
        let mut s = base.clone();
        s.nodes[1].kind = NodeRole::Host;
        assert!(matches!(s.build(), Err(SpecError::Topology(_))));
        assert!(toml::from_str::<TopologySpec>("node = []\nlink = []\nbogus = 1").is_err());
    }

    #[test]
    fn the_checked_in_collapse_topology_builds() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../experiments/topologies/collapse-fig1.toml"
        );
        let spec = parse(&std::fs::read_to_string(path).unwrap());
        let built = spec.build().unwrap();
        assert_eq!(spec.hosts().collect::<Vec<_>>(), ["n0", "n1", "n4", "n5"]);
        assert_eq!(built.topology.links().len(), 10);
    }
}
