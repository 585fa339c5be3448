//! Scenarios as data: a TOML description of a dumbbell (or of any
//! topology) and the flows over it, validated into a [`Scenario`] that
//! [`crate::simulate::run`] executes.
//!
//! ```toml
//! name = "two-flows"
//! duration = 20.0          # seconds
//! seed = 1
//! mss = 1460               # TCP MSS = CM MTU, payload bytes (default 1460)
//! cm_controller = "aimd"   # every CM host's controller unless a flow gives
//!                          # one: aimd, iiad, sqrt, binomial:k=..,l=..,
//!                          # iscc[:l=2], tfrc[:s=180]
//!
//! [bottleneck]
//! rate_bps = 1_000_000
//! delay_ms = 60            # one-way propagation delay of the whole path
//! queue = "bdp"            # or queue_packets = 20, or queue_bytes = 15000
//! loss = 0.0               # random loss on the bottleneck
//! reorder = 0.0            # probability a bottleneck packet is held back ...
//! reorder_delay_ms = 0     # ... this long beyond its delay (later ones pass it)
//! duplicate = 0.0          # probability a bottleneck packet is delivered twice
//!
//! [access]                 # optional; sigcomm1999 defaults
//! rate_bps = 100_000_000
//! delay_ms = 1
//!
//! [[flow]]
//! name = "a"
//! transport = "newreno"    # newreno | tcpcm | cbr | audio | web | proxy
//! host = "left1"           # flows naming the same host share its CM
//! dst = "right1"
//! start = 0.0
//! sack = false             # TCP SACK (newreno, tcpcm, web), default false
//! controller = "iscc:l=2"  # CM flows (tcpcm, audio): the host's controller
//! ```
//!
//! `loss`, `reorder` and `duplicate` apply to the forward bottleneck only
//! (the data direction), as in `cm_sim::LinkConfig`: a held-back packet
//! propagates `reorder_delay_ms` longer, so packets leaving the bottleneck
//! within that time overtake it; a duplicated packet's copy arrives right
//! after it. `reorder > 0` needs `reorder_delay_ms > 0`.
//!
//! The bottleneck link's own delay is `delay_ms - 2 * access.delay_ms`
//! (sigcomm1999 dumbbell, `cm_sim::DumbbellConfig::sigcomm1999`); the
//! bandwidth-delay product is `rate_bps * 2 * delay_ms`, in bytes.
//!
//! `controller` takes the text form of [`cm_core::controller::spec`]
//! (`aimd`, `iiad`, `sqrt:mode=window`, `iscc:l=2,capacity=1M`, ...) and
//! sets the controller of every macroflow of the flow's CM host (its
//! `host`): flows naming the same host share its CM and their macroflow,
//! so two of them giving different controllers is an error, and a flow
//! without the key runs what the others on its host chose. Without any,
//! and with plain `aimd`, a host runs the papers' AIMD with
//! `cm_initial_window`. Only CM transports (`tcpcm`, `audio`, `proxy`)
//! take the key.
//!
//! # Other networks: `[topology]`
//!
//! Instead of `[bottleneck]` and `[access]`, a scenario may give a
//! `[topology]` table: named nodes and duplex links, the format of
//! [`cm_sim::spec`] that the real-network emulator reads too (giving both
//! `[topology]` and `[bottleneck]` is an error). Flows' `host` and `dst`
//! then name topology hosts (`kind = "host"`); a host is either a sender
//! or a receiver. The result's `bottleneck` is the link direction that
//! dropped the most packets, and `links` lists every direction.
//!
//! ```toml
//! [topology]                   # see cm_sim::spec for every key
//! [[topology.node]]
//! name = "n0"
//! [[topology.node]]
//! name = "r"
//! kind = "router"
//! [[topology.node]]
//! name = "n4"
//! [[topology.link]]
//! a = "n0"
//! b = "r"
//! rate_bps = 300_000
//! delay_ms = 5.0
//! [[topology.link]]
//! a = "r"
//! b = "n4"
//! rate_bps = 1_000_000
//! delay_ms = 5.0
//!
//! [[flow]]
//! name = "ramp"
//! transport = "cbr"            # or proxy
//! host = "n0"
//! dst = "n4"
//! rate_bps = 6400              # payload bit/s at start
//! ramp_bps = 6400              # ... plus this every ramp_every_s
//! ramp_every_s = 0.5
//! packet_bytes = 120           # payload; +28 IP/UDP (+16 CC-UDP for proxy)
//! ```
//!
//! # Ramps and the congestion-forcing proxy
//!
//! `ramp_bps` and `ramp_every_s` (cbr and proxy flows) make the
//! application's rate start at `rate_bps` and grow by `ramp_bps` every
//! `ramp_every_s` (transport-selection-middleware §3.1).
//!
//! A `proxy` flow is a CBR application (`rate_bps`, `packet_bytes`, the
//! ramp keys) whose packets enter a queue of `maxq` packets (default 1)
//! that drops from its head (`drop = "head"`, default) or tail (`"tail"`)
//! when full, and leave it only as the host's CM grants, as CC-UDP
//! datagrams (its 16-byte header added) acked by the receiver
//! ([`crate::hosts::proxy`]; §4.3's "VoIP proxy"). The CM is the host's:
//! proxies on one host to one destination share a macroflow, with the
//! host's `controller` (e.g. `tfrc:s=136`). A CC-UDP datagram is at most
//! one CM MTU (`mss`): give `mss` = `packet_bytes + 16` so a grant is one
//! datagram. Cbr and proxy flows report their mean one-way delay (the
//! application's send time to arrival) and per-second payload bytes; proxy
//! flows also what the queue did (offered, sent, dropped, mean wait).

use std::collections::BTreeMap;

use cm_core::controller::ControllerConfig;
use cm_sim::QueueLimit;
use cm_sim::spec::TopologySpec;
use serde::{Deserialize, Serialize};

mod flow;
mod validate;

pub use flow::FlowSpec;

/// Why a scenario is unusable. Each message ends with its underlying error;
/// that error is not also [`std::error::Error::source`], so a chain printer
/// (anyhow's `{:#}`) shows it once.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    /// The TOML does not parse or has unknown/mistyped fields.
    #[error("scenario does not parse: {0}")]
    Parse(toml::de::Error),
    /// A value is out of range or inconsistent.
    #[error("invalid scenario: {0}")]
    Invalid(String),
    /// The network could not be built.
    #[error("topology: {0}")]
    Topology(cm_sim::TopologyError),
    /// A host rejected a flow.
    #[error("flow {flow}: {error}")]
    Host {
        /// The flow.
        flow: String,
        /// Why.
        error: crate::hosts::HostError,
    },
}

impl From<toml::de::Error> for ScenarioError {
    fn from(e: toml::de::Error) -> Self {
        ScenarioError::Parse(e)
    }
}

impl From<cm_sim::TopologyError> for ScenarioError {
    fn from(e: cm_sim::TopologyError) -> Self {
        ScenarioError::Topology(e)
    }
}

fn bad<T>(msg: String) -> Result<T, ScenarioError> {
    Err(ScenarioError::Invalid(msg))
}

/// The transport of a flow.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Transport {
    /// TCP NewReno, no CM.
    Newreno,
    /// TCP/CM (sigcomm1999 §3.2.1).
    Tcpcm,
    /// Constant bit rate UDP.
    Cbr,
    /// Layered audio on the CM (sigcomm1999 §3.2.2).
    Audio,
    /// Web-like on/off NewReno transfers (Pareto sizes, exponential think times).
    Web,
    /// A (ramping) CBR application behind a congestion-forcing proxy: a
    /// MAXQ queue drained by the host's CM over CC-UDP
    /// (transport-selection-middleware §4.3).
    Proxy,
}

/// The bottleneck.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Bottleneck {
    /// Rate, bit/s.
    pub rate_bps: u64,
    /// One-way propagation delay of the path, ms.
    pub delay_ms: f64,
    /// `"bdp"` (default) for a queue of one bandwidth-delay product in bytes.
    #[serde(default)]
    pub queue: Option<String>,
    /// Queue limit in packets.
    #[serde(default)]
    pub queue_packets: Option<u32>,
    /// Queue limit in bytes.
    #[serde(default)]
    pub queue_bytes: Option<u64>,
    /// Random loss probability per packet.
    #[serde(default)]
    pub loss: f64,
    /// Probability that a packet is held back by `reorder_delay_ms`
    /// (reordering; forward direction only). Not serialized when 0.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub reorder: f64,
    /// Extra one-way delay of a held-back packet, ms. Not serialized when 0.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub reorder_delay_ms: f64,
    /// Probability that a packet is delivered twice (forward direction
    /// only). Not serialized when 0.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub duplicate: f64,
    /// Reverse direction rate, bit/s (default: same as forward).
    #[serde(default)]
    pub reverse_rate_bps: Option<u64>,
}

impl Default for Bottleneck {
    /// The absent bottleneck of a `[topology]` scenario (rate 0, which a
    /// given `[bottleneck]` cannot have).
    fn default() -> Self {
        Bottleneck {
            rate_bps: 0,
            delay_ms: 0.0,
            queue: None,
            queue_packets: None,
            queue_bytes: None,
            loss: 0.0,
            reorder: 0.0,
            reorder_delay_ms: 0.0,
            duplicate: 0.0,
            reverse_rate_bps: None,
        }
    }
}

impl Bottleneck {
    /// Whether this is the absent bottleneck ([`Bottleneck::default`]) of a
    /// scenario that gives `[topology]` instead.
    pub fn is_absent(&self) -> bool {
        self.rate_bps == 0
    }
}

/// `skip_serializing_if` for the optional link features: a scenario that
/// does not use them serializes as before.
fn is_zero(x: &f64) -> bool {
    *x == 0.0
}

/// The access links.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Access {
    /// Rate, bit/s.
    pub rate_bps: u64,
    /// One-way delay, ms.
    pub delay_ms: f64,
}

impl Default for Access {
    fn default() -> Self {
        Access {
            rate_bps: 100_000_000,
            delay_ms: 1.0,
        }
    }
}

/// A complete scenario.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Name.
    pub name: String,
    /// Simulated seconds.
    pub duration: f64,
    /// RNG seed.
    #[serde(default)]
    pub seed: u64,
    /// TCP MSS and CM MTU, bytes.
    #[serde(default = "default_mss")]
    pub mss: u32,
    /// Initial window of every CM macroflow, in MSS (default 2, the same as
    /// the TCP flows' default, so TCP/CM and NewReno start alike; cm-core's
    /// own default is RFC 6928's 10).
    #[serde(default)]
    pub cm_initial_window: Option<u32>,
    /// The controller every CM macroflow runs, in the text form of
    /// `cm_core::controller::spec` (e.g. `"tfrc"`, `"iscc:l=2"`); default
    /// the papers' AIMD with `cm_initial_window`.
    #[serde(default)]
    pub cm_controller: Option<String>,
    /// Advertised receive window of every TCP receiver, bytes (default 65536).
    #[serde(default)]
    pub rcv_wnd: Option<u32>,
    /// Every flow starts up to this many milliseconds after its `start`,
    /// uniformly at random from the seed (default 0: no jitter). Like the
    /// ns-3 counterpart's start jitter, it is what makes seeds differ in a
    /// scenario with no other randomness.
    #[serde(default)]
    pub start_jitter_ms: f64,
    /// The bottleneck (absent, [`Bottleneck::default`], when `topology`
    /// is given).
    #[serde(default, skip_serializing_if = "Bottleneck::is_absent")]
    pub bottleneck: Bottleneck,
    /// The access links (dumbbell only).
    #[serde(default)]
    pub access: Access,
    /// A multi-node network instead of the dumbbell (`[topology]`, the
    /// table `cm_sim::spec` reads; flows' `host` and `dst` name its hosts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology: Option<TopologySpec>,
    /// The flows.
    #[serde(default, rename = "flow")]
    pub flows: Vec<FlowSpec>,
}

fn default_mss() -> u32 {
    1460
}

impl Scenario {
    /// The controller each CM host runs, by host name, for the hosts whose
    /// flows give one (parsed from the flows' `controller` keys; flows of
    /// one host must agree).
    pub fn host_controllers(&self) -> Result<BTreeMap<String, ControllerConfig>, ScenarioError> {
        let mut chosen: BTreeMap<String, (ControllerConfig, &str)> = BTreeMap::new();
        for f in &self.flows {
            let Some(spec) = &f.controller else {
                continue;
            };
            let cfg: ControllerConfig = spec
                .parse()
                .map_err(|e| ScenarioError::Invalid(format!("flow {:?}: {e}", f.name)))?;
            if !matches!(
                f.transport()?,
                Transport::Tcpcm | Transport::Audio | Transport::Proxy
            ) {
                return bad(format!(
                    "flow {:?}: controller is for flows on the CM (tcpcm, audio, proxy), not {}",
                    f.name, f.transport
                ));
            }
            let host = f.host_name();
            match chosen.get(&host) {
                Some((other, by)) if *other != cfg => {
                    return bad(format!(
                        "flows {by:?} and {:?} share host {host:?} (its CM and macroflow) \
                         but give it different controllers",
                        f.name
                    ));
                }
                Some(_) => {}
                None => {
                    chosen.insert(host, (cfg, &f.name));
                }
            }
        }
        Ok(chosen.into_iter().map(|(h, (c, _))| (h, c)).collect())
    }

    /// Turns on delayed ACKs (RFC 5681 §4.2: every second segment, or after
    /// `timeout_ms`) at the receiver of every TCP flow (`newreno`, `tcpcm`
    /// and `web`), as a Linux receiver does by default. `None` leaves the
    /// flows as they are.
    pub fn set_delayed_acks(&mut self, timeout_ms: Option<u64>) {
        let Some(ms) = timeout_ms else {
            return;
        };
        for f in &mut self.flows {
            if matches!(
                f.transport(),
                Ok(Transport::Newreno | Transport::Tcpcm | Transport::Web)
            ) {
                f.delayed_ack = true;
                f.delayed_ack_ms = Some(ms);
            }
        }
    }

    /// The dumbbell's left (sender) and right (receiver) hosts, in the
    /// order the flows first name them.
    pub fn hosts(&self) -> (Vec<String>, Vec<String>) {
        let (mut left, mut right): (Vec<String>, Vec<String>) = (Vec::new(), Vec::new());
        for f in &self.flows {
            let (h, d) = (f.host_name(), f.dst_name());
            if !left.contains(&h) {
                left.push(h);
            }
            if !right.contains(&d) {
                right.push(d);
            }
        }
        (left, right)
    }

    /// When flow `k` starts, s: its `start` plus its seeded share of
    /// `start_jitter_ms`.
    pub fn start_s(&self, k: usize) -> f64 {
        let f = self.flows.get(k).map_or(0.0, |f| f.start);
        f + crate::seeded::unit(self.seed, k as u64) * self.start_jitter_ms / 1e3
    }

    /// The bottleneck queue's limit: `queue_packets`, `queue_bytes`, or one
    /// bandwidth-delay product in bytes (`rate_bps * 2 * delay_ms`).
    pub fn queue_limit(&self) -> QueueLimit {
        let b = &self.bottleneck;
        let rtt_us = u128::from((b.delay_ms * 1e3).round() as u64) * 2;
        let bdp = u64::try_from(u128::from(b.rate_bps) * rtt_us / 8_000_000).unwrap_or(u64::MAX);
        match (b.queue_packets, b.queue_bytes) {
            (Some(p), _) => QueueLimit::Packets(p),
            (_, Some(q)) => QueueLimit::Bytes(q),
            _ => QueueLimit::Bytes(bdp),
        }
    }

    /// The scenario as TOML text, which [`Scenario::from_toml`] reads back.
    pub fn to_toml(&self) -> Result<String, ScenarioError> {
        toml::to_string(self)
            .map_err(|e| ScenarioError::Invalid(format!("cannot write as TOML: {e}")))
    }

    /// Parses and validates TOML text.
    pub fn from_toml(text: &str) -> Result<Scenario, ScenarioError> {
        let s: Scenario = toml::from_str(text)?;
        s.validate()?;
        Ok(s)
    }
}
