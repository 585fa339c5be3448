//! One TCP connection on a [`super::CmHost`]: the sans-IO sender, its CM
//! flow (TCP/CM only) and its record.

use cm_core::{FlowId, Instant};
use cm_sim::{FlowTag, NodeId};
use cm_transport::{CcMode, TcpConfig, TcpSender};

use super::record::ConnRecord;

/// How to create a TCP connection.
#[derive(Clone, Copy, Debug)]
pub struct ConnSpec {
    /// Receiver host.
    pub dst: NodeId,
    /// Flow tag of its data packets.
    pub tag: FlowTag,
    /// NewReno or TCP/CM.
    pub cc: CcMode,
    /// When the SYN is sent.
    pub start: Instant,
    /// Bytes to transfer (`None` = bulk until the end of the run).
    pub bytes: Option<u64>,
    /// CM scheduler weight (TCP/CM only).
    pub weight: u32,
    /// Record sequence/ack/window series.
    pub trace: bool,
    /// Transport parameters (ports, `total` and `cc` are overwritten).
    pub tcp: TcpConfig,
}

impl ConnSpec {
    /// A bulk connection starting at time zero with default TCP parameters.
    pub fn new(dst: NodeId, tag: FlowTag, cc: CcMode) -> Self {
        ConnSpec {
            dst,
            tag,
            cc,
            start: Instant::ZERO,
            bytes: None,
            weight: 1,
            trace: false,
            tcp: TcpConfig::default(),
        }
    }

    /// Transfer exactly `n` bytes.
    pub fn bytes(mut self, n: u64) -> Self {
        self.bytes = Some(n);
        self
    }

    /// Start at `t`.
    pub fn start(mut self, t: Instant) -> Self {
        self.start = t;
        self
    }

    /// Record time series.
    pub fn trace(mut self, on: bool) -> Self {
        self.trace = on;
        self
    }

    /// Use these TCP parameters.
    pub fn tcp(mut self, cfg: TcpConfig) -> Self {
        self.tcp = cfg;
        self
    }
}

/// Where a connection is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Phase {
    Waiting,
    Running,
    Done,
}

/// A connection as the host runs it.
#[derive(Clone, Debug)]
pub struct Conn {
    /// How it was created.
    pub spec: ConnSpec,
    /// Local port (ACKs are demultiplexed by `(tag, port)`).
    pub port: u16,
    /// The transport.
    pub tcp: TcpSender,
    /// Its CM flow while open (TCP/CM only).
    pub flow: Option<FlowId>,
    /// What happened.
    pub record: ConnRecord,
    pub(crate) phase: Phase,
    /// Web source that owns it, if any.
    pub(crate) web: Option<usize>,
}

impl Conn {
    /// Whether the connection is still sending or waiting for ACKs.
    pub fn is_running(&self) -> bool {
        self.phase == Phase::Running
    }
}
