//! [`FlowSpec`]: one `[[flow]]` of a scenario.

use cm_transport::maxq::Overflow;
use cm_transport::tcp::{RtoInRecovery, SsthreshRule};
use serde::{Deserialize, Serialize};

use super::{ScenarioError, Transport, bad};

/// One flow (or traffic source).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlowSpec {
    /// Unique name.
    pub name: String,
    /// `newreno`, `tcpcm`, `cbr`, `audio`, `web` or `proxy`.
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
    /// Rate, bit/s (cbr, proxy: the application's payload rate, at
    /// `start` when it ramps).
    #[serde(default)]
    pub rate_bps: Option<u64>,
    /// Added to the rate every `ramp_every_s`, bit/s (cbr, proxy; default
    /// none: a constant rate).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ramp_bps: Option<u64>,
    /// The ramp's step interval, s (> 0; needed with `ramp_bps`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ramp_every_s: Option<f64>,
    /// The proxy's queue limit MAXQ, packets (proxy; default
    /// `cm_transport::maxq::DEFAULT_MAXQ`, 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maxq: Option<usize>,
    /// What the proxy's full queue drops: `head` (default, the oldest
    /// waiting packet) or `tail` (the arriving one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drop: Option<String>,
    /// Payload bytes per packet (cbr, proxy; default 1000).
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
    /// [`cm_core::controller::spec`] (tcpcm, audio, proxy; see the module
    /// docs).
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
            ramp_bps: None,
            ramp_every_s: None,
            maxq: None,
            drop: None,
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
                "flow {:?}: unknown transport {:?} (expected newreno, tcpcm, cbr, audio, web or proxy)",
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

    /// The proxy's overflow policy (`drop`, default drop-from-head).
    pub fn overflow(&self) -> Result<Overflow, ScenarioError> {
        match self.drop.as_deref().map(str::parse::<Overflow>) {
            None => Ok(Overflow::DropHead),
            Some(Ok(Overflow::Block)) => bad(format!(
                "flow {:?}: drop = \"block\" would hold the application back; use head or tail",
                self.name
            )),
            Some(Ok(o)) => Ok(o),
            Some(Err(e)) => bad(format!("flow {:?}: {e}", self.name)),
        }
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
