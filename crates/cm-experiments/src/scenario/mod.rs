//! Scenarios as data: a TOML description of a dumbbell and the flows over
//! it, validated into a [`Scenario`] that [`crate::simulate::run`] executes.
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
//! transport = "newreno"    # newreno | tcpcm | cbr | audio | web
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
//! `cm_initial_window`. Only CM transports (`tcpcm`, `audio`) take the key.

use std::collections::BTreeMap;

use cm_core::controller::ControllerConfig;
use cm_sim::QueueLimit;
use cm_transport::tcp::{RtoInRecovery, SsthreshRule};
use serde::{Deserialize, Serialize};

mod validate;

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

/// One flow (or traffic source).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlowSpec {
    /// Unique name.
    pub name: String,
    /// `newreno`, `tcpcm`, `cbr`, `audio` or `web`.
    pub transport: String,
    /// Sender host name (default: `"h-" + name`).
    #[serde(default)]
    pub host: Option<String>,
    /// Receiver host name (default: `"r-" + name`).
    #[serde(default)]
    pub dst: Option<String>,
    /// Start time, s.
    #[serde(default)]
    pub start: f64,
    /// Stop time, s (cbr, web; default: end of run).
    #[serde(default)]
    pub stop: Option<f64>,
    /// Bytes to transfer (TCP; absent = bulk).
    #[serde(default)]
    pub bytes: Option<u64>,
    /// Rate, bit/s (cbr).
    #[serde(default)]
    pub rate_bps: Option<u64>,
    /// Payload bytes per packet (cbr, default 1000).
    #[serde(default)]
    pub packet_bytes: Option<u32>,
    /// CM scheduler weight (tcpcm).
    #[serde(default)]
    pub weight: Option<u32>,
    /// Initial window, segments (newreno, web; default 2).
    #[serde(default)]
    pub initial_window: Option<u32>,
    /// Delayed ACKs at the receiver (default false).
    #[serde(default)]
    pub delayed_ack: bool,
    /// Delayed-ACK timeout, ms (default 200).
    #[serde(default)]
    pub delayed_ack_ms: Option<u64>,
    /// Mean transfer size, bytes (web, default 12000).
    #[serde(default)]
    pub mean_bytes: Option<f64>,
    /// Mean think time, s (web, default 0.5).
    #[serde(default)]
    pub think_s: Option<f64>,
    /// Record sequence/ack/window traces (for plots).
    #[serde(default)]
    pub trace: bool,
    /// SACK (RFC 2018 / RFC 6675) for the flow's TCP (newreno, tcpcm, web;
    /// default false): the sender asks for it on the SYN, the receiver
    /// follows the SYN (`cm_transport::TcpConfig::sack`).
    #[serde(default)]
    pub sack: bool,
    /// What NewReno halves into ssthresh on a loss: `flightsize` (default,
    /// RFC 5681 / 6675), `pipe` (ns-3) or `cwnd` (Linux, ns-2); newreno and
    /// web flows, and tcpcm flows only as far as TCP/CM has no window of
    /// its own: none, so it is ignored there (`cm_transport::tcp::SsthreshRule`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ssthresh: Option<String>,
    /// The ssthresh a timeout inside a loss recovery takes: `keep` (default,
    /// Linux: the recovery's) or `halve` (ns-2: half of it again); newreno
    /// and web flows (`cm_transport::tcp::RtoInRecovery`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rto_in_recovery: Option<String>,
    /// The controller of the flow's CM host, in the text form of
    /// [`cm_core::controller::spec`] (tcpcm, audio; see the module docs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub controller: Option<String>,
}

impl FlowSpec {
    /// A flow with only the required fields set.
    pub fn new(name: &str, transport: Transport) -> Self {
        let t = serde_json::to_value(transport)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default();
        FlowSpec {
            name: name.to_owned(),
            transport: t,
            host: None,
            dst: None,
            start: 0.0,
            stop: None,
            bytes: None,
            rate_bps: None,
            packet_bytes: None,
            weight: None,
            initial_window: None,
            delayed_ack: false,
            delayed_ack_ms: None,
            mean_bytes: None,
            think_s: None,
            trace: false,
            sack: false,
            ssthresh: None,
            rto_in_recovery: None,
            controller: None,
        }
    }

    /// The parsed transport.
    pub fn transport(&self) -> Result<Transport, ScenarioError> {
        serde_json::from_value(serde_json::Value::String(self.transport.clone())).or_else(|_| {
            bad(format!(
                "flow {:?}: unknown transport {:?} (expected newreno, tcpcm, cbr, audio or web)",
                self.name, self.transport
            ))
        })
    }

    /// The flow's NewReno rules (`ssthresh` and `rto_in_recovery`), the
    /// defaults where it gives none.
    pub fn tcp_rules(&self) -> Result<(SsthreshRule, RtoInRecovery), ScenarioError> {
        let invalid = |e: &dyn std::fmt::Display| {
            ScenarioError::Invalid(format!("flow {:?}: {e}", self.name))
        };
        let ssthresh = match self.ssthresh.as_deref().map(str::parse::<SsthreshRule>) {
            Some(r) => r.map_err(|e| invalid(&e))?,
            None => SsthreshRule::default(),
        };
        let rto = match self
            .rto_in_recovery
            .as_deref()
            .map(str::parse::<RtoInRecovery>)
        {
            Some(r) => r.map_err(|e| invalid(&e))?,
            None => RtoInRecovery::default(),
        };
        Ok((ssthresh, rto))
    }

    /// Sender host name.
    pub fn host_name(&self) -> String {
        self.host
            .clone()
            .unwrap_or_else(|| format!("h-{}", self.name))
    }

    /// Receiver host name.
    pub fn dst_name(&self) -> String {
        self.dst
            .clone()
            .unwrap_or_else(|| format!("r-{}", self.name))
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
    /// The bottleneck.
    pub bottleneck: Bottleneck,
    /// The access links.
    #[serde(default)]
    pub access: Access,
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
            if !matches!(f.transport()?, Transport::Tcpcm | Transport::Audio) {
                return bad(format!(
                    "flow {:?}: controller is for flows on the CM (tcpcm, audio), not {}",
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
