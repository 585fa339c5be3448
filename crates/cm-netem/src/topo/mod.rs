//! Multi-node networks from a [`TopologySpec`] (the `[topology]` table the
//! simulator reads): one namespace per node, one veth pair per duplex link,
//! each link direction's rate, DropTail queue and delay in its transmitting
//! node, static hop-count routes, and a self-test of every link direction.
//!
//! | module | what |
//! |---|---|
//! | `plan` | names, addresses, routes, qdisc parameters (no root needed) |
//! | `setup` | creating it all with `ip`, `tc` and the delay boxes |
//! | `check` | the per-link self-test |
//! | `probe` | the self-test's UDP senders and receivers |
//!
//! See the crate docs' "Topologies" section for the design and its limits.

mod check;
mod plan;
mod probe;
mod setup;

pub use check::{LinkCheck, TopoSelfTestOptions, TopoSelfTestReport};
/// The topology description (re-exported so users need not depend on `cm-sim`).
pub use cm_sim::spec::TopologySpec;
pub use plan::{MAX_LINKS, MTU, TopoLink, TopoNode, link_burst, parse_topology};

use std::fmt;
use std::net::Ipv4Addr;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::thread::JoinHandle;

use crate::delaybox::{DelayBox, DelayBoxStats};
use crate::error::{BuildStep, NetemError, Result};
use crate::netns;
use crate::path::QdiscStats;
use plan::Plan;

/// Per-process counter so one process can build several networks.
static NEXT_ID: AtomicU32 = AtomicU32::new(0);

struct Inner {
    /// Namespaces created so far (a partial build deletes exactly these).
    created: Vec<String>,
    /// One delay box per duplex link, in link order.
    boxes: Vec<DelayBox>,
    torn_down: bool,
}

/// An emulated multi-node network. Dropping it tears everything down
/// (namespaces, veths, TUNs, qdiscs, delay box threads); [`Network::teardown`]
/// does the same and reports errors.
pub struct Network {
    spec: TopologySpec,
    plan: Plan,
    inner: Mutex<Inner>,
}

impl fmt::Debug for Network {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Network")
            .field("nodes", &self.plan.nodes)
            .finish()
    }
}

impl Network {
    /// Build the network `spec` describes. Needs root. On error everything
    /// built so far is torn down. Unlike [`crate::Path::build`] it does not
    /// sweep other processes' leftovers ([`crate::sweep_stale`] does, and
    /// `cm-netem cleanup`).
    pub fn build(spec: &TopologySpec) -> Result<Network> {
        Self::build_inner(spec, None)
    }

    /// [`Network::build`] that fails on purpose at `step` (to test cleanup of
    /// partial builds): [`BuildStep::Namespaces`], [`BuildStep::Links`] or
    /// [`BuildStep::Routes`].
    #[doc(hidden)]
    pub fn build_failing_at(spec: &TopologySpec, step: BuildStep) -> Result<Network> {
        Self::build_inner(spec, Some(step))
    }

    fn build_inner(spec: &TopologySpec, fail_at: Option<BuildStep>) -> Result<Network> {
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        let prefix = format!("{}{}x{id}-", netns::NS_PREFIX, std::process::id());
        let plan = Plan::new(spec, &prefix)?;
        if !netns::is_root() {
            return Err(NetemError::NotRoot);
        }
        let net = Network {
            spec: spec.clone(),
            plan,
            inner: Mutex::new(Inner {
                created: Vec::new(),
                boxes: Vec::new(),
                torn_down: false,
            }),
        };
        // On error, `net` is dropped here and tears down what exists.
        net.setup(fail_at)
            .map_err(|e| NetemError::BuildNetwork(Box::new(e)))?;
        Ok(net)
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The description this network was built from.
    pub fn spec(&self) -> &TopologySpec {
        &self.spec
    }

    /// The nodes, in the spec's order.
    pub fn nodes(&self) -> &[TopoNode] {
        &self.plan.nodes
    }

    /// The directional links, by id (`2i` a→b and `2i + 1` b→a of spec entry `i`).
    pub fn links(&self) -> &[TopoLink] {
        &self.plan.links
    }

    /// The node named `name`.
    pub fn node(&self, name: &str) -> Result<&TopoNode> {
        Ok(&self.plan.nodes[self.plan.node_index(name)?])
    }

    /// The network namespace of node `name`.
    pub fn ns(&self, name: &str) -> Result<&str> {
        Ok(&self.node(name)?.ns)
    }

    /// The address of node `name`: its address on its first link (every one of
    /// its addresses is reachable from every node that has a route to it).
    pub fn node_addr(&self, name: &str) -> Result<Ipv4Addr> {
        self.node(name)?
            .addrs
            .first()
            .copied()
            .ok_or_else(|| NetemError::UnknownNode(name.to_string()))
    }

    /// The directional link ids a packet from `from` to `to` crosses, in order
    /// (the simulator's hop-count route), or `None` when there is no route.
    pub fn route(&self, from: &str, to: &str) -> Result<Option<Vec<usize>>> {
        let (a, b) = (self.plan.node_index(from)?, self.plan.node_index(to)?);
        Ok(self.plan.route(a, b))
    }

    /// A command that runs `program` in node `name`'s namespace (via `ip netns exec`).
    pub fn exec(&self, name: &str, program: &str) -> Result<Command> {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", self.ns(name)?, program]);
        Ok(c)
    }

    /// Run `f` on a new thread inside node `name`'s namespace: sockets it
    /// creates live there. Returns once the thread has entered the namespace.
    pub fn spawn_in<F, T>(&self, name: &str, f: F) -> Result<JoinHandle<T>>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        if self.is_torn_down() {
            return Err(NetemError::TornDown);
        }
        netns::spawn_in_ns(self.ns(name)?, name, f)
    }

    /// Counters of directional link `id`'s queue (`tc -s` of its `tbf`: sent,
    /// dropped, backlog).
    pub fn link_stats(&self, id: usize) -> Result<QdiscStats> {
        let &(from, _) = self.plan.ends.get(id).ok_or(NetemError::UnknownLink(id))?;
        if self.is_torn_down() {
            return Err(NetemError::TornDown);
        }
        crate::path::tbf_stats(&self.plan.nodes[from].ns, &plan::tun(id / 2))
    }

    /// Delay box counters of duplex link `i` (direction 0 is a→b).
    pub fn delay_box_stats(&self, i: usize) -> Result<DelayBoxStats> {
        let inner = self.lock();
        inner
            .boxes
            .get(i)
            .map(|b| b.stats())
            .ok_or(NetemError::UnknownLink(2 * i))
    }

    /// Tear everything down: stop the delay boxes, delete the namespaces (with
    /// them the veths, TUNs and qdiscs). Idempotent; reports every error.
    pub fn teardown(&self) -> Result<()> {
        let mut inner = self.lock();
        if inner.torn_down {
            return Ok(());
        }
        inner.torn_down = true;
        let boxes: Vec<_> = inner.boxes.drain(..).collect();
        let created: Vec<_> = inner.created.drain(..).collect();
        crate::teardown::tear_down(boxes, created, "tearing down the network")
    }

    /// Whether [`Network::teardown`] has run.
    pub fn is_torn_down(&self) -> bool {
        self.lock().torn_down
    }
}

impl Drop for Network {
    fn drop(&mut self) {
        if let Err(e) = self.teardown() {
            eprintln!("cm-netem: {e}");
        }
    }
}
