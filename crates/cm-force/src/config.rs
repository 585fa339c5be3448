//! The wrapper's settings, from the environment `cm wrap` sets (so an
//! `LD_PRELOAD`ed program, which takes no arguments of ours, gets them).

use cm_core::controller::ControllerConfig;
use cm_transport::maxq::{DEFAULT_MAXQ, Overflow};

/// `CM_WRAP_MAXQ`: packets each flow's queue holds (default 1).
pub const ENV_MAXQ: &str = "CM_WRAP_MAXQ";
/// `CM_WRAP_DROP`: `head` (default) or `tail`.
pub const ENV_DROP: &str = "CM_WRAP_DROP";
/// `CM_WRAP_PORT`: the receiver CM's UDP port (default 3124).
pub const ENV_PORT: &str = "CM_WRAP_PORT";
/// `CM_WRAP_CONTROLLER`: the macroflows' controller, text form
/// (`aimd`, `tfrc`, `iiad`, ...; default: the CM's).
pub const ENV_CONTROLLER: &str = "CM_WRAP_CONTROLLER";
/// `CM_WRAP_REPORT`: a file the wrapper rewrites every second with its
/// per-flow counts (JSON, [`crate::Report`]).
pub const ENV_REPORT: &str = "CM_WRAP_REPORT";
/// `CM_WRAP_LOOPBACK=1`: wrap datagrams to loopback addresses too.
pub const ENV_LOOPBACK: &str = "CM_WRAP_LOOPBACK";
/// `CM_WRAP_EXCLUDE`: comma-separated destination ports left alone
/// (default `53`: DNS).
pub const ENV_EXCLUDE: &str = "CM_WRAP_EXCLUDE";

/// The wrapper's settings.
#[derive(Clone, Debug, PartialEq)]
pub struct WrapConfig {
    /// Packets each flow's queue holds.
    pub maxq: usize,
    /// What a full queue drops.
    pub overflow: Overflow,
    /// The receiver CM's UDP port.
    pub receiver_port: u16,
    /// The macroflows' controller, if not the CM's default.
    pub controller: Option<ControllerConfig>,
    /// Where to write the per-flow report.
    pub report: Option<std::path::PathBuf>,
    /// Wrap loopback destinations too.
    pub loopback: bool,
    /// Destination ports left alone.
    pub exclude_ports: Vec<u16>,
}

impl Default for WrapConfig {
    fn default() -> Self {
        WrapConfig {
            maxq: DEFAULT_MAXQ,
            overflow: Overflow::DropHead,
            receiver_port: cm_proto::wire::DEFAULT_PORT,
            controller: None,
            report: None,
            loopback: false,
            exclude_ports: vec![53],
        }
    }
}

/// A setting the wrapper cannot use.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{var}={value:?}: {why}")]
pub struct ConfigError {
    /// The variable.
    pub var: &'static str,
    /// Its value.
    pub value: String,
    /// What is wrong.
    pub why: String,
}

impl WrapConfig {
    /// The settings from `get` (the environment: `std::env::var`).
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<WrapConfig, ConfigError> {
        let mut c = WrapConfig::default();
        let err = |var: &'static str, value: &str, why: String| ConfigError {
            var,
            value: value.to_owned(),
            why,
        };
        if let Some(v) = get(ENV_MAXQ) {
            c.maxq = match v.trim().parse::<usize>() {
                Ok(n) if (1..=100_000).contains(&n) => n,
                _ => {
                    return Err(err(
                        ENV_MAXQ,
                        &v,
                        "give a packet count from 1 to 100000".into(),
                    ));
                }
            };
        }
        if let Some(v) = get(ENV_DROP) {
            c.overflow = match v.parse::<Overflow>() {
                Ok(Overflow::Block) => {
                    return Err(err(
                        ENV_DROP,
                        &v,
                        "a wrapped program cannot be blocked: use head or tail".into(),
                    ));
                }
                Ok(o) => o,
                Err(e) => return Err(err(ENV_DROP, &v, e.to_string())),
            };
        }
        if let Some(v) = get(ENV_PORT) {
            c.receiver_port = match v.trim().parse::<u16>() {
                Ok(p) if p > 0 => p,
                _ => return Err(err(ENV_PORT, &v, "give a UDP port from 1 to 65535".into())),
            };
        }
        if let Some(v) = get(ENV_CONTROLLER) {
            c.controller = Some(
                v.parse()
                    .map_err(|e: cm_core::controller::spec::SpecError| {
                        err(ENV_CONTROLLER, &v, e.to_string())
                    })?,
            );
        }
        c.report = get(ENV_REPORT).filter(|v| !v.is_empty()).map(Into::into);
        c.loopback = get(ENV_LOOPBACK).is_some_and(|v| v == "1");
        if let Some(v) = get(ENV_EXCLUDE) {
            c.exclude_ports = v
                .split(',')
                .filter(|p| !p.trim().is_empty())
                .map(|p| p.trim().parse::<u16>())
                .collect::<Result<_, _>>()
                .map_err(|e| err(ENV_EXCLUDE, &v, e.to_string()))?;
        }
        Ok(c)
    }

    /// The settings from the process environment.
    pub fn from_env() -> Result<WrapConfig, ConfigError> {
        WrapConfig::from_lookup(|k| std::env::var(k).ok())
    }

    /// Whether datagrams to `dst` are wrapped.
    pub fn wraps(&self, dst: std::net::SocketAddrV4) -> bool {
        let ip = dst.ip();
        if ip.is_multicast() || ip.is_broadcast() || ip.is_unspecified() {
            return false;
        }
        if ip.is_loopback() && !self.loopback {
            return false;
        }
        dst.port() != self.receiver_port && !self.exclude_ports.contains(&dst.port())
    }
}

/// `CM_WRAP_LIB`: where `libcm_wrap.so` is, if not next to the program.
pub const ENV_LIB: &str = "CM_WRAP_LIB";

/// The `LD_PRELOAD` library: `explicit`, else `$CM_WRAP_LIB`, else
/// `libcm_wrap.so` in the running program's directory or its parent
/// (`target/release/` for both `cm` and the test binaries in
/// `target/release/deps/`).
pub fn find_wrap_library(explicit: Option<&std::path::Path>) -> Result<std::path::PathBuf, String> {
    let from_env = std::env::var_os(ENV_LIB).map(std::path::PathBuf::from);
    if let Some(p) = explicit.map(std::path::Path::to_path_buf).or(from_env) {
        return if p.is_file() {
            Ok(p.canonicalize().unwrap_or(p))
        } else {
            Err(format!("{} does not exist", p.display()))
        };
    }
    let exe = std::env::current_exe().map_err(|e| format!("finding this program: {e}"))?;
    let dir = exe.parent().ok_or("this program has no directory")?;
    for cand in [dir.join("libcm_wrap.so"), dir.join("../libcm_wrap.so")] {
        if cand.is_file() {
            return Ok(cand.canonicalize().unwrap_or(cand));
        }
    }
    Err(format!(
        "libcm_wrap.so is not next to {}: build it with `cargo build --release -p cm-wrap`, or set {ENV_LIB}",
        exe.display()
    ))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::collections::HashMap;

    fn cfg(vars: &[(&str, &str)]) -> Result<WrapConfig, ConfigError> {
        let m: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| ((*k).into(), (*v).into()))
            .collect();
        WrapConfig::from_lookup(|k| m.get(k).cloned())
    }

    #[test]
    fn defaults_and_overrides() {
        let c = cfg(&[]).unwrap();
        assert_eq!(
            (c.maxq, c.overflow, c.receiver_port),
            (1, Overflow::DropHead, 3124)
        );
        let c = cfg(&[
            (ENV_MAXQ, "25"),
            (ENV_DROP, "tail"),
            (ENV_CONTROLLER, "tfrc"),
            (ENV_EXCLUDE, "53,123"),
        ])
        .unwrap();
        assert_eq!((c.maxq, c.overflow), (25, Overflow::DropTail));
        assert!(c.controller.is_some());
        assert_eq!(c.exclude_ports, vec![53, 123]);
    }

    #[test]
    fn bad_settings_name_the_variable() {
        for (k, v) in [
            (ENV_MAXQ, "0"),
            (ENV_MAXQ, "x"),
            (ENV_DROP, "block"),
            (ENV_DROP, "up"),
            (ENV_PORT, "0"),
            (ENV_CONTROLLER, "warp"),
        ] {
            let e = cfg(&[(k, v)]).unwrap_err().to_string();
            assert!(e.starts_with(k), "{e}");
        }
    }

    #[test]
    fn which_destinations_are_wrapped() {
        let c = cfg(&[]).unwrap();
        let a = |s: &str| s.parse::<std::net::SocketAddrV4>().unwrap();
        assert!(c.wraps(a("10.1.2.2:5201")));
        assert!(!c.wraps(a("127.0.0.1:5201")));
        assert!(!c.wraps(a("10.1.2.2:53")));
        assert!(!c.wraps(a("10.1.2.2:3124")));
        assert!(!c.wraps(a("224.0.0.1:5000")));
        assert!(
            cfg(&[(ENV_LOOPBACK, "1")])
                .unwrap()
                .wraps(a("127.0.0.1:5201"))
        );
    }
}
