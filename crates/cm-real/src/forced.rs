//! Many CBR flows over a real topology, each sent directly (plain UDP) or
//! through its own `cm proxy` pair ([`cm_force::proxy`]): the ingress in
//! the source's namespace takes the application's datagrams on loopback,
//! queues at most MAXQ of them and sends them through a congestion-
//! controlled CC-UDP channel to the egress in the sink's namespace, which
//! delivers them to the sink on loopback (transport-selection-middleware
//! §4.3.1's VoIP proxies, one per sender, each with its own CM as the
//! paper's TFRC agents are separate).
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
use cm_force::proxy::{Egress, EgressConfig, Ingress, IngressConfig, IngressReport};
use cm_netem::Network;
use cm_transport::maxq::Overflow;
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

    /// Mean one-way delay of everything received, seconds.
    pub fn mean_delay(&self) -> Option<f64> {
        let p: u64 = self.packets.iter().sum();
        (p > 0).then(|| self.delay_ns.iter().sum::<u64>() as f64 / p as f64 / 1e9)
    }
}

fn bind_in(net: &Network, node: &str, addr: Ipv4Addr) -> Result<UdpSocket> {
    net.spawn_in(node, move || UdpSocket::bind((addr, 0)))?
        .join()
        .map_err(|_| RealError::Thread("bind"))?
        .map_err(io(format!("binding a socket in {node}")))
}

type ProxyThreads = (
    std::thread::JoinHandle<Option<IngressReport>>,
    std::thread::JoinHandle<()>,
);

/// Start a proxy pair for a flow into `sink`: returns the ingress's
/// application address and the two threads.
fn start_proxy(
    net: &Network,
    f: &Flow,
    sink: SocketAddr,
    stop: &Arc<AtomicBool>,
) -> Result<(SocketAddr, ProxyThreads)> {
    let Some(p) = f.proxy.clone() else {
        return Err(RealError::Program("start_proxy without a proxy".into()));
    };
    let to_addr = net.node_addr(&f.to)?;
    let (etx, erx) = mpsc::channel::<std::result::Result<SocketAddr, String>>();
    let stop_e = Arc::clone(stop);
    let egress = net.spawn_in(&f.to, move || {
        let cm = Rc::new(RefCell::new(
            match libcm::Cm::embedded(libcm::Config::default()) {
                Ok(c) => c,
                Err(e) => {
                    let _ = etx.send(Err(e.to_string()));
                    return;
                }
            },
        ));
        let cfg = EgressConfig {
            listen: SocketAddr::from((to_addr, 0)),
            deliver: sink,
        };
        match Egress::bind(&cm, &cfg) {
            Ok(mut e) => {
                let _ = etx.send(e.local_addr().map_err(|x| x.to_string()));
                let _ = e.run(&stop_e, None);
            }
            Err(e) => {
                let _ = etx.send(Err(e.to_string()));
            }
        }
    })?;
    let egress_addr = erx
        .recv_timeout(Duration::from_secs(5))
        .map_err(|_| RealError::Thread("egress"))?
        .map_err(|e| RealError::Program(format!("egress: {e}")))?;
    let (itx, irx) = mpsc::channel::<std::result::Result<SocketAddr, String>>();
    let stop_i = Arc::clone(stop);
    let ingress = net.spawn_in(&f.from, move || {
        let cm = Rc::new(RefCell::new(
            libcm::Cm::embedded(libcm::Config::default()).ok()?,
        ));
        let cfg = IngressConfig {
            listen: SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
            egress: egress_addr,
            maxq: p.maxq,
            overflow: p.overflow,
            controller: Some(p.controller),
        };
        match Ingress::bind(&cm, &cfg) {
            Ok(mut i) => {
                let _ = itx.send(i.local_addr().map_err(|x| x.to_string()));
                let _ = i.run(&stop_i, None);
                Some(i.report())
            }
            Err(e) => {
                let _ = itx.send(Err(e.to_string()));
                None
            }
        }
    })?;
    let app = irx
        .recv_timeout(Duration::from_secs(5))
        .map_err(|_| RealError::Thread("ingress"))?
        .map_err(|e| RealError::Program(format!("ingress: {e}")))?;
    Ok((app, (ingress, egress)))
}

/// Run `flows` together for their duration (the longest), plus the time
/// the network needs to drain; `stop` ends the run early.
pub fn run_flows(net: &Network, flows: &[Flow], stop: &Arc<AtomicBool>) -> Result<Vec<FlowResult>> {
    let proxies_stop = Arc::new(AtomicBool::new(false));
    let mut socks = Vec::new();
    let mut proxies = Vec::new();
    let mut until = Duration::ZERO;
    let result = (|| -> Result<Vec<(Tally, Tally)>> {
        for f in flows {
            let (src, dst) = (net.node_addr(&f.from)?, net.node_addr(&f.to)?);
            let (tx, rx) = if f.proxy.is_some() {
                let rx = bind_in(net, &f.to, Ipv4Addr::LOCALHOST)?;
                let sink_addr = rx.local_addr().map_err(io("sink address".into()))?;
                let (app, threads) = start_proxy(net, f, sink_addr, &proxies_stop)?;
                proxies.push(Some(threads));
                let tx = bind_in(net, &f.from, Ipv4Addr::LOCALHOST)?;
                tx.connect(app)
                    .map_err(io(format!("connect to the ingress {app}")))?;
                (tx, rx)
            } else {
                proxies.push(None);
                let rx = bind_in(net, &f.to, dst)?;
                let tx = bind_in(net, &f.from, src)?;
                let to = rx.local_addr().map_err(io("sink address".into()))?;
                tx.connect(to).map_err(io(format!("connect to {to}")))?;
                (tx, rx)
            };
            rx.set_read_timeout(Some(Duration::from_millis(50)))
                .map_err(io("sink timeout".into()))?;
            until =
                until.max(f.rate.duration + drain_time(net, &f.from, &f.to, f.rate.packet_bytes)?);
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
    let mut reports = Vec::new();
    for p in proxies {
        reports.push(match p {
            Some((i, e)) => {
                let r = i.join().ok().flatten();
                let _ = e.join();
                r
            }
            None => None,
        });
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
            start_rate: packet_bytes as f64 * pps,
            step: 0.0,
            steps_per_second: 1.0,
        },
        proxy,
    }
}
