//! Topology builder, static shortest-path routing, and the dumbbell of
//! sigcomm1999 Fig 7.

use std::collections::VecDeque;

use cm_core::Duration;

use crate::error::TopologyError;
use crate::link::{LinkConfig, QueueLimit};
use crate::packet::{LinkId, NodeId};

/// Whether a node runs a user-supplied host or is a built-in router.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeKind {
    /// An end host; receives packets addressed to it and never forwards.
    Host,
    /// A router; forwards by destination along the static shortest path.
    Router,
}

/// One unidirectional link of a [`Topology`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LinkSpec {
    /// Transmitting node.
    pub from: NodeId,
    /// Receiving node.
    pub to: NodeId,
    /// Parameters.
    pub config: LinkConfig,
}

/// A network under construction: nodes and unidirectional links.
#[derive(Clone, Debug, Default)]
pub struct Topology {
    pub(crate) nodes: Vec<NodeKind>,
    pub(crate) links: Vec<LinkSpec>,
}

/// Next-hop table: `next[src * n + dst]` is the outgoing link, or `NONE`.
#[derive(Clone, Debug)]
pub(crate) struct Routes {
    n: usize,
    next: Vec<u32>,
}

const NONE: u32 = u32::MAX;

impl Routes {
    /// The link `src` uses towards `dst`.
    #[inline]
    pub(crate) fn next_hop(&self, src: NodeId, dst: NodeId) -> Option<LinkId> {
        let (s, d) = (src.index(), dst.index());
        if s >= self.n || d >= self.n {
            return None;
        }
        match self.next[s * self.n + d] {
            NONE => None,
            l => Some(LinkId(l)),
        }
    }
}

impl Topology {
    /// An empty topology.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds an end host.
    pub fn add_host(&mut self) -> NodeId {
        self.add_node(NodeKind::Host)
    }

    /// Adds a router.
    pub fn add_router(&mut self) -> NodeId {
        self.add_node(NodeKind::Router)
    }

    fn add_node(&mut self, kind: NodeKind) -> NodeId {
        self.nodes.push(kind);
        NodeId((self.nodes.len() - 1) as u32)
    }

    /// Number of nodes.
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// The kind of `node`, if it exists.
    pub fn kind(&self, node: NodeId) -> Option<NodeKind> {
        self.nodes.get(node.index()).copied()
    }

    /// The links added so far, indexed by [`LinkId`].
    pub fn links(&self) -> &[LinkSpec] {
        &self.links
    }

    /// Adds a unidirectional link `from -> to`.
    pub fn add_link(
        &mut self,
        from: NodeId,
        to: NodeId,
        config: LinkConfig,
    ) -> Result<LinkId, TopologyError> {
        for n in [from, to] {
            if self.kind(n).is_none() {
                return Err(TopologyError::UnknownNode(n));
            }
        }
        if from == to {
            return Err(TopologyError::SelfLoop(from));
        }
        if config.bandwidth_bps == 0 {
            return Err(TopologyError::ZeroBandwidth { from, to });
        }
        if !(0.0..=1.0).contains(&config.loss) {
            return Err(TopologyError::InvalidLoss { from, to });
        }
        let c = &config;
        if !(0.0..=1.0).contains(&c.reorder) || (c.reorder > 0.0 && c.reorder_delay.is_zero()) {
            return Err(TopologyError::InvalidReorder { from, to });
        }
        if !(0.0..=1.0).contains(&c.duplicate) {
            return Err(TopologyError::InvalidDuplicate { from, to });
        }
        self.links.push(LinkSpec { from, to, config });
        Ok(LinkId((self.links.len() - 1) as u32))
    }

    /// Adds two links, `a -> b` with `ab` and `b -> a` with `ba`.
    pub fn add_duplex(
        &mut self,
        a: NodeId,
        b: NodeId,
        ab: LinkConfig,
        ba: LinkConfig,
    ) -> Result<(LinkId, LinkId), TopologyError> {
        let l1 = self.add_link(a, b, ab)?;
        let l2 = self.add_link(b, a, ba)?;
        Ok((l1, l2))
    }

    /// Adds a symmetric duplex link.
    pub fn add_duplex_sym(
        &mut self,
        a: NodeId,
        b: NodeId,
        config: LinkConfig,
    ) -> Result<(LinkId, LinkId), TopologyError> {
        self.add_duplex(a, b, config, config)
    }

    /// Computes hop-count shortest paths by destination (one reverse BFS per
    /// destination; ties broken by lowest link id; hosts never forward), and
    /// checks that every host reaches every other host.
    pub(crate) fn routes(&self) -> Result<Routes, TopologyError> {
        let n = self.nodes.len();
        let mut incoming: Vec<Vec<u32>> = vec![Vec::new(); n];
        for (i, l) in self.links.iter().enumerate() {
            incoming[l.to.index()].push(i as u32);
        }
        let mut next = vec![NONE; n * n];
        let mut seen = vec![false; n];
        let mut queue = VecDeque::new();
        for dst in 0..n {
            seen.iter_mut().for_each(|s| *s = false);
            seen[dst] = true;
            queue.clear();
            queue.push_back(dst);
            while let Some(u) = queue.pop_front() {
                if u != dst && self.nodes[u] == NodeKind::Host {
                    continue; // hosts do not forward
                }
                for &l in &incoming[u] {
                    let v = self.links[l as usize].from.index();
                    if !seen[v] {
                        seen[v] = true;
                        next[v * n + dst] = l;
                        queue.push_back(v);
                    }
                }
            }
        }
        let routes = Routes { n, next };
        let hosts: Vec<NodeId> = (0..n as u32)
            .map(NodeId)
            .filter(|&id| self.kind(id) == Some(NodeKind::Host))
            .collect();
        for &a in &hosts {
            for &b in &hosts {
                if a != b && routes.next_hop(a, b).is_none() {
                    return Err(TopologyError::Unroutable { from: a, to: b });
                }
            }
        }
        Ok(routes)
    }
}

/// Parameters of the dumbbell of sigcomm1999 Fig 7.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DumbbellConfig {
    /// Hosts attached to router L.
    pub left: usize,
    /// Hosts attached to router R.
    pub right: usize,
    /// Every access link (both directions).
    pub access: LinkConfig,
    /// The bottleneck L -> R.
    pub bottleneck: LinkConfig,
    /// The reverse direction R -> L.
    pub reverse: LinkConfig,
}

impl DumbbellConfig {
    /// A symmetric dumbbell: `n` hosts per side, 100 Mbit/s 1 ms unlimited
    /// access links, and `bottleneck` in both directions.
    pub fn symmetric(n: usize, bottleneck: LinkConfig) -> Self {
        DumbbellConfig {
            left: n,
            right: n,
            access: LinkConfig::new(100_000_000, Duration::from_millis(1), QueueLimit::Unlimited),
            bottleneck,
            reverse: bottleneck,
        }
    }

    /// The paper's setting (sigcomm1999 §4.1): bottleneck of
    /// `bottleneck_bps`, total one-way propagation delay `one_way` (60 ms, or
    /// 35 ms in some experiments), queue equal to the bandwidth-delay product.
    ///
    /// Choices the paper leaves open: access links are 100 Mbit/s with 1 ms
    /// each (so the bottleneck gets `one_way - 2 ms`), "bandwidth-delay
    /// product" is taken as bottleneck rate × round-trip propagation delay,
    /// in bytes, and the reverse direction mirrors the forward one.
    pub fn sigcomm1999(n: usize, bottleneck_bps: u64, one_way: Duration) -> Self {
        let access_delay = Duration::from_millis(1);
        let rtt = one_way.saturating_mul(2);
        let bdp = u128::from(bottleneck_bps) * u128::from(rtt.as_micros()) / 8_000_000;
        let bdp = u64::try_from(bdp).unwrap_or(u64::MAX);
        let bottleneck = LinkConfig::new(
            bottleneck_bps,
            one_way - access_delay.saturating_mul(2),
            QueueLimit::Bytes(bdp),
        );
        let mut c = Self::symmetric(n, bottleneck);
        c.access.delay = access_delay;
        c
    }
}

/// A built dumbbell: the topology plus the ids the caller needs.
#[derive(Clone, Debug)]
pub struct Dumbbell {
    /// The network; hand it to [`Sim::new`](crate::Sim::new).
    pub topology: Topology,
    /// Hosts behind router L, in order.
    pub left_hosts: Vec<NodeId>,
    /// Hosts behind router R, in order.
    pub right_hosts: Vec<NodeId>,
    /// Router L.
    pub router_l: NodeId,
    /// Router R.
    pub router_r: NodeId,
    /// The bottleneck link L -> R.
    pub bottleneck: LinkId,
    /// The reverse link R -> L.
    pub reverse: LinkId,
}

/// Builds the simulation topology of sigcomm1999 Fig 7 (§4.1, §5): `left`
/// hosts on router L, `right` hosts on router R, each by a duplex access
/// link, and one bottleneck duplex link L <-> R.
pub fn dumbbell(cfg: &DumbbellConfig) -> Result<Dumbbell, TopologyError> {
    let mut t = Topology::new();
    let router_l = t.add_router();
    let router_r = t.add_router();
    let (bottleneck, reverse) = t.add_duplex(router_l, router_r, cfg.bottleneck, cfg.reverse)?;
    let mut left_hosts = Vec::with_capacity(cfg.left);
    for _ in 0..cfg.left {
        let h = t.add_host();
        t.add_duplex_sym(h, router_l, cfg.access)?;
        left_hosts.push(h);
    }
    let mut right_hosts = Vec::with_capacity(cfg.right);
    for _ in 0..cfg.right {
        let h = t.add_host();
        t.add_duplex_sym(h, router_r, cfg.access)?;
        right_hosts.push(h);
    }
    Ok(Dumbbell {
        topology: t,
        left_hosts,
        right_hosts,
        router_l,
        router_r,
        bottleneck,
        reverse,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fast() -> LinkConfig {
        LinkConfig::new(1_000_000, Duration::from_millis(1), QueueLimit::Packets(10))
    }

    #[test]
    fn bad_links_are_typed_errors() {
        let mut t = Topology::new();
        let a = t.add_host();
        let b = t.add_host();
        assert_eq!(
            t.add_link(a, NodeId(9), fast()),
            Err(TopologyError::UnknownNode(NodeId(9)))
        );
        let zero = LinkConfig {
            bandwidth_bps: 0,
            ..fast()
        };
        assert_eq!(
            t.add_link(a, b, zero),
            Err(TopologyError::ZeroBandwidth { from: a, to: b })
        );
        assert_eq!(
            t.add_link(a, b, fast().with_loss(1.5)),
            Err(TopologyError::InvalidLoss { from: a, to: b })
        );
        assert_eq!(
            t.add_link(a, b, fast().with_loss(f64::NAN)),
            Err(TopologyError::InvalidLoss { from: a, to: b })
        );
        let ms = Duration::from_millis(1);
        for bad in [
            fast().with_reorder(-0.1, ms),
            fast().with_reorder(f64::NAN, ms),
            fast().with_reorder(0.1, Duration::ZERO),
        ] {
            assert_eq!(
                t.add_link(a, b, bad),
                Err(TopologyError::InvalidReorder { from: a, to: b })
            );
        }
        for p in [1.01, f64::NAN] {
            assert_eq!(
                t.add_link(a, b, fast().with_duplicate(p)),
                Err(TopologyError::InvalidDuplicate { from: a, to: b })
            );
        }
        assert!(t.add_link(a, b, fast().with_reorder(1.0, ms)).is_ok());
        assert!(
            t.add_link(a, b, fast().with_reorder(0.0, Duration::ZERO))
                .is_ok()
        );
        assert!(t.add_link(a, b, fast().with_duplicate(1.0)).is_ok());
        assert_eq!(t.add_link(a, a, fast()), Err(TopologyError::SelfLoop(a)));
    }

    #[test]
    fn one_way_link_leaves_reverse_unroutable() {
        let mut t = Topology::new();
        let a = t.add_host();
        let b = t.add_host();
        t.add_link(a, b, fast()).unwrap();
        assert_eq!(
            t.routes().unwrap_err(),
            TopologyError::Unroutable { from: b, to: a }
        );
    }

    #[test]
    fn hosts_do_not_forward() {
        // a - h - b with h a host: a cannot reach b through h.
        let mut t = Topology::new();
        let a = t.add_host();
        let h = t.add_host();
        let b = t.add_host();
        t.add_duplex_sym(a, h, fast()).unwrap();
        t.add_duplex_sym(h, b, fast()).unwrap();
        assert!(matches!(t.routes(), Err(TopologyError::Unroutable { .. })));
    }

    #[test]
    fn dumbbell_routes_left_to_right_through_the_bottleneck() {
        let d = dumbbell(&DumbbellConfig::symmetric(3, fast())).unwrap();
        let r = d.topology.routes().unwrap();
        for &l in &d.left_hosts {
            for &rh in &d.right_hosts {
                let first = r.next_hop(l, rh).unwrap();
                assert_eq!(d.topology.links()[first.index()].to, d.router_l);
                assert_eq!(r.next_hop(d.router_l, rh), Some(d.bottleneck));
                assert_eq!(r.next_hop(d.router_r, l).map(|x| x.index()), {
                    Some(d.reverse.index())
                });
                let last = r.next_hop(d.router_r, rh).unwrap();
                assert_eq!(d.topology.links()[last.index()].to, rh);
            }
            // left-to-left stays on the left router
            let other = d.left_hosts.iter().find(|&&x| x != l).copied().unwrap();
            let hop = r.next_hop(d.router_l, other).unwrap();
            assert_eq!(d.topology.links()[hop.index()].to, other);
        }
    }

    #[test]
    fn sigcomm1999_queue_is_the_bandwidth_delay_product() {
        let c = DumbbellConfig::sigcomm1999(2, 1_000_000, Duration::from_millis(60));
        // 1 Mbit/s × 120 ms = 15000 bytes
        assert_eq!(c.bottleneck.queue, QueueLimit::Bytes(15_000));
        assert_eq!(c.bottleneck.delay, Duration::from_millis(58));
    }
}
