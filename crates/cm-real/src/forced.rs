//! Many CBR flows over a real topology, each sent directly (plain UDP) or
//! through its own `cm proxy` pair ([`cm_force::proxy`]): the ingress in
//! the source's namespace takes the application's datagrams on loopback,
//! queues at most MAXQ of them and sends them through a congestion-
//! controlled CC-UDP channel to the egress in the sink's namespace, which
//! delivers them to the sink on loopback (transport-selection-middleware
//! §4.3.1's VoIP proxies, one per sender). A node's proxies share one CM,
//! so its flows to one host share a macroflow, as the CM would run them
//! (the paper's TFRC agents were separate; the simulator's `voip-proxy`
//! shares the same way).
//!
//! The sources and sinks are [`crate::collapse`]'s: paced per packet,
//! every datagram carrying its send time for the one-way delay.

use std::cell::RefCell;
use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use cm_core::controller::ControllerConfig;
use cm_force::proxy::{
    Egress, EgressConfig, Ingress, IngressConfig, IngressReport, Relay, run_all,
};
use cm_netem::Network;
use cm_transport::maxq::Overflow;
use libcm::ccudp::SharedCm;
use serde::Serialize;

use crate::collapse::{CollapseConfig, HEADERS, Tally, drain_time, io, sink, source};
use crate::error::{RealError, Result};

/// How a flow is forced.
#[derive(Clone, Debug)]
pub struct ProxyCfg {
    /// The channel's controller.
    pub controller: ControllerConfig,
    /// MAXQ.
    pub maxq: usize,
    /// The drop policy.
    pub overflow: Overflow,
}

/// One CBR flow.
#[derive(Clone, Debug)]
pub struct Flow {
    /// Source node.
    pub from: String,
    /// Sink node.
    pub to: String,
    /// Its rate schedule and packet size.
    pub rate: CollapseConfig,
    /// Through a proxy pair, or plain UDP.
    pub proxy: Option<ProxyCfg>,
}

/// What one flow did.
#[derive(Clone, Debug, Default, Serialize)]
pub struct FlowResult {
    /// Bytes sent per second (IP level, the application's datagrams).
    pub sent: Vec<u64>,
    /// Bytes received per second at the sink (IP level).
    pub received: Vec<u64>,
    /// Packets received per second.
    pub packets: Vec<u64>,
    /// Sum of one-way delays per second, ns.
    pub delay_ns: Vec<u64>,
    /// The ingress's counts (proxied flows).
    pub proxy: Option<IngressReport>,
}

impl FlowResult {
    /// Mean received bytes/s over seconds `[from, to)`.
    pub fn rate(&self, from: usize, to: usize) -> f64 {
        let n = to.saturating_sub(from).max(1);
        self.received.iter().skip(from).take(to - from).sum::<u64>() as f64 / n as f64
    }
}

fn bind_in(net: &Network, node: &str, addr: Ipv4Addr) -> Result<UdpSocket> {
    net.spawn_in(node, move || UdpSocket::bind((addr, 0)))?
        .join()
        .map_err(|_| RealError::Thread("bind"))?
        .map_err(io(format!("binding a socket in {node}")))
}

type Reports = Vec<Option<IngressReport>>;
type Group = std::thread::JoinHandle<(Vec<usize>, Reports)>;

/// One end of a set of proxy pairs: how to bind it, where it listens and
/// what it reports.
trait End: Relay + Sized + 'static {
    type Config: Send + 'static;
    fn bind(cm: &SharedCm, cfg: &Self::Config) -> std::result::Result<Self, String>;
    fn addr(&self) -> std::result::Result<SocketAddr, String>;
    fn report(&self) -> Option<IngressReport>;
}

impl End for Egress {
    type Config = EgressConfig;
    fn bind(cm: &SharedCm, cfg: &EgressConfig) -> std::result::Result<Self, String> {
        Egress::bind(cm, cfg).map_err(|e| e.to_string())
    }
    fn addr(&self) -> std::result::Result<SocketAddr, String> {
        self.local_addr().map_err(|e| e.to_string())
    }
    fn report(&self) -> Option<IngressReport> {
        None
    }
}

impl End for Ingress {
    type Config = IngressConfig;
    fn bind(cm: &SharedCm, cfg: &IngressConfig) -> std::result::Result<Self, String> {
        Ingress::bind(cm, cfg).map_err(|e| e.to_string())
    }
    fn addr(&self) -> std::result::Result<SocketAddr, String> {
        self.local_addr().map_err(|e| e.to_string())
    }
    fn report(&self) -> Option<IngressReport> {
        Some(Ingress::report(self))
    }
}

/// One thread in `node`'s namespace with one CM running the ends `cfgs`
/// (the flows `idx`): their addresses, and the thread, which returns the
/// flows' reports when `stop` is set.
fn spawn_group<E: End>(
    net: &Network,
    node: &str,
    idx: Vec<usize>,
    cfgs: Vec<E::Config>,
    stop: &Arc<AtomicBool>,
) -> Result<(Vec<SocketAddr>, Group)> {
    let (tx, rx) = mpsc::channel::<std::result::Result<Vec<SocketAddr>, String>>();
    let stop = Arc::clone(stop);
    let h = net.spawn_in(node, move || {
        let setup = || -> std::result::Result<(SharedCm, Vec<E>), String> {
            let cm = libcm::Cm::embedded(libcm::Config::default()).map_err(|e| e.to_string())?;
            let cm = Rc::new(RefCell::new(cm));
            let all = cfgs
                .iter()
                .map(|c| E::bind(&cm, c))
                .collect::<std::result::Result<_, _>>()?;
            Ok((cm, all))
        };
        match setup() {
            Ok((cm, mut all)) => {
                let _ = tx.send(all.iter().map(E::addr).collect());
                let _ = run_all(&mut all, &cm, &stop, None);
                (idx, all.iter().map(E::report).collect())
            }
            Err(e) => {
                let _ = tx.send(Err(e));
                (idx, Vec::new())
            }
        }
    })?;
    let addrs = rx
        .recv_timeout(Duration::from_secs(5))
        .map_err(|_| RealError::Thread("proxy"))?
        .map_err(|e| RealError::Program(format!("proxy in {node}: {e}")))?;
    Ok((addrs, h))
}

/// Start the proxies of `flows` (those with one) into their sinks: one
/// thread and one CM per node, so a node's proxied flows to one host share
/// its macroflow (the CM's design). Returns each flow's ingress address
/// and the threads (ingress threads return the flows' reports).
fn start_proxies(
    net: &Network,
    flows: &[Flow],
    sinks: &[SocketAddr],
    stop: &Arc<AtomicBool>,
) -> Result<(Vec<Option<SocketAddr>>, Vec<Group>)> {
    let proxied = |i: &usize| flows[*i].proxy.is_some();
    let nodes = |pick: fn(&Flow) -> &str| {
        let mut v: Vec<String> = (0..flows.len())
            .filter(proxied)
            .map(|i| pick(&flows[i]).to_owned())
            .collect();
        v.sort();
        v.dedup();
        v
    };
    let mut threads = Vec::new();
    let mut egress_addr = vec![None; flows.len()];
    for node in nodes(|f| &f.to) {
        let idx: Vec<usize> = (0..flows.len())
            .filter(|i| proxied(i) && flows[*i].to == node)
            .collect();
        let listen = SocketAddr::from((net.node_addr(&node)?, 0));
        let cfgs = idx
            .iter()
            .map(|&i| EgressConfig {
                listen,
                deliver: sinks[i],
            })
            .collect();
        let (addrs, h) = spawn_group::<Egress>(net, &node, idx.clone(), cfgs, stop)?;
        threads.push(h);
        for (i, a) in idx.into_iter().zip(addrs) {
            egress_addr[i] = Some(a);
        }
    }
    let mut app = vec![None; flows.len()];
    for node in nodes(|f| &f.from) {
        let idx: Vec<usize> = (0..flows.len())
            .filter(|i| proxied(i) && flows[*i].from == node)
            .collect();
        let mut cfgs = Vec::new();
        for &i in &idx {
            let (Some(p), Some(egress)) = (flows[i].proxy.clone(), egress_addr[i]) else {
                return Err(RealError::Program(
                    "a proxied flow without an egress".into(),
                ));
            };
            cfgs.push(IngressConfig {
                listen: SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
                egress,
                maxq: p.maxq,
                overflow: p.overflow,
                controller: Some(p.controller),
            });
        }
        let (addrs, h) = spawn_group::<Ingress>(net, &node, idx.clone(), cfgs, stop)?;
        threads.push(h);
        for (i, a) in idx.into_iter().zip(addrs) {
            app[i] = Some(a);
        }
    }
    Ok((app, threads))
}

/// Run `flows` together for their duration (the longest), plus the time
/// the network needs to drain; `stop` ends the run early.
pub fn run_flows(net: &Network, flows: &[Flow], stop: &Arc<AtomicBool>) -> Result<Vec<FlowResult>> {
    let proxies_stop = Arc::new(AtomicBool::new(false));
    let mut threads = Vec::new();
    let result = (|| -> Result<Vec<(Tally, Tally)>> {
        let mut sinks = Vec::new();
        let mut rxs = Vec::new();
        let mut until = Duration::ZERO;
        for f in flows {
            let at = if f.proxy.is_some() {
                Ipv4Addr::LOCALHOST
            } else {
                net.node_addr(&f.to)?
            };
            let rx = bind_in(net, &f.to, at)?;
            rx.set_read_timeout(Some(Duration::from_millis(50)))
                .map_err(io("sink timeout".into()))?;
            sinks.push(rx.local_addr().map_err(io("sink address".into()))?);
            rxs.push(rx);
            until =
                until.max(f.rate.duration + drain_time(net, &f.from, &f.to, f.rate.packet_bytes)?);
        }
        let (apps, t) = start_proxies(net, flows, &sinks, &proxies_stop)?;
        threads = t;
        let mut socks = Vec::new();
        for ((f, rx), (sink_addr, app)) in flows.iter().zip(rxs).zip(sinks.iter().zip(apps)) {
            let from = if f.proxy.is_some() {
                Ipv4Addr::LOCALHOST
            } else {
                net.node_addr(&f.from)?
            };
            let tx = bind_in(net, &f.from, from)?;
            let to = app.unwrap_or(*sink_addr);
            tx.connect(to).map_err(io(format!("connect to {to}")))?;
            socks.push((tx, rx));
        }
        let until = until + Duration::from_millis(500);
        let t0 = Instant::now();
        std::thread::scope(|s| {
            let handles: Vec<_> = socks
                .iter()
                .zip(flows)
                .map(|((tx, rx), f)| {
                    let sink_h = s.spawn(move || sink(rx, t0, until, stop));
                    let src_h = s.spawn(move || source(tx, &f.rate, t0));
                    (src_h, sink_h)
                })
                .collect();
            handles
                .into_iter()
                .map(|(a, b)| Some((a.join().ok()?, b.join().ok()?)))
                .collect::<Option<Vec<_>>>()
        })
        .ok_or(RealError::Thread("source or sink"))
    })();
    proxies_stop.store(true, Ordering::Relaxed);
    let mut reports: Vec<Option<IngressReport>> = vec![None; flows.len()];
    for t in threads {
        if let Ok((idx, rs)) = t.join() {
            for (i, r) in idx.into_iter().zip(rs) {
                reports[i] = r;
            }
        }
    }
    let tallies = result?;
    Ok(tallies
        .into_iter()
        .zip(reports)
        .map(|((src, snk), proxy)| FlowResult {
            sent: src.bytes,
            received: snk.bytes,
            packets: snk.packets,
            delay_ns: snk.delay_ns,
            proxy,
        })
        .collect())
}

/// A constant-rate VoIP-like flow: `packet_bytes` (IP) at `pps` for `secs`.
pub fn cbr(
    from: &str,
    to: &str,
    packet_bytes: usize,
    pps: f64,
    secs: u64,
    proxy: Option<ProxyCfg>,
) -> Flow {
    Flow {
        from: from.into(),
        to: to.into(),
        rate: CollapseConfig {
            duration: Duration::from_secs(secs),
            packet_bytes: packet_bytes.max(HEADERS + 16),
            size_spread: 0,
            start_rate: packet_bytes as f64 * pps,
            step: 0.0,
            steps_per_second: 1.0,
        },
        proxy,
    }
}
