//! The papers' experiments: each module runs a deterministic sweep of
//! scenarios and returns an [`Output`] (CSV rows, a plot, metrics beside
//! the paper's numbers, notes); [`write()`] puts them in a directory as
//! `<name>.csv`, `<name>.svg` and `<name>.json`, and [`report`] renders a
//! markdown table of all of them.

use std::fmt::Write as _;
use std::path::Path;

use serde_json::{Value, json};

use crate::plot::Plot;
use crate::progress::Progress;
use crate::scenario::{Bottleneck, Scenario, ScenarioError};

pub mod aging;
pub mod bw_estimate;
pub mod collapse;
pub mod layered_audio;
pub mod probing;
pub mod scalability_ideal;
pub mod scalability_t1;
pub mod scheduler;
pub mod seq_trace;
pub mod sharing;
pub mod tcp_friendly;
pub mod tfrc_friendly;
pub mod web4;

/// Why an experiment failed to run.
#[derive(Debug, thiserror::Error)]
pub enum ExperimentError {
    /// No experiment of that name.
    #[error("unknown experiment {0:?} (try `list`)")]
    Unknown(String),
    /// A scenario failed.
    #[error(transparent)]
    Scenario(#[from] ScenarioError),
    /// A simulation could not be set up (topology or configuration).
    #[error("setup: {0}")]
    Setup(String),
    /// Writing outputs failed.
    #[error("writing {path}: {error}")]
    Io {
        /// The file.
        path: String,
        /// Why.
        error: std::io::Error,
    },
}

/// One claim checked against the paper.
#[derive(Clone, Debug)]
pub struct Check {
    /// Metric name.
    pub metric: String,
    /// The value measured here.
    pub ours: f64,
    /// The paper's value (text).
    pub paper: String,
    /// Acceptance rule (text).
    pub accept: String,
    /// Whether ours passes.
    pub pass: bool,
}

/// What an experiment produces.
#[derive(Clone, Debug)]
pub struct Output {
    /// Experiment name.
    pub name: String,
    /// CSV text, header first.
    pub csv: String,
    /// The figure.
    pub plot: Plot,
    /// Metrics (JSON object).
    pub metrics: Value,
    /// The paper's numbers (JSON object).
    pub paper: Value,
    /// Checks against the paper.
    pub checks: Vec<Check>,
    /// How to read the numbers: choices made, deviations, evidence.
    pub notes: Vec<String>,
    /// Rounded summary lines (snapshot-tested).
    pub summary: Vec<String>,
}

/// Run parameters.
#[derive(Clone, Copy, Debug)]
pub struct Opts {
    /// Small variant for tests.
    pub quick: bool,
    /// No progress bar.
    pub quiet: bool,
    /// Worker threads.
    pub threads: usize,
}

/// An experiment entry point.
pub type RunFn = fn(&Opts) -> Result<Output, ExperimentError>;

/// Every experiment: name, description, entry point.
pub const EXPERIMENTS: &[(&str, &str, RunFn)] = &[
    (
        "tcp-friendly",
        "sigcomm1999 Fig 6 §4.1: TCP/CM vs NewReno throughput and loss, 100k-10M bit/s",
        tcp_friendly::run,
    ),
    (
        "sharing",
        "cm-implementation-linux Fig 7 §4.3: 9 sequential 128 KB retrievals, TCP/CM remembers",
        sharing::run,
    ),
    (
        "web4",
        "sigcomm1999 Fig 14 §5.1: 4 concurrent connections, NewReno vs TCP/CM fairness",
        web4::run,
    ),
    (
        "seq-trace",
        "sigcomm1999 Fig 5: sequence traces of TCP/CM and NewReno with web background",
        seq_trace::run,
    ),
    (
        "aging",
        "sigcomm1999 Fig 12 §4.4: exponential aging half-life, minimum RTT vs srtt",
        aging::run,
    ),
    (
        "scheduler",
        "sigcomm1999 Fig 13 §4.6: staggered flows converge to equal and 1:2:4 shares",
        scheduler::run,
    ),
    (
        "layered-audio",
        "sigcomm1999 Fig 15 §5.2: layered audio + TCP/CM on the CM vs one NewReno",
        layered_audio::run,
    ),
    (
        "scalability-ideal",
        "iscc Fig 3 §V-B: packet-loss scalability s_n of AIMD, IIAD, ISCC, ideal feedback, T1",
        scalability_ideal::run,
    ),
    (
        "scalability-t1",
        "iscc Fig 6 §VI-C: loss of 2-50 NACK-based AIMD, IIAD, TFRC, ISCC(2) flows on a T1",
        scalability_t1::run,
    ),
    (
        "bw-estimate",
        "iscc Fig 5 §VI-B: packet-bunch capacity estimates of 2 and 32 AIMD flows on a T1",
        bw_estimate::run,
    ),
    (
        "tfrc-friendly",
        "RFC 5348 control: TFRC-controlled TCP/CM vs NewReno over the tcp-friendly grid",
        tfrc_friendly::run,
    ),
    (
        "probe-frequency",
        "sigcomm1999 §4.2.1: probe-driven CM, loss estimate and TCP-friendliness vs probes per RTT",
        probing::frequency::run,
    ),
    (
        "reordering",
        "sigcomm1999 §4.2.2-4.3: probe-driven CM under reordering/duplication, header vs undo vs naive",
        probing::reordering::run,
    ),
    (
        "aging-probes",
        "sigcomm1999 §4.4: aging half-life, minimum RTT vs srtt, with probe feedback and lost responses",
        aging::probes::run,
    ),
    (
        "collapse",
        "transport-selection-middleware Figs 2-3 §3: two ramping CBR sources on Fig 1, UDP collapses, AIMD proxies do not",
        collapse::run,
    ),
    (
        "voip-proxy",
        "transport-selection-middleware Figs 6-7, Table 1 §4.3: VoIP senders with and without TFRC proxies (MAXQ) on Fig 1",
        collapse::voip::run,
    ),
];

/// Runs experiment `name`.
pub fn run(name: &str, opts: &Opts) -> Result<Output, ExperimentError> {
    let f = EXPERIMENTS
        .iter()
        .find(|(n, _, _)| *n == name)
        .ok_or_else(|| ExperimentError::Unknown(name.to_string()))?
        .2;
    f(opts)
}

impl Output {
    /// The `<name>.json` document.
    pub fn json(&self) -> Value {
        let checks: Vec<Value> = self
            .checks
            .iter()
            .map(|c| {
                json!({"metric": c.metric, "ours": c.ours, "paper": c.paper,
                       "accept": c.accept, "pass": c.pass})
            })
            .collect();
        json!({
            "experiment": self.name,
            "metrics": self.metrics,
            "paper": self.paper,
            "checks": checks,
            "notes": self.notes,
        })
    }

    /// Whether every check passes.
    pub fn pass(&self) -> bool {
        self.checks.iter().all(|c| c.pass)
    }
}

fn write_file(path: &Path, text: &str) -> Result<(), ExperimentError> {
    std::fs::write(path, text).map_err(|error| ExperimentError::Io {
        path: path.display().to_string(),
        error,
    })
}

/// Writes `<dir>/<name>.{csv,svg,json}`.
pub fn write(out: &Output, dir: &Path) -> Result<(), ExperimentError> {
    write_with(out, dir, &out.json())
}

/// [`write()`] with `json` as the `<name>.json` document (`out.json()` with
/// additions, such as `cm experiment --referee`'s `referee` block).
pub fn write_with(out: &Output, dir: &Path, json: &Value) -> Result<(), ExperimentError> {
    std::fs::create_dir_all(dir).map_err(|error| ExperimentError::Io {
        path: dir.display().to_string(),
        error,
    })?;
    write_file(&dir.join(format!("{}.csv", out.name)), &out.csv)?;
    write_file(&dir.join(format!("{}.svg", out.name)), &out.plot.to_svg())?;
    let json = serde_json::to_string_pretty(json).unwrap_or_default();
    write_file(&dir.join(format!("{}.json", out.name)), &json)
}

/// The markdown report of several experiments: the measured numbers beside the paper's.
pub fn report(outs: &[Output], quick: bool) -> String {
    let mut s = String::from("# Congestion Manager experiments\n\n");
    if quick {
        s.push_str("Quick variants (fewer seeds/conditions): numbers are indicative only.\n\n");
    }
    for o in outs {
        let _ = writeln!(s, "## {}\n", o.name);
        s.push_str("| metric | ours | paper | accept | pass |\n|---|---|---|---|---|\n");
        for c in &o.checks {
            let _ = writeln!(
                s,
                "| {} | {:.3} | {} | {} | {} |",
                c.metric,
                c.ours,
                c.paper,
                c.accept,
                if c.pass { "yes" } else { "**no**" }
            );
        }
        s.push_str("\n```\n");
        for l in &o.summary {
            let _ = writeln!(s, "{l}");
        }
        s.push_str("```\n\n");
        for n in &o.notes {
            let _ = writeln!(s, "- {n}");
        }
        let _ = writeln!(s, "\nFiles: `{0}.csv`, `{0}.svg`, `{0}.json`.\n", o.name);
    }
    s
}

/// A progress bar for `n` runs of experiment `name`.
pub(crate) fn progress(name: &str, n: usize, opts: &Opts) -> Progress {
    Progress::new(name, n, opts.quiet)
}

/// A dumbbell scenario with no flows: `rate_bps`, `one_way_ms` path delay,
/// BDP queue (sigcomm1999 §4.1).
pub(crate) fn base(name: &str, rate_bps: u64, one_way_ms: f64, secs: f64, seed: u64) -> Scenario {
    Scenario {
        name: name.to_string(),
        duration: secs,
        seed,
        mss: 1460,
        rcv_wnd: None,
        start_jitter_ms: 0.0,
        cm_initial_window: None,
        cm_controller: None,
        bottleneck: Bottleneck {
            rate_bps,
            delay_ms: one_way_ms,
            queue: Some("bdp".into()),
            ..Bottleneck::default()
        },
        access: crate::scenario::Access::default(),
        topology: None,
        flows: Vec::new(),
    }
}

/// Linux's delayed-ACK timeout when it ACKs every second segment
/// (`TCP_DELACK_MIN`, 40 ms), the variant runs' default.
pub const LINUX_DELAYED_ACK_MS: u64 = 40;

/// The note of a variant run with delayed ACKs of `ms` at every TCP receiver.
pub(crate) fn delayed_ack_note(ms: u64) -> String {
    format!(
        "Delayed ACKs (RFC 5681 §4.2) at every TCP receiver, TCP/CM and NewReno alike, background and cross traffic included: an ACK for every second in-order segment or {ms} ms after the first unacknowledged one, and at once for out-of-order or gap-filling data. The CM's AIMD counts acknowledged bytes (RFC 3465); the NewReno senders count ACKs (RFC 5681 §3.1 eq. 2 and 3, like ns-2's NewReno), so with delayed ACKs their windows grow more slowly."
    )
}

/// A check.
pub(crate) fn check(metric: &str, ours: f64, paper: &str, accept: &str, pass: bool) -> Check {
    Check {
        metric: metric.into(),
        ours,
        paper: paper.into(),
        accept: accept.into(),
        pass,
    }
}
