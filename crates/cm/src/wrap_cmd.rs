//! `cm wrap -- PROGRAM` and `cm receiver`: congestion control forced on an
//! unmodified program's UDP sends (an `LD_PRELOAD` library, `cm-wrap`),
//! and the receiver CM that gives it feedback by counting.

use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use anyhow::{Context, bail};
use clap::Args;
use cm_force::config::{
    ENV_CONTROLLER, ENV_DROP, ENV_EXCLUDE, ENV_LOOPBACK, ENV_MAXQ, ENV_PORT, ENV_REPORT, WrapConfig,
};

/// `cm wrap`.
#[derive(Debug, Args)]
#[command(after_help = "Examples:
  # On the receiving host (root: it counts datagrams on a raw socket):
  cm receiver
  # On the sending host: an unmodified iperf3 held to a TCP-friendly share.
  cm wrap -- iperf3 -u -b 50M -c 10.0.2.2
  # A bigger queue that drops the newest datagram instead, with a report.
  cm wrap --maxq 25 --drop tail --report /tmp/wrap.json -- gst-launch-1.0 ...

The wrapped program's IPv4 UDP datagrams (sendto, send, sendmsg, sendmmsg,
write) wait in a queue of MAXQ packets per flow and leave when the Congestion
Manager grants; they join the host's macroflows through cmd when it runs,
else a CM inside the program. Feedback comes from `cm receiver` on the
destination host; without one the CM hears nothing back and holds each
flow to its slowest pace. Static binaries and raw sockets are not wrapped.")]
pub struct WrapArgs {
    /// Packets each flow's queue holds (the paper's MAXQ).
    #[arg(long, default_value_t = 1)]
    maxq: usize,
    /// What a full queue drops: head (the oldest, default) or tail (the newest).
    #[arg(long, default_value = "head")]
    drop: String,
    /// The macroflows' controller: aimd, tfrc, iiad, sqrt, iscc, binomial:k=..,l=..
    #[arg(long)]
    controller: Option<String>,
    /// Rewrite this file every second with per-flow offered, sent and dropped counts (JSON).
    #[arg(long)]
    report: Option<PathBuf>,
    /// The receiver CM's UDP port on the destination host.
    #[arg(long, default_value_t = cm_proto::wire::DEFAULT_PORT)]
    port: u16,
    /// Wrap datagrams to loopback addresses too.
    #[arg(long)]
    loopback: bool,
    /// Destination ports to leave alone (comma-separated).
    #[arg(long, default_value = "53")]
    exclude: String,
    /// The library to preload (default: $CM_WRAP_LIB, else libcm_wrap.so
    /// next to this program).
    #[arg(long)]
    lib: Option<PathBuf>,
    /// The program and its arguments.
    #[arg(trailing_var_arg = true, required = true, num_args = 1..)]
    program: Vec<String>,
}

/// Check the settings, set the environment and replace this process
/// with the program.
pub fn run(a: &WrapArgs) -> anyhow::Result<()> {
    let vars: Vec<(&str, String)> = [
        Some((ENV_MAXQ, a.maxq.to_string())),
        Some((ENV_DROP, a.drop.clone())),
        a.controller.clone().map(|c| (ENV_CONTROLLER, c)),
        a.report
            .as_ref()
            .map(|r| (ENV_REPORT, r.display().to_string())),
        Some((ENV_PORT, a.port.to_string())),
        a.loopback.then(|| (ENV_LOOPBACK, "1".to_owned())),
        Some((ENV_EXCLUDE, a.exclude.clone())),
    ]
    .into_iter()
    .flatten()
    .collect();
    // The library reads the same variables: refuse here, with the flag's
    // own message, what it would refuse there.
    if let Err(e) =
        WrapConfig::from_lookup(|k| vars.iter().find(|(n, _)| *n == k).map(|(_, v)| v.clone()))
    {
        let flag = match e.var {
            ENV_MAXQ => "maxq",
            ENV_DROP => "drop",
            ENV_CONTROLLER => "controller",
            ENV_PORT => "port",
            ENV_EXCLUDE => "exclude",
            _ => e.var,
        };
        bail!("--{flag} {}: {}", e.value, e.why);
    }
    let lib = cm_force::config::find_wrap_library(a.lib.as_deref()).map_err(anyhow::Error::msg)?;
    let preload = match std::env::var("LD_PRELOAD") {
        Ok(p) if !p.is_empty() => format!("{}:{p}", lib.display()),
        _ => lib.display().to_string(),
    };
    let (prog, args) = a.program.split_first().context("no program given")?;
    let mut cmd = std::process::Command::new(prog);
    cmd.args(args).env("LD_PRELOAD", preload);
    for (k, v) in &vars {
        cmd.env(k, v);
    }
    let e = cmd.exec();
    bail!("cannot run {prog}: {e}")
}

/// `cm receiver`.
#[derive(Debug, Args)]
#[command(
    after_help = "Example (root, on the host that receives a wrapped program's datagrams):
  cm receiver --secs 60 --json

It counts every UDP datagram arriving at this host by sending host and ports
(a raw socket: root or CAP_NET_RAW) and answers `cm wrap` senders' probes with
the counts, so the sender's CM learns loss and round-trip time without a
header in the datagrams (sigcomm1999 §4.2.2). The receiving programs are not
touched."
)]
pub struct ReceiverArgs {
    /// UDP port for probes.
    #[arg(long, default_value_t = cm_proto::wire::DEFAULT_PORT)]
    port: u16,
    /// Stop after this many seconds (default: until SIGINT/SIGTERM).
    #[arg(long)]
    secs: Option<f64>,
    /// Print the counts as JSON when done.
    #[arg(long)]
    json: bool,
}

/// Run the receiver CM.
pub fn run_receiver(a: &ReceiverArgs) -> anyhow::Result<()> {
    let mut r = cm_force::Receiver::bind(a.port)?;
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, Arc::clone(&stop))
            .context("installing signal handlers")?;
    }
    let until = match a.secs {
        Some(s) if s.is_finite() && s > 0.0 => {
            Some(std::time::Instant::now() + std::time::Duration::from_secs_f64(s))
        }
        Some(s) => bail!("--secs {s}: give a positive number of seconds"),
        None => None,
    };
    eprintln!(
        "cm receiver: counting UDP datagrams, answering probes on port {}",
        r.port()
    );
    r.run(&stop, until)?;
    let s = r.stats();
    if a.json {
        println!("{}", serde_json::to_string_pretty(&s)?);
    } else {
        println!(
            "datagrams counted {}, probes answered {}, flows {}, malformed {}",
            s.datagrams, s.probes, s.flows, s.malformed
        );
    }
    Ok(())
}
