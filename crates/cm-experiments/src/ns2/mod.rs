//! ns-2, the simulator the SIGCOMM'99 paper used, as a referee for this
//! one: a [`Scenario`]'s baseline flows (NewReno with or without SACK,
//! web-like transfers, CBR) are written as an ns-2 Tcl script
//! ([`tcl::script`]), run by Debian's `ns` (ns-2.35, `apt-get install
//! ns2`), and read back as a [`Ns2Result`] whose fields mean what
//! [`crate::simulate::ScenarioResult`]'s do. The script is generated from
//! the scenario value an experiment runs, so the two simulators cannot
//! drift apart.
//!
//! ```no_run
//! use cm_experiments::{ns2, scenario::Scenario};
//!
//! let s = Scenario::from_toml(r#"
//!     name = "one-flow"
//!     duration = 10.0
//!     [bottleneck]
//!     rate_bps = 1_000_000
//!     delay_ms = 60
//!     queue = "bdp"
//!     [[flow]]
//!     name = "a"
//!     transport = "newreno"
//! "#).unwrap();
//! let r = ns2::run(&s).unwrap(); // needs `ns` on PATH (or CM_NS2)
//! println!("{} bit/s, {} drops", r.flows[0].goodput_bps, r.drops);
//! ```

use std::path::PathBuf;
use std::process::Command;

use serde::Serialize;

use crate::scenario::{Scenario, ScenarioError};

pub mod t1;
pub mod tcl;

/// Why an ns-2 run failed.
#[derive(Debug, thiserror::Error)]
pub enum Ns2Error {
    /// The scenario is invalid.
    #[error(transparent)]
    Scenario(#[from] ScenarioError),
    /// The scenario uses something ns-2 does not model here.
    #[error("not runnable in ns-2: {0}")]
    Unsupported(String),
    /// The `ns` binary is missing.
    #[error(
        "ns-2 is not installed: {0} (install it with `apt-get install ns2`, or run scripts/ns2-referee.sh as root, which does; CM_NS2 names another binary)"
    )]
    NotInstalled(String),
    /// ns-2 ran but failed or printed something unexpected.
    #[error("ns-2 run of {scenario:?} failed: {why}")]
    Run {
        /// The scenario.
        scenario: String,
        /// ns-2's complaint or what could not be parsed.
        why: String,
    },
}

/// One flow's outcome in ns-2, with [`crate::simulate::FlowResult`]'s meaning.
#[derive(Clone, Debug, Serialize)]
pub struct Ns2Flow {
    /// Flow name.
    pub name: String,
    /// Delivered bytes × 8 / (completion time, or run end − start).
    pub goodput_bps: f64,
    /// Application bytes delivered in order (TCP: cumulatively ACKed).
    pub bytes_delivered: u64,
    /// Data packets sent (TCP: ns-2's `ndatapack_`, SYN included).
    pub sent_packets: u64,
    /// Retransmitted packets.
    pub retransmits: u64,
    /// Retransmission timeouts.
    pub timeouts: u64,
    /// Finite transfers: start-to-last-ACK time, s.
    pub completion_s: Option<f64>,
    /// Web sources: transfers started.
    pub transfers: u64,
    /// This flow's packets dropped at the bottleneck.
    pub drops: u64,
}

/// The outcome of a scenario in ns-2.
#[derive(Clone, Debug, Serialize)]
pub struct Ns2Result {
    /// Per flow, in scenario order.
    pub flows: Vec<Ns2Flow>,
    /// Packets dropped at the bottleneck queue.
    pub drops: u64,
    /// Packets that left the bottleneck.
    pub departures: u64,
}

/// The ns-2 binary: `$CM_NS2`, else `ns` on `PATH`.
pub fn binary() -> PathBuf {
    std::env::var_os("CM_NS2").map_or_else(|| PathBuf::from("ns"), PathBuf::from)
}

/// Whether ns-2 can be run here.
pub fn available() -> bool {
    Command::new(binary()).arg("-version").output().is_ok()
}

/// Runs `s` in ns-2 (see [`tcl::script`] for what is mapped and how).
pub fn run(s: &Scenario) -> Result<Ns2Result, Ns2Error> {
    run_with(s, tcl::Options::default())
}

/// [`run`] with `opt`'s stand-ins for CM flows ([`tcl::Options`]).
pub fn run_with(s: &Scenario, opt: tcl::Options) -> Result<Ns2Result, Ns2Error> {
    let script = tcl::script_with(s, opt)?;
    let stdout = execute(&s.name, &script)?;
    parse(s, &stdout).map_err(|why| Ns2Error::Run {
        scenario: s.name.clone(),
        why,
    })
}

/// Runs `script` in ns-2 from a temporary file and returns what it printed;
/// `name` names the run in errors.
pub(crate) fn execute(name: &str, script: &str) -> Result<String, Ns2Error> {
    let dir = std::env::temp_dir();
    let path = dir.join(format!("cm-ns2-{}-{}.tcl", std::process::id(), unique()));
    let fail = |why: String| Ns2Error::Run {
        scenario: name.to_string(),
        why,
    };
    std::fs::write(&path, script).map_err(|e| fail(format!("writing {}: {e}", path.display())))?;
    let out = Command::new(binary()).arg(&path).current_dir(&dir).output();
    let _ = std::fs::remove_file(&path);
    let out = out.map_err(|e| Ns2Error::NotInstalled(format!("{}: {e}", binary().display())))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let tail: Vec<&str> = err.lines().take(6).collect();
        return Err(fail(format!("{} ({})", out.status, tail.join(" | "))));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// A process-wide counter so parallel runs never share a script file.
fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

/// `key value` pairs of one report line, after its first `skip` words.
fn fields(line: &str, skip: usize) -> Vec<(&str, &str)> {
    let words: Vec<&str> = line.split_whitespace().skip(skip).collect();
    words
        .chunks(2)
        .filter_map(|c| Some((c[0], *c.get(1)?)))
        .collect()
}

fn num(pairs: &[(&str, &str)], key: &str) -> Result<f64, String> {
    let v = pairs
        .iter()
        .find(|(k, _)| *k == key)
        .ok_or_else(|| format!("no {key:?} in ns-2's report"))?
        .1;
    v.parse::<f64>()
        .map_err(|_| format!("{key} {v:?} in ns-2's report is not a number"))
}

/// Reads the report lines the script prints (module docs of [`tcl`]).
pub fn parse(s: &Scenario, stdout: &str) -> Result<Ns2Result, String> {
    let mut flows: Vec<Option<Ns2Flow>> = vec![None; s.flows.len()];
    let mut bottleneck = None;
    for line in stdout.lines() {
        if let Some(rest) = line.strip_prefix("flow ") {
            let idx: usize = rest
                .split_whitespace()
                .next()
                .and_then(|w| w.parse().ok())
                .ok_or_else(|| format!("bad report line {line:?}"))?;
            let spec = idx
                .checked_sub(1)
                .and_then(|i| s.flows.get(i))
                .ok_or_else(|| format!("report for unknown flow {idx}"))?;
            let p = fields(line, 2);
            let bytes = num(&p, "bytes")? as u64;
            let completion = Some(num(&p, "completion")?).filter(|c| *c >= 0.0);
            let active = completion.unwrap_or(s.duration - spec.start);
            flows[idx - 1] = Some(Ns2Flow {
                name: spec.name.clone(),
                goodput_bps: if active > 0.0 {
                    bytes as f64 * 8.0 / active
                } else {
                    0.0
                },
                bytes_delivered: bytes,
                sent_packets: num(&p, "sent")? as u64,
                retransmits: num(&p, "rtx")? as u64,
                timeouts: num(&p, "timeouts")? as u64,
                completion_s: completion,
                transfers: num(&p, "transfers")? as u64,
                drops: num(&p, "drops")? as u64,
            });
        } else if line.starts_with("bottleneck ") {
            let p = fields(line, 1);
            bottleneck = Some((num(&p, "drops")? as u64, num(&p, "departures")? as u64));
        }
    }
    let (drops, departures) = bottleneck.ok_or("ns-2 printed no bottleneck line")?;
    let flows = flows
        .into_iter()
        .enumerate()
        .map(|(i, f)| f.ok_or(format!("ns-2 printed no line for flow {}", i + 1)))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Ns2Result {
        flows,
        drops,
        departures,
    })
}
