//! One emulated path: its three namespaces, building it, running code in
//! it and tearing it down.
//!
//! | module | what |
//! |---|---|
//! | `topology` | namespaces, veths, addresses, routes, the `tbf` bottleneck |
//! | `loss` | the random-loss BPF filter at the receiver's ingress |
//! | `impair` | reordering and duplication in the delay box |
//! | `stats` | bottleneck and delay-box counters |

mod impair;
mod loss;
mod stats;
mod topology;

pub(crate) use stats::tbf_stats;
pub use stats::{PathStats, QdiscStats};
pub use topology::tbf_burst;

use std::fmt;
use std::net::Ipv4Addr;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::thread::JoinHandle;

use crate::error::{BuildStep, NetemError, Result};
use serde::{Deserialize, Serialize};

use crate::config::PathConfig;
use crate::delaybox::DelayBox;
use crate::netns;

/// Per-process counter so one process can build several paths.
static NEXT_ID: AtomicU32 = AtomicU32::new(0);

/// Interface of the sender and of the receiver (each in its own namespace).
pub const HOST_IF: &str = "eth0";
/// Router interface toward the sender.
pub const ROUTER_SND_IF: &str = "r-snd";
/// Router interface toward the receiver.
pub const ROUTER_RCV_IF: &str = "r-rcv";
/// Policy-routing table that routes packets coming out of the delay box.
const DELAYBOX_TABLE: &str = "100";

/// One of the three namespaces of a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Node {
    /// The sending host.
    Sender,
    /// The router with the bottleneck (tbf) and the delay box.
    Router,
    /// The receiving host (random loss at its ingress).
    Receiver,
}

impl Node {
    fn index(self) -> usize {
        match self {
            Node::Sender => 0,
            Node::Router => 1,
            Node::Receiver => 2,
        }
    }
    fn suffix(self) -> &'static str {
        ["snd", "rtr", "rcv"][self.index()]
    }
}

impl fmt::Display for Node {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(["sender", "router", "receiver"][self.index()])
    }
}

struct Inner {
    /// Namespaces created so far (a partial build deletes exactly these).
    created: Vec<String>,
    delay_box: Option<DelayBox>,
    loss: f64,
    /// Reordering probability and extra delay now in force.
    reorder: (f64, std::time::Duration),
    /// Duplication probability now in force.
    duplicate: f64,
    torn_down: bool,
}

/// An emulated path: sender → router (tbf) → delay box (delay, reordering,
/// duplication) → receiver (random loss).
///
/// Dropping it tears everything down (namespaces, veths, TUNs, qdiscs, the delay box
/// thread); [`Path::teardown`] does the same and reports errors.
pub struct Path {
    config: PathConfig,
    id: u32,
    names: [String; 3],
    inner: Mutex<Inner>,
}

impl fmt::Debug for Path {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Path")
            .field("config", &self.config)
            .field("names", &self.names)
            .finish()
    }
}

impl Path {
    /// Build a path: three namespaces, veths, the delay box, routes, the tbf
    /// bottleneck and the loss filter. Needs root. Sweeps namespaces left behind by
    /// dead processes first. On error everything built so far is torn down.
    pub fn build(config: PathConfig) -> Result<Path> {
        Self::build_inner(config, None)
    }

    /// [`Path::build`] that fails on purpose at `step` (to test cleanup of partial builds).
    #[doc(hidden)]
    pub fn build_failing_at(config: PathConfig, step: BuildStep) -> Result<Path> {
        Self::build_inner(config, Some(step))
    }

    fn build_inner(config: PathConfig, fail_at: Option<BuildStep>) -> Result<Path> {
        config.validate()?;
        if !netns::is_root() {
            return Err(NetemError::NotRoot);
        }
        // Leftovers of SIGKILLed runs; never fatal for building a new path.
        let _ = netns::sweep_stale();
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        let pid = std::process::id();
        let names = [Node::Sender, Node::Router, Node::Receiver]
            .map(|n| format!("{}{pid}x{id}-{}", netns::NS_PREFIX, n.suffix()));
        let path = Path {
            config,
            id,
            names,
            inner: Mutex::new(Inner {
                created: Vec::new(),
                delay_box: None,
                loss: 0.0,
                reorder: (0.0, std::time::Duration::ZERO),
                duplicate: 0.0,
                torn_down: false,
            }),
        };
        // On error, `path` is dropped here and tears down what exists.
        path.setup(fail_at)
            .map_err(|e| NetemError::Build(Box::new(e)))?;
        Ok(path)
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The configuration this path was built with.
    pub fn config(&self) -> &PathConfig {
        &self.config
    }

    /// Name of a node's network namespace (for `ip netns exec <name> ...`).
    pub fn ns(&self, node: Node) -> &str {
        &self.names[node.index()]
    }

    /// Names of the three namespaces: sender, router, receiver.
    pub fn namespaces(&self) -> [&str; 3] {
        [&self.names[0], &self.names[1], &self.names[2]]
    }

    fn k(&self) -> u8 {
        (self.id % 256) as u8
    }

    /// The sender's address.
    pub fn sender_addr(&self) -> Ipv4Addr {
        Ipv4Addr::new(10, self.k(), 1, 2)
    }

    /// The receiver's address.
    pub fn receiver_addr(&self) -> Ipv4Addr {
        Ipv4Addr::new(10, self.k(), 2, 2)
    }

    /// The router's addresses: toward the sender and toward the receiver.
    pub fn router_addrs(&self) -> (Ipv4Addr, Ipv4Addr) {
        (
            Ipv4Addr::new(10, self.k(), 1, 1),
            Ipv4Addr::new(10, self.k(), 2, 1),
        )
    }

    /// Run `f` on a new thread inside `node`'s network namespace: sockets it creates
    /// live there. Returns once the thread has entered the namespace.
    pub fn spawn_in<F, T>(&self, node: Node, f: F) -> Result<JoinHandle<T>>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        netns::spawn_in_ns(self.ns(node), node.suffix(), f)
    }

    /// A command that runs `program` in `node`'s namespace (via `ip netns exec`).
    pub fn command(&self, node: Node, program: &str) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", self.ns(node), program]);
        c
    }

    /// Set a sysctl (e.g. `net.ipv4.tcp_congestion_control`) in `node`'s namespace.
    pub fn sysctl(&self, node: Node, key: &str, value: &str) -> Result<()> {
        let (key, value) = (key.to_string(), value.to_string());
        self.spawn_in(node, move || netns::write_sysctl(&key, &value))?
            .join()
            .map_err(|_| NetemError::Thread("sysctl".into()))?
    }

    /// Tear everything down: stop the delay box, delete the namespaces (with them the
    /// veths, TUNs, qdiscs and filters). Idempotent; reports every error.
    pub fn teardown(&self) -> Result<()> {
        let mut inner = self.lock();
        if inner.torn_down {
            return Ok(());
        }
        inner.torn_down = true;
        let boxes = inner.delay_box.take();
        let created: Vec<_> = inner.created.drain(..).collect();
        crate::teardown::tear_down(boxes, created, "tearing down the path")
    }

    /// Whether [`Path::teardown`] has run.
    pub fn is_torn_down(&self) -> bool {
        self.lock().torn_down
    }
}

impl Drop for Path {
    fn drop(&mut self) {
        if let Err(e) = self.teardown() {
            eprintln!("cm-netem: {e}");
        }
    }
}
