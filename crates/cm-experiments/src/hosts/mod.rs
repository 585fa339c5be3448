//! Simulated end hosts that run the CM and its transports on [`cm_sim`].
//!
//! Everything here carries [`Pkt`]: a [`cm_transport::Datagram`] (the
//! orphan rule forbids implementing [`cm_sim::Payload`] for `Datagram`
//! directly), or a congestion-forcing proxy's CC-UDP datagram or ack
//! ([`proxy`]).
//!
//! - [`CmHost`]: a sender host owning one [`cm_core::CongestionManager`],
//!   exactly as the daemon does, and any number of applications: TCP
//!   connections ([`ConnSpec`], NewReno or TCP/CM), web-like on/off sources
//!   ([`WebSpec`]), constant-bit-rate sources ([`CbrSpec`]) and layered audio
//!   senders ([`AudioSpec`]), ramping CBR sources and congestion-forcing
//!   proxies ([`RampSpec`], [`ProxySpec`]). All CM-controlled flows of one host to the same
//!   destination host share a macroflow, because every node gets a distinct
//!   fake IPv4 address ([`node_addr`]) that is handed to `cm_open`.
//!   [`TcpHost`] is the same type used with NewReno connections only (its CM
//!   stays idle).
//! - [`ReceiverHost`]: TCP receivers (created on the SYN, one per
//!   `(flow tag, sender port)`), CBR sinks and audio receivers.
//!
//! The driver protocol of `cm_transport` is implemented in [`CmHost`]: after
//! every input the host drains `poll_transmit` and `poll_cm` of every
//! running application, forwards `CmCall`s in order, answers
//! `Event::Grant` with `TcpSender::on_grant`, and routes `Event::RateUpdate`
//! to audio senders; the host's sim timer is the minimum of the CM's
//! `poll_timeout` and the applications' timers.
//!
//! Data packets carry the application's [`cm_sim::FlowTag`]; ACKs and audio
//! feedback carry [`reverse_tag`] of it, so per-flow statistics of the
//! engine count data only.
//!
//! ```
//! use cm_core::{Duration, Instant};
//! use cm_experiments::hosts::{CmHost, ConnSpec, Pkt, ReceiverHost};
//! use cm_sim::{dumbbell, DumbbellConfig, FlowTag, Sim};
//! use cm_transport::CcMode;
//!
//! let d = dumbbell(&DumbbellConfig::sigcomm1999(1, 1_000_000, Duration::from_millis(60)))?;
//! let (src, dst) = (d.left_hosts[0], d.right_hosts[0]);
//! let mut sim = Sim::<Pkt>::new(d.topology, 1)?;
//! let mut host = CmHost::new(src, cm_core::Config::default())?;
//! let c = host.add_conn(ConnSpec::new(dst, FlowTag(1), CcMode::Cm).bytes(100_000))?;
//! sim.attach(src, host)?;
//! sim.attach(dst, ReceiverHost::new())?;
//! sim.run_until(Instant::from_micros(10_000_000));
//! let host = sim.host::<CmHost>(src).expect("attached");
//! let rec = &host.conn(c).expect("added").record;
//! assert!(rec.finish.is_some());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod apps;
mod conn;
mod error;
pub mod proxy;
mod receiver;
mod record;
mod sender;
mod web;

pub use conn::{Conn, ConnSpec};
pub use proxy::{ProxySpec, ProxyStats, RampSpec};
pub use receiver::{Arrivals, ReceiverHost};
pub use record::{ConnRecord, TracePoint};
pub use sender::{AudioSpec, CbrSpec, CmHost, HostError, TcpHost};
pub use web::{WebSource, WebSpec};

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use cm_sim::{FlowTag, NodeId, Payload};
use cm_transport::Datagram;

/// The packet payload of every simulation in this crate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pkt {
    /// A transport datagram (TCP, CBR, audio).
    Net(Datagram),
    /// A proxy's CC-UDP datagram carrying one application packet.
    ProxyData(proxy::ProxyData),
    /// The CC-UDP ack of a proxy's receiver.
    ProxyAck(cm_transport::ccudp::wire::Ack),
}

impl Payload for Pkt {
    fn wire_len(&self) -> u32 {
        match self {
            Pkt::Net(d) => d.wire_len(),
            Pkt::ProxyData(d) => d.wire_len(),
            Pkt::ProxyAck(_) => proxy::ACK_WIRE_LEN,
        }
    }
}

/// Bit set in the flow tag of reverse-direction packets (ACKs, feedback).
pub const REVERSE_BIT: u32 = 1 << 31;

/// The tag carried by ACKs and receiver reports of flow `tag`.
pub fn reverse_tag(tag: FlowTag) -> FlowTag {
    FlowTag(tag.0 | REVERSE_BIT)
}

/// The fake IPv4 address of a simulated node: `10.x.y.1` from its id, so
/// distinct nodes have distinct addresses (and distinct CM macroflows).
pub fn node_addr(node: NodeId) -> IpAddr {
    let [_, _, hi, lo] = node.0.to_be_bytes();
    IpAddr::V4(Ipv4Addr::new(10, hi, lo, 1))
}

/// [`node_addr`] with a port.
pub fn node_sockaddr(node: NodeId, port: u16) -> SocketAddr {
    SocketAddr::new(node_addr(node), port)
}
