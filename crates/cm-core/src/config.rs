//! Configuration of a [`crate::CongestionManager`].

use crate::controller::ControllerConfig;
use crate::error::ConfigError;
use crate::flow::Thresholds;
use crate::scheduler::SchedulerKind;
use crate::time::Duration;
use crate::units::Bytes;

/// The half-life of exponential aging (sigcomm1999 §4.4).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Aging {
    /// No aging: with no feedback the macroflow stalls once its window is
    /// full (the "clamp" alternative the paper rejects; useful as a baseline).
    Off,
    /// Halve the open-loop rate every minimum RTT (the paper's choice: the
    /// smoothed RTT grows with queueing exactly when congestion sets in).
    #[default]
    MinRtt,
    /// Halve every smoothed RTT (the paper's first, too aggressive, choice).
    Srtt,
}

/// The default [`Config::pacing_slack`].
pub const DEFAULT_PACING_SLACK: Duration = Duration::from_micros(50);

/// The largest [`Config::pacing_slack`] accepted.
pub const MAX_PACING_SLACK: Duration = Duration::from_secs(1);

/// Parameters of the congestion manager. `Config::default()` is what the
/// daemon runs unless told otherwise.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// The controller each new macroflow runs.
    pub controller: ControllerConfig,
    /// The scheduler each new macroflow runs.
    pub scheduler: SchedulerKind,
    /// Default MTU: the largest grant unit, what `cm_mtu` returns
    /// (1460 = Ethernet's 1500 minus IPv4 and TCP headers).
    pub mtu: Bytes,
    /// Exponential aging half-life.
    pub aging: Aging,
    /// Feedback is late, and exponential aging starts, once it is overdue by
    /// more than max(this, 4 × rttvar) past the smoothed RTT: the clock
    /// granularity G of RFC 6298 §2.2 (scheduling jitter of a
    /// general-purpose OS).
    pub aging_grace: Duration,
    /// A grant not notified within `max(srtt, grant_timeout)` expires
    /// (RFC 3124 §3: a client must not be able to wedge its macroflow).
    pub grant_timeout: Duration,
    /// Flows of a client not heard from for this long are reclaimed;
    /// `None` disables reclamation (embedded single-client use).
    pub client_timeout: Option<Duration>,
    /// How long a macroflow with no flows keeps its learned state, so the
    /// next connection to the host starts from it (cm-implementation-linux §4.3).
    pub macroflow_linger: Duration,
    /// Lower bound of the RTO used for idle restart and aging before an
    /// RTT sample exists (200 ms as in Linux; RFC 6298 §2.4 says 1 s).
    pub min_rto: Duration,
    /// RTO before any RTT sample (RFC 6298 §2.1).
    pub initial_rto: Duration,
    /// The shaper may release this much time's worth of rate at once
    /// (at least 2 MTU): slack for timer granularity.
    pub burst_time: Duration,
    /// Pacing slack: a grant due within this of now is released now, with
    /// the others due in the same wake-up, and the shaper's timer is armed
    /// for the next grant due after those. A timer wake-up costs more than
    /// the bytes a slack of tens of microseconds lets go early, so the
    /// driver wakes about once per `1 + rate × slack / MTU` grants instead
    /// of once per grant; the long-run rate is unchanged (the debt taken
    /// early is repaid before the next wake-up). Linux does the same: fq
    /// releases packets due within its `timer_slack` (10 µs by default),
    /// and TCP's pacing with earliest departure times (EDT) sends what is
    /// due before the next timer. Zero releases every grant at its own
    /// due time. At most one second.
    pub pacing_slack: Duration,
    /// RTT samples above this are rejected as absurd.
    pub max_rtt_sample: Duration,
    /// Largest k of a k-MTU request.
    pub max_request_mtus: u32,
    /// Maximum number of open flows.
    pub max_flows: usize,
    /// Thresholds for flows that subscribe to rate updates without setting any.
    pub default_thresholds: Thresholds,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            controller: ControllerConfig::default(),
            scheduler: SchedulerKind::default(),
            mtu: Bytes(1460),
            aging: Aging::default(),
            aging_grace: Duration::from_millis(1),
            grant_timeout: Duration::from_millis(200),
            client_timeout: Some(Duration::from_secs(60)),
            macroflow_linger: Duration::from_secs(600),
            min_rto: Duration::from_millis(200),
            initial_rto: Duration::from_secs(1),
            burst_time: Duration::from_millis(1),
            pacing_slack: DEFAULT_PACING_SLACK,
            max_rtt_sample: Duration::from_secs(60),
            max_request_mtus: 64,
            max_flows: 1 << 22,
            default_thresholds: Thresholds::default(),
        }
    }
}

impl Config {
    /// Reject configurations the core cannot run.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let bad = |m: &str| Err(ConfigError(m.to_string()));
        if self.mtu.0 == 0 || self.mtu.0 > 65_535 {
            return bad("mtu must be in 1..=65535");
        }
        if self.grant_timeout.is_zero() {
            return bad("grant_timeout must be > 0");
        }
        if self.initial_rto.is_zero() || self.min_rto.is_zero() {
            return bad("initial_rto and min_rto must be > 0");
        }
        if self.max_rtt_sample.is_zero() {
            return bad("max_rtt_sample must be > 0");
        }
        if self.pacing_slack > MAX_PACING_SLACK {
            return bad("pacing_slack must be at most 1 s (a slack, not a burst)");
        }
        if self.max_request_mtus == 0 {
            return bad("max_request_mtus must be >= 1");
        }
        if self.client_timeout.is_some_and(Duration::is_zero) {
            return bad("client_timeout must be > 0 (or disabled)");
        }
        self.default_thresholds
            .validate()
            .map_err(|e| ConfigError(e.to_string()))
    }
}
