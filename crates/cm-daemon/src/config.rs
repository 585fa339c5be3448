//! The daemon's configuration: a TOML file, overridden by flags.
//!
//! ```toml
//! socket = "/run/cm.sock"          # control socket path
//! controller = "aimd"              # of new macroflows, e.g. "iscc:l=2" (cm_core::controller::spec)
//! initial_window = 10              # segments (RFC 6928), for aimd
//! scheduler = "round-robin"        # or "weighted"
//! aging = "min-rtt"                # or "srtt", "off" (sigcomm1999 §4.4)
//! pacing_slack_us = 50             # grants due within this go in one wake-up (cm_core::Config::pacing_slack)
//! share_across_users = false       # flows of different uids never share a macroflow
//! max_flows_per_client = 4096
//! max_macroflows_per_user = 4096  # made by SetMacroflow(flow, None), alive at once
//! max_memory_mib = 1024            # above this resident size, new flows are refused
//! max_messages_per_sec = 2000000   # per client
//! spin_us = 50                     # poll this long after a busy turn before blocking (0: never)
//! shared_memory = true             # offer clients shared-memory rings (cm_ipc::shm)
//! follow_client_cpu = true         # run where the busiest ring client waits (follow.rs)
//! kernel_tcp = false               # load the `cm` TCP congestion control (cm_kernel; root)
//! ```

use std::path::{Path, PathBuf};

use cm_core::controller::{AimdConfig, ControllerConfig};
use cm_core::{Aging, Bytes, Config, Duration};
use serde::Deserialize;

use crate::error::ConfigError;

/// Default spin after activity, in microseconds (about the cost of one
/// cross-CPU wake-up on the target machine, a 2-CPU VM: ~50 µs).
pub const DEFAULT_SPIN_US: u64 = 50;

/// Largest `spin_us` accepted (10 ms).
pub const MAX_SPIN_US: u64 = 10_000;

/// Everything the daemon can be told.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct DaemonConfig {
    /// The control socket path (default: libcm's default path).
    pub socket: Option<PathBuf>,
    /// The controller of every new macroflow, in the text form of
    /// [`cm_core::controller::spec`] (`aimd`, `iiad:mode=window`,
    /// `iscc:l=2`, ...). Clients may choose another for their flows'
    /// macroflows (`cm_set_controller`).
    pub controller: String,
    /// Initial window in segments of the default MTU (RFC 6928: 10), for
    /// the `aimd` controller.
    pub initial_window: u64,
    /// `round-robin` or `weighted` (sigcomm1999 §4.6).
    pub scheduler: String,
    /// Exponential aging half-life: `min-rtt`, `srtt` or `off`.
    pub aging: String,
    /// The shaper's pacing slack in microseconds: grants due within it of
    /// a wake-up are released in that wake-up
    /// ([`cm_core::Config::pacing_slack`]; 0 releases each at its own due
    /// time). At most 1,000,000.
    pub pacing_slack_us: u64,
    /// Let flows of different users share a macroflow (cm-implementation-linux
    /// §5 "Trust issues": off by default).
    pub share_across_users: bool,
    /// Most flows one client may hold.
    pub max_flows_per_client: usize,
    /// Most macroflows one uid may have made with `SetMacroflow(flow,
    /// None)` that still exist (an empty one lingers for the core's
    /// `macroflow_linger`, so a client looping open / set-macroflow / close
    /// would otherwise make the daemon hold one per call for that long).
    pub max_macroflows_per_user: usize,
    /// The daemon's memory budget in MiB: while its resident set is above
    /// it (read once a second), new flows and new clients are refused with
    /// the limit's name; existing clients and flows keep being served. The
    /// other limits bound what one client or user can make it hold; this
    /// bounds their sum. 1024 MiB by default: 1000 clients with 100,000 flows
    /// took 140 MiB (`cm bench load --sweep`).
    pub max_memory_mib: u64,
    /// Most messages per second one client may send (token bucket, one
    /// second of burst).
    pub max_messages_per_sec: u64,
    /// Most clients at once. A client over this (or over the per-user
    /// limit) is told which limit it met before its connection closes
    /// (`CmError::Refused`, `-EMFILE` in C).
    pub max_clients: usize,
    /// Most clients of one uid at once (each attached client costs the
    /// daemon a shared region of about 268 KiB, so this bounds what one
    /// local user can make it allocate).
    pub max_clients_per_user: usize,
    /// Microseconds the loop keeps polling (yielding the CPU between polls)
    /// after a turn that did work, before it blocks; 0 never spins. An idle
    /// daemon always blocks. See `spin.rs`.
    pub spin_us: u64,
    /// Offer clients the shared-memory rings (`cm_ipc::shm`); off, every
    /// client keeps its frames on the control socket.
    pub shared_memory: bool,
    /// Move the daemon's thread to the CPU where its busiest shared-memory
    /// client waits for it by polling and yielding, within the affinity
    /// mask it started with (see `follow.rs`).
    pub follow_client_cpu: bool,
    /// Load the `cm` Linux TCP congestion control (`cm_kernel`) and put
    /// the kernel TCP connections that select it into macroflows (needs
    /// root, BTF and BPF struct_ops).
    pub kernel_tcp: bool,
}

impl Default for DaemonConfig {
    fn default() -> Self {
        DaemonConfig {
            socket: None,
            controller: "aimd".into(),
            initial_window: 10,
            scheduler: "weighted".into(),
            aging: "min-rtt".into(),
            pacing_slack_us: cm_core::config::DEFAULT_PACING_SLACK.as_micros(),
            share_across_users: false,
            max_flows_per_client: 4096,
            max_macroflows_per_user: 4096,
            max_memory_mib: 1024,
            max_messages_per_sec: 2_000_000,
            max_clients: 1024,
            max_clients_per_user: 256,
            spin_us: DEFAULT_SPIN_US,
            shared_memory: true,
            follow_client_cpu: true,
            kernel_tcp: false,
        }
    }
}

impl DaemonConfig {
    /// Read a TOML file.
    pub fn from_file(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        toml::from_str(&text).map_err(|e| ConfigError::Parse {
            path: path.to_path_buf(),
            source: Box::new(e),
        })
    }

    /// The core configuration this describes.
    pub fn core_config(&self) -> Result<Config, ConfigError> {
        let invalid = |m: String| Err(ConfigError::Invalid(m));
        let aging = match self.aging.as_str() {
            "min-rtt" => Aging::MinRtt,
            "srtt" => Aging::Srtt,
            "off" => Aging::Off,
            other => return invalid(format!("aging must be min-rtt, srtt or off, not {other:?}")),
        };
        let scheduler = match self.scheduler.as_str() {
            "round-robin" => cm_core::scheduler::SchedulerKind::RoundRobin,
            "weighted" => cm_core::scheduler::SchedulerKind::Weighted,
            other => {
                return invalid(format!(
                    "scheduler must be round-robin or weighted, not {other:?}"
                ));
            }
        };
        let mut cfg = Config {
            // Connection liveness decides when a client is gone; the core's
            // silence timeout would reclaim a quiet but connected client.
            client_timeout: None,
            aging,
            scheduler,
            pacing_slack: Duration::from_micros(self.pacing_slack_us),
            ..Config::default()
        };
        if self.initial_window == 0 || self.initial_window > 1000 {
            return invalid("initial_window must be in 1..=1000 segments".into());
        }
        cfg.controller = match self
            .controller
            .parse::<ControllerConfig>()
            .map_err(|e| ConfigError::Invalid(e.to_string()))?
        {
            // Plain `aimd`: the papers' AIMD with the configured initial window.
            ControllerConfig::Aimd(_) => ControllerConfig::Aimd(AimdConfig {
                initial_window: Some(Bytes(self.initial_window * cfg.mtu.get())),
                ..Default::default()
            }),
            other => other,
        };
        if self.spin_us > MAX_SPIN_US {
            return invalid(format!(
                "spin_us must be at most {MAX_SPIN_US} (a spin is a short wait, not a loop)"
            ));
        }
        if self.max_flows_per_client == 0
            || self.max_macroflows_per_user == 0
            || self.max_memory_mib == 0
            || self.max_messages_per_sec == 0
            || self.max_clients == 0
            || self.max_clients_per_user == 0
        {
            return invalid("limits must be > 0".into());
        }
        cfg.validate()?;
        Ok(cfg)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spin_is_configurable_and_bounded() {
        let c: DaemonConfig = toml::from_str("spin_us = 0").expect("parses");
        assert_eq!(c.spin_us, 0);
        assert!(c.core_config().is_ok());
        assert_eq!(DaemonConfig::default().spin_us, DEFAULT_SPIN_US);
        let c = DaemonConfig {
            spin_us: MAX_SPIN_US + 1,
            ..DaemonConfig::default()
        };
        assert!(
            c.core_config().is_err(),
            "a spin is a short wait, not a loop"
        );
    }

    /// `pacing_slack_us` sets the core's pacing slack; over a second is
    /// refused with the core's words.
    #[test]
    fn the_pacing_slack_is_configurable_and_bounded() {
        let c: DaemonConfig = toml::from_str("pacing_slack_us = 250").expect("parses");
        assert_eq!(
            c.core_config().expect("valid").pacing_slack,
            Duration::from_micros(250)
        );
        assert_eq!(
            DaemonConfig::default()
                .core_config()
                .expect("defaults")
                .pacing_slack,
            Config::default().pacing_slack
        );
        let c = DaemonConfig {
            pacing_slack_us: 1_000_001,
            ..DaemonConfig::default()
        };
        let err = c.core_config().expect_err("over a second").to_string();
        assert!(err.contains("pacing_slack"), "{err}");
    }

    /// contrib/cmd.toml says its values are the defaults: keep it true.
    #[test]
    fn the_example_config_parses_and_spells_the_defaults() {
        let text = include_str!("../../../contrib/cmd.toml");
        let c: DaemonConfig = toml::from_str(text).expect("contrib/cmd.toml parses");
        assert_eq!(c, DaemonConfig::default());
    }

    /// `controller` picks the controller of new macroflows; plain `aimd`
    /// (the default) keeps `initial_window`; a bad spec is refused with
    /// the parser's words.
    #[test]
    fn the_controller_is_a_spec() {
        let c = DaemonConfig::default().core_config().expect("defaults");
        match &c.controller {
            ControllerConfig::Aimd(a) => {
                assert_eq!(a.initial_window, Some(Bytes(10 * c.mtu.get())));
            }
            other => panic!("default controller {other:?}"),
        }
        let c: DaemonConfig =
            toml::from_str("controller = \"aimd\"\ninitial_window = 4").expect("parses");
        let core = c.core_config().expect("valid");
        assert_eq!(
            core.controller,
            ControllerConfig::Aimd(AimdConfig {
                initial_window: Some(Bytes(4 * core.mtu.get())),
                ..Default::default()
            })
        );
        let c: DaemonConfig = toml::from_str("controller = \"iscc:l=2\"").expect("parses");
        let core = c.core_config().expect("valid");
        assert_eq!(core.controller, "iscc:l=2".parse().expect("a spec"));
        for bad in ["iscc:l=0.5", "tcp-vegas", "iiad:mode=sideways"] {
            let c = DaemonConfig {
                controller: bad.into(),
                ..DaemonConfig::default()
            };
            let err = c.core_config().expect_err(bad).to_string();
            let why = bad
                .parse::<ControllerConfig>()
                .expect_err("a bad spec")
                .to_string();
            assert_eq!(err, why);
        }
    }
}
