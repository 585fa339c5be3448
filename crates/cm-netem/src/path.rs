//! Building, using and tearing down one emulated path.

use std::fmt;
use std::net::Ipv4Addr;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, MutexGuard, mpsc};
use std::thread::JoinHandle;

use anyhow::{Context, Result, anyhow, bail};
use serde::{Deserialize, Serialize};

use crate::config::{ConfigError, PathConfig};
use crate::delaybox::{DelayBox, DelayBoxStats, TUN_FORWARD, TUN_REVERSE};
use crate::netns::{self, run};

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

/// The error when not running as root.
pub const NOT_ROOT: &str = "cm-netem needs root (CAP_NET_ADMIN) to create network namespaces";

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

/// Counters of a `tbf` bottleneck qdisc (from `tc -s qdisc`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QdiscStats {
    /// Bytes sent on (IP level).
    pub sent_bytes: u64,
    /// Packets sent on.
    pub sent_packets: u64,
    /// Packets dropped because the queue was full.
    pub dropped: u64,
    /// Times a packet had to wait for tokens.
    pub overlimits: u64,
    /// Bytes queued now.
    pub backlog_bytes: u64,
    /// Packets queued now.
    pub backlog_packets: u64,
}

/// Cheap statistics of a path.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PathStats {
    /// The forward bottleneck (tbf on `tunf`).
    pub bottleneck: QdiscStats,
    /// The reverse bottleneck, when configured.
    pub reverse_bottleneck: Option<QdiscStats>,
    /// Delay box counters.
    pub delay_box: DelayBoxStats,
    /// Current loss probability.
    pub loss: f64,
}

struct Inner {
    /// Namespaces created so far (a partial build deletes exactly these).
    created: Vec<String>,
    delay_box: Option<DelayBox>,
    loss: f64,
    torn_down: bool,
}

/// An emulated path: sender → router (tbf) → delay box → receiver (random loss).
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

/// Steps of [`Path::build`], for tests that inject a failure part-way.
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BuildStep {
    /// After the namespaces are created.
    Namespaces,
    /// After the delay box is running.
    DelayBox,
    /// At the bottleneck qdisc.
    Tbf,
    /// At the loss filter.
    Loss,
}

fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

fn loss_program(p: f64) -> String {
    if p <= 0.0 {
        return "1,6 0 0 0".to_string(); // ret #0 (TC_ACT_OK)
    }
    let thresh = (p * 4_294_967_296.0).round().min(u32::MAX as f64) as u64;
    // ld rand (SKF_AD_OFF + SKF_AD_RANDOM); jge #thresh, pass, drop; pass: ret #0; drop: ret #2
    format!("4,32 0 0 4294963256,53 0 1 {thresh},6 0 0 0,6 0 0 2")
}

/// `tbf` burst for a rate: a couple of MTUs or 1 ms of tokens, whichever is larger.
pub fn tbf_burst(rate_bps: u64) -> u64 {
    (rate_bps / 8 / 1000).max(3000)
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
        config.validate().map_err(|e: ConfigError| anyhow!(e))?;
        if !is_root() {
            bail!(NOT_ROOT);
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
                torn_down: false,
            }),
        };
        // On error, `path` is dropped here and tears down what exists.
        path.setup(fail_at).context("building the emulated path")?;
        Ok(path)
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn setup(&self, fail_at: Option<BuildStep>) -> Result<()> {
        let fail = |s: BuildStep| -> Result<()> {
            if fail_at == Some(s) {
                bail!("injected failure at {s:?}");
            }
            Ok(())
        };
        let [snd, rtr, rcv] = self.names.clone();
        for ns in &self.names {
            run("ip", &["netns", "add", ns])?;
            self.lock().created.push(ns.clone());
            run("ip", &["-n", ns, "link", "set", "lo", "up"])?;
        }
        // Router: forward IPv4, no reverse-path filtering (packets from the delay box
        // come in on a TUN the reverse route does not point at), no redirects, and no
        // IPv6 (so the delay box carries only what the hosts send, no autoconf chatter).
        // Set before any device exists so every device inherits the defaults.
        for (key, value) in [
            ("net.ipv6.conf.all.disable_ipv6", "1"),
            ("net.ipv6.conf.default.disable_ipv6", "1"),
            ("net.ipv4.conf.all.rp_filter", "0"),
            ("net.ipv4.conf.default.rp_filter", "0"),
            ("net.ipv4.conf.all.send_redirects", "0"),
            ("net.ipv4.conf.default.send_redirects", "0"),
            ("net.ipv4.ip_forward", "1"),
        ] {
            self.sysctl(Node::Router, key, value)?;
        }
        fail(BuildStep::Namespaces)?;
        let k = self.id % 256;
        let (snd_a, rtr_a1, rtr_a2, rcv_a) = (
            format!("10.{k}.1.2/24"),
            format!("10.{k}.1.1/24"),
            format!("10.{k}.2.1/24"),
            format!("10.{k}.2.2/24"),
        );
        let ip = |ns: &str, args: &[&str]| -> Result<String> {
            let mut v = vec!["-n", ns];
            v.extend_from_slice(args);
            run("ip", &v)
        };
        ip(
            &rtr,
            &[
                "link",
                "add",
                ROUTER_SND_IF,
                "type",
                "veth",
                "peer",
                "name",
                HOST_IF,
                "netns",
                &snd,
            ],
        )?;
        ip(
            &rtr,
            &[
                "link",
                "add",
                ROUTER_RCV_IF,
                "type",
                "veth",
                "peer",
                "name",
                HOST_IF,
                "netns",
                &rcv,
            ],
        )?;
        ip(&snd, &["addr", "add", &snd_a, "dev", HOST_IF])?;
        ip(&rtr, &["addr", "add", &rtr_a1, "dev", ROUTER_SND_IF])?;
        ip(&rtr, &["addr", "add", &rtr_a2, "dev", ROUTER_RCV_IF])?;
        ip(&rcv, &["addr", "add", &rcv_a, "dev", HOST_IF])?;
        ip(&snd, &["link", "set", HOST_IF, "up"])?;
        ip(&rtr, &["link", "set", ROUTER_SND_IF, "up"])?;
        ip(&rtr, &["link", "set", ROUTER_RCV_IF, "up"])?;
        ip(&rcv, &["link", "set", HOST_IF, "up"])?;

        let dbox = DelayBox::start(&rtr, self.config.one_way_delay)?;
        self.lock().delay_box = Some(dbox);
        fail(BuildStep::DelayBox)?;
        for t in [TUN_FORWARD, TUN_REVERSE] {
            ip(&rtr, &["link", "set", t, "txqueuelen", "1000", "up"])?;
        }
        // Devices created after ip_forward=1 inherit forwarding from `default`; make sure.
        for dev in [TUN_FORWARD, TUN_REVERSE] {
            self.sysctl(
                Node::Router,
                &format!("net.ipv4.conf.{dev}.forwarding"),
                "1",
            )?;
            self.sysctl(Node::Router, &format!("net.ipv4.conf.{dev}.rp_filter"), "0")?;
        }
        let (snd_host, rcv_host) = (format!("10.{k}.1.2/32"), format!("10.{k}.2.2/32"));
        let (snd_net, rcv_net) = (format!("10.{k}.1.0/24"), format!("10.{k}.2.0/24"));
        ip(&rtr, &["route", "add", &rcv_host, "dev", TUN_FORWARD])?;
        ip(&rtr, &["route", "add", &snd_host, "dev", TUN_REVERSE])?;
        ip(
            &rtr,
            &[
                "route",
                "add",
                &rcv_net,
                "dev",
                ROUTER_RCV_IF,
                "table",
                DELAYBOX_TABLE,
            ],
        )?;
        ip(
            &rtr,
            &[
                "route",
                "add",
                &snd_net,
                "dev",
                ROUTER_SND_IF,
                "table",
                DELAYBOX_TABLE,
            ],
        )?;
        // Packets the delay box writes back, and the router's own packets (`iif lo`:
        // through a TUN they would come back as martians), go straight to their veth.
        for t in [TUN_FORWARD, TUN_REVERSE, "lo"] {
            ip(
                &rtr,
                &[
                    "rule",
                    "add",
                    "iif",
                    t,
                    "lookup",
                    DELAYBOX_TABLE,
                    "pref",
                    "100",
                ],
            )?;
        }
        ip(
            &snd,
            &["route", "add", "default", "via", &format!("10.{k}.1.1")],
        )?;
        ip(
            &rcv,
            &["route", "add", "default", "via", &format!("10.{k}.2.1")],
        )?;

        fail(BuildStep::Tbf)?;
        let limit = self.config.queue_bytes();
        self.add_tbf(TUN_FORWARD, self.config.rate_bps, limit)?;
        if let Some(r) = self.config.reverse_rate_bps {
            self.add_tbf(TUN_REVERSE, r, limit)?;
        }
        fail(BuildStep::Loss)?;
        run(
            "tc",
            &["-n", &rcv, "qdisc", "add", "dev", HOST_IF, "clsact"],
        )?;
        self.set_loss(self.config.loss)?;
        Ok(())
    }

    fn add_tbf(&self, dev: &str, rate_bps: u64, limit: u64) -> Result<()> {
        let rtr = self.ns(Node::Router);
        let (rate, burst, limit) = (
            format!("{rate_bps}bit"),
            tbf_burst(rate_bps).to_string(),
            limit.to_string(),
        );
        run(
            "tc",
            &[
                "-n", rtr, "qdisc", "add", "dev", dev, "root", "tbf", "rate", &rate, "burst",
                &burst, "limit", &limit,
            ],
        )?;
        Ok(())
    }

    /// Change the random loss probability at the receiver's ingress, in place.
    pub fn set_loss(&self, p: f64) -> Result<()> {
        if !(p.is_finite() && (0.0..1.0).contains(&p)) {
            return Err(anyhow!(ConfigError::Loss(p)));
        }
        let mut inner = self.lock();
        if inner.torn_down {
            bail!("the path is torn down");
        }
        let prog = loss_program(p);
        run(
            "tc",
            &[
                "-n",
                self.ns(Node::Receiver),
                "filter",
                "replace",
                "dev",
                HOST_IF,
                "ingress",
                "protocol",
                "ip",
                "pref",
                "1",
                "handle",
                "1",
                "bpf",
                "da",
                "bytecode",
                &prog,
            ],
        )
        .context("installing the loss filter")?;
        inner.loss = p;
        Ok(())
    }

    /// The current loss probability.
    pub fn loss(&self) -> f64 {
        self.lock().loss
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

    /// Give the receiver host another address, `10.k.2.(2 + n)` for
    /// `n` in `1..=200`, routed through the same bottleneck and delay box
    /// (for programs that need a second destination host behind the same
    /// path, e.g. two macroflows competing). Returns the address.
    pub fn add_receiver_address(&self, n: u8) -> Result<Ipv4Addr> {
        if !(1..=200).contains(&n) {
            return Err(anyhow!("receiver address index {n} out of 1..=200"));
        }
        let addr = Ipv4Addr::new(10, self.k(), 2, 2 + n);
        let host = format!("{addr}/32");
        run(
            "ip",
            &[
                "-n",
                self.ns(Node::Receiver),
                "addr",
                "add",
                &host,
                "dev",
                "lo",
            ],
        )?;
        // Into the forward TUN like the main address; the delay box's
        // policy table already routes the whole receiver subnet onward.
        run(
            "ip",
            &[
                "-n",
                self.ns(Node::Router),
                "route",
                "add",
                &host,
                "dev",
                TUN_FORWARD,
            ],
        )?;
        Ok(addr)
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
        let file = netns::open_ns(self.ns(node))?;
        let (tx, rx) = mpsc::channel::<std::io::Result<()>>();
        let handle = std::thread::Builder::new()
            .name(format!("cmn-{}", node.suffix()))
            .spawn(move || {
                let entered = netns::enter_fd(&file);
                drop(file);
                let ok = entered.is_ok();
                let _ = tx.send(entered);
                if !ok {
                    // Never run the closure in the wrong namespace.
                    std::panic::resume_unwind(Box::new("setns failed"));
                }
                f()
            })
            .context("spawn a thread")?;
        match rx.recv() {
            Ok(Ok(())) => Ok(handle),
            Ok(Err(e)) => {
                let _ = handle.join();
                Err(anyhow!(e).context(format!("entering the {node} namespace")))
            }
            Err(_) => Err(anyhow!(
                "the {node} thread died before entering its namespace"
            )),
        }
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
            .map_err(|_| anyhow!("sysctl thread panicked"))?
    }

    fn qdisc_stats(&self, dev: &str) -> Result<QdiscStats> {
        let out = run(
            "tc",
            &[
                "-n",
                self.ns(Node::Router),
                "-j",
                "-s",
                "qdisc",
                "show",
                "dev",
                dev,
            ],
        )?;
        let v: serde_json::Value = serde_json::from_str(&out).context("parsing tc -j output")?;
        let q = v
            .as_array()
            .and_then(|a| a.iter().find(|q| q["kind"] == "tbf"))
            .ok_or_else(|| anyhow!("no tbf qdisc on {dev}"))?;
        let g = |k: &str| q[k].as_u64().unwrap_or(0);
        Ok(QdiscStats {
            sent_bytes: g("bytes"),
            sent_packets: g("packets"),
            dropped: g("drops"),
            overlimits: g("overlimits"),
            backlog_bytes: g("backlog"),
            backlog_packets: g("qlen"),
        })
    }

    /// Bottleneck and delay-box counters.
    pub fn stats(&self) -> Result<PathStats> {
        let bottleneck = self.qdisc_stats(TUN_FORWARD)?;
        let reverse_bottleneck = match self.config.reverse_rate_bps {
            Some(_) => Some(self.qdisc_stats(TUN_REVERSE)?),
            None => None,
        };
        let inner = self.lock();
        let delay_box = inner
            .delay_box
            .as_ref()
            .map(|d| d.stats())
            .unwrap_or_default();
        Ok(PathStats {
            bottleneck,
            reverse_bottleneck,
            delay_box,
            loss: inner.loss,
        })
    }

    /// Tear everything down: stop the delay box, delete the namespaces (with them the
    /// veths, TUNs, qdiscs and filters). Idempotent; reports every error.
    pub fn teardown(&self) -> Result<()> {
        let mut inner = self.lock();
        if inner.torn_down {
            return Ok(());
        }
        inner.torn_down = true;
        let mut errors = Vec::new();
        if let Some(mut d) = inner.delay_box.take() {
            if let Err(e) = d.stop() {
                errors.push(format!("{e:#}"));
            }
        }
        for ns in inner.created.drain(..).rev() {
            if let Err(e) = run("ip", &["netns", "del", &ns]) {
                errors.push(format!("{e:#}"));
            }
        }
        if errors.is_empty() {
            Ok(())
        } else {
            bail!("tearing down the path: {}", errors.join("; "))
        }
    }

    /// Whether [`Path::teardown`] has run.
    pub fn is_torn_down(&self) -> bool {
        self.lock().torn_down
    }
}

impl Drop for Path {
    fn drop(&mut self) {
        if let Err(e) = self.teardown() {
            eprintln!("cm-netem: {e:#}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loss_programs() {
        assert_eq!(loss_program(0.0), "1,6 0 0 0");
        assert_eq!(
            loss_program(0.5),
            "4,32 0 0 4294963256,53 0 1 2147483648,6 0 0 0,6 0 0 2"
        );
        assert!(loss_program(0.999_999_999_99).contains(&u32::MAX.to_string()));
    }

    #[test]
    fn bursts() {
        assert_eq!(tbf_burst(10_000_000), 3000);
        assert_eq!(tbf_burst(1_000_000_000), 125_000);
    }
}
