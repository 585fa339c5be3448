//! A web-like on/off source: ON is one TCP transfer whose size is drawn from
//! a Pareto distribution (heavy-tailed, as web object sizes are), OFF an
//! exponentially distributed think time. Used as background traffic that
//! causes losses (sigcomm1999 §4.1 "web-like background traffic").

use cm_core::Instant;
use cm_sim::{FlowTag, NodeId, SimRng};
use cm_transport::{CcMode, TcpConfig};

/// Parameters of a web-like source.
#[derive(Clone, Copy, Debug)]
pub struct WebSpec {
    /// Server-side receiver host (the transfers go towards it).
    pub dst: NodeId,
    /// Flow tag of every transfer of this source.
    pub tag: FlowTag,
    /// Congestion control of the transfers.
    pub cc: CcMode,
    /// First transfer starts after one think time from here.
    pub start: Instant,
    /// No transfer starts at or after this time.
    pub stop: Instant,
    /// Mean transfer size, bytes.
    pub mean_bytes: f64,
    /// Pareto shape α (> 1; 1.2 is typical of web objects).
    pub shape: f64,
    /// Transfers are capped at this many bytes.
    pub max_bytes: u64,
    /// Mean think time between transfers, seconds.
    pub think_mean_s: f64,
    /// Transport parameters.
    pub tcp: TcpConfig,
}

impl WebSpec {
    /// Defaults: 12 KB mean, α = 1.2, capped at 1 MB, 0.5 s mean think time.
    pub fn new(dst: NodeId, tag: FlowTag, start: Instant, stop: Instant) -> Self {
        WebSpec {
            dst,
            tag,
            cc: CcMode::NewReno,
            start,
            stop,
            mean_bytes: 12_000.0,
            shape: 1.2,
            max_bytes: 1_000_000,
            think_mean_s: 0.5,
            tcp: TcpConfig::default(),
        }
    }

    /// A Pareto-distributed size with this spec's mean and shape
    /// (`x_m = mean (α-1)/α`, `x = x_m / u^(1/α)`), at least one byte.
    pub fn draw_size(&self, rng: &mut SimRng) -> u64 {
        let a = self.shape.max(1.0001);
        let xm = self.mean_bytes * (a - 1.0) / a;
        let u = 1.0 - rng.next_f64(); // (0, 1]
        let x = xm / u.powf(1.0 / a);
        (x as u64).clamp(1, self.max_bytes.max(1))
    }
}

/// A running web-like source.
#[derive(Clone, Debug)]
pub struct WebSource {
    /// Its parameters.
    pub spec: WebSpec,
    /// When the next transfer starts (none while one is running).
    pub next_start: Option<Instant>,
    /// Indices (into the host's connections) of its transfers.
    pub transfers: Vec<usize>,
}
