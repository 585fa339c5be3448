//! The network a scenario runs on: the sigcomm1999 dumbbell of
//! `[bottleneck]`/`[access]`, or the `[topology]` table's nodes and links.

use cm_core::Duration;
use cm_sim::{DumbbellConfig, LinkConfig, LinkId, NodeId, QueueLimit, Topology, dumbbell};

use crate::scenario::{Scenario, ScenarioError};

/// A built network and where the scenario's hosts sit in it.
pub(super) struct Network {
    /// The topology, for `Sim::new`.
    pub topology: Topology,
    /// The sender hosts' nodes, in the order of `Scenario::hosts().0`.
    pub senders: Vec<NodeId>,
    /// The receiver hosts' nodes, in the order of `Scenario::hosts().1`.
    pub receivers: Vec<NodeId>,
    /// The dumbbell's bottleneck (`None` for a topology: the link with the
    /// most drops, known after the run).
    pub bottleneck: Option<LinkId>,
    /// Every link direction of a topology, named `a->b` (empty for the
    /// dumbbell).
    pub links: Vec<(String, LinkId)>,
}

pub(super) fn ms(m: f64) -> Duration {
    Duration::from_micros((m * 1e3).round() as u64)
}

/// Builds `s`'s network for the hosts `left` (senders) and `right`
/// (receivers).
pub(super) fn build(
    s: &Scenario,
    left: &[String],
    right: &[String],
) -> Result<Network, ScenarioError> {
    if let Some(t) = &s.topology {
        let built = t
            .build()
            .map_err(|e| ScenarioError::Invalid(format!("topology: {e}")))?;
        let node = |n: &String| {
            built
                .node(n)
                .ok_or_else(|| ScenarioError::Invalid(format!("{n:?} is not a node of [topology]")))
        };
        let senders = left.iter().map(node).collect::<Result<Vec<_>, _>>()?;
        let receivers = right.iter().map(node).collect::<Result<Vec<_>, _>>()?;
        let mut links = Vec::new();
        for (l, &(ab, ba)) in t.links.iter().zip(&built.links) {
            links.push((format!("{}->{}", l.a, l.b), ab));
            links.push((format!("{}->{}", l.b, l.a), ba));
        }
        return Ok(Network {
            topology: built.topology,
            senders,
            receivers,
            bottleneck: None,
            links,
        });
    }
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
    Ok(Network {
        topology: d.topology,
        senders: d.left_hosts,
        receivers: d.right_hosts,
        bottleneck: Some(d.bottleneck),
        links: Vec::new(),
    })
}
