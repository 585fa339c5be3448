//! `cm proxy ingress|egress`: the VoIP proxy of the transport-selection
//! middleware paper (§4.3) as a UDP relay pair over a congestion-
//! controlled channel.

use std::cell::RefCell;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use cm_force::proxy::{Egress, EgressConfig, Ingress, IngressConfig, Relay, run_all};
use libcm::ccudp::SharedCm;

/// `cm proxy`.
#[derive(Debug, Args)]
#[command(
    after_help = "Example: an unmodified program on host A sends to 127.0.0.1:5000; its
datagrams reach 10.0.2.2:5004 through a TFRC channel A → B.
  on B:  cm proxy egress --listen 0.0.0.0:6000 --deliver 127.0.0.1:5004
  on A:  cm proxy ingress --listen 127.0.0.1:5000 --to B:6000 --maxq 1
  on A:  the-program --dest 127.0.0.1:5000
The ingress keeps at most MAXQ datagrams besides the one the CM is sending
and drops from the head (or the tail) when more arrive; each end prints its
counts when it stops (SIGINT/SIGTERM or --secs)."
)]
pub struct ProxyArgs {
    #[command(subcommand)]
    end: End,
}

#[derive(Debug, Subcommand)]
enum End {
    /// The application's side: take its datagrams, queue, send as the CM allows.
    Ingress(IngressArgs),
    /// The destination's side: deliver what arrives, acknowledge, carry replies back.
    Egress(EgressArgs),
}

#[derive(Debug, Args)]
struct IngressArgs {
    /// Where the application sends its datagrams (e.g. 127.0.0.1:5000).
    #[arg(long)]
    listen: SocketAddr,
    /// The egress end (HOST:PORT).
    #[arg(long)]
    to: SocketAddr,
    /// Datagrams that may wait besides the one being sent (the paper's MAXQ).
    #[arg(long, default_value_t = 1)]
    maxq: usize,
    /// What a full queue drops: head (the oldest) or tail (the newest).
    #[arg(long, default_value = "head")]
    drop: String,
    /// The channel's controller (tfrc, aimd, iiad, sqrt, iscc, binomial:k=..,l=..).
    #[arg(long, default_value = "tfrc")]
    controller: String,
    #[command(flatten)]
    common: Common,
}

#[derive(Debug, Args)]
struct EgressArgs {
    /// The channel port the ingress sends to (e.g. 0.0.0.0:6000).
    #[arg(long)]
    listen: SocketAddr,
    /// The real destination (HOST:PORT).
    #[arg(long)]
    deliver: SocketAddr,
    #[command(flatten)]
    common: Common,
}

#[derive(Debug, Args)]
pub(crate) struct Common {
    /// Stop after this many seconds (default: until SIGINT/SIGTERM).
    #[arg(long)]
    pub(crate) secs: Option<f64>,
    /// Print the counts as pretty JSON when done.
    #[arg(long)]
    pub(crate) json: bool,
    /// Print the counts to stderr every this many seconds.
    #[arg(long)]
    pub(crate) every: Option<f64>,
}

pub(crate) fn positive(name: &str, v: Option<f64>) -> anyhow::Result<Option<Duration>> {
    match v {
        None => Ok(None),
        Some(s) if s.is_finite() && s > 0.0 => Ok(Some(Duration::from_secs_f64(s))),
        Some(s) => bail!("--{name} {s}: give a positive number of seconds"),
    }
}

fn stop_flag() -> anyhow::Result<Arc<AtomicBool>> {
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, Arc::clone(&stop))
            .context("installing signal handlers")?;
    }
    Ok(stop)
}

/// Relay with `end` until stopped or [`Relay::finished`] (printing
/// `progress` to stderr every `every`), then print its report.
pub(crate) fn relay<R: Relay, T: serde::Serialize>(
    end: &mut R,
    cm: &SharedCm,
    common: &Common,
    report: impl Fn(&R) -> T,
    progress: impl Fn(&R) -> String,
) -> anyhow::Result<()> {
    let until = positive("secs", common.secs)?.map(|d| Instant::now() + d);
    let every = positive("every", common.every)?;
    let stop = stop_flag()?;
    loop {
        let slice = every.map(|e| Instant::now() + e);
        let next = match (slice, until) {
            (Some(s), Some(u)) => Some(s.min(u)),
            (s, u) => s.or(u),
        };
        run_all(std::slice::from_mut(end), cm, &stop, next)?;
        if stop.load(Ordering::Relaxed)
            || until.is_some_and(|u| Instant::now() >= u)
            || end.finished()
        {
            break;
        }
        eprintln!("{}", progress(end));
    }
    let json = serde_json::to_value(report(end))?;
    if common.json {
        println!("{}", serde_json::to_string_pretty(&json)?);
    } else {
        println!("{json}");
    }
    Ok(())
}

fn json_line(v: &impl serde::Serialize) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

/// Run one end until stopped; print its counts.
pub fn run(a: &ProxyArgs) -> anyhow::Result<()> {
    let cm: SharedCm = Rc::new(RefCell::new(libcm::Cm::new().context("opening the CM")?));
    match &a.end {
        End::Ingress(i) => {
            let cfg = IngressConfig {
                listen: i.listen,
                egress: i.to,
                maxq: match i.maxq {
                    0 => bail!("--maxq 0: give at least 1"),
                    n => n,
                },
                overflow: match i.drop.parse()? {
                    cm_transport::maxq::Overflow::Block => {
                        bail!(
                            "--drop block: a proxy cannot block its application; use head or tail"
                        )
                    }
                    o => o,
                },
                controller: Some(
                    i.controller
                        .parse()
                        .with_context(|| format!("--controller {}", i.controller))?,
                ),
            };
            let mut p = Ingress::bind(&cm, &cfg)?;
            eprintln!(
                "cm proxy ingress: application port {}, channel to {} ({}, MAXQ {}, drop {})",
                p.local_addr()?,
                cfg.egress,
                i.controller,
                cfg.maxq,
                cfg.overflow
            );
            relay(&mut p, &cm, &i.common, Ingress::report, |p| {
                json_line(&p.report())
            })
        }
        End::Egress(e) => {
            let cfg = EgressConfig {
                listen: e.listen,
                deliver: e.deliver,
            };
            let mut p = Egress::bind(&cm, &cfg)?;
            eprintln!(
                "cm proxy egress: channel port {}, delivering to {}",
                p.local_addr()?,
                cfg.deliver
            );
            relay(&mut p, &cm, &e.common, Egress::report, |p| {
                json_line(&p.report())
            })
        }
    }
}
