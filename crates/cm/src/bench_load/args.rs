//! The options of `cm bench load`, their defaults and their checks, and
//! the plan they make: one run, or one run per client count of a sweep.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::{Args, ValueEnum};

/// Destination hosts available in 198.18.0.0/15 (RFC 2544 benchmarking).
pub const MAX_HOSTS: u32 = 1 << 17;

/// Most clients in one run (the daemon's `max_clients` is set to this many
/// and a little more).
pub const MAX_CLIENTS: u32 = 4096;

/// Most flows in one run, over all clients.
pub const MAX_TOTAL_FLOWS: u64 = 1_000_000;

/// Longest run, in seconds.
pub const MAX_DURATION_SECS: f64 = 3600.0;

/// How the clients' frames travel to the daemon.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum TransportArg {
    /// Shared-memory rings with an eventfd doorbell (libcm's default).
    Shm,
    /// The Unix control socket only.
    Socket,
}

/// `cm bench load`: drive a `cmd` this command starts with N client
/// threads, each with its own connection and M flows spread over K
/// destination hosts (distinct IPs in 198.18.0.0/15, one macroflow each),
/// for a fixed time. Each cycle on a flow is request -> Send event ->
/// notify -> update (all acked, RTT 1 ms) -> query: four operations.
/// Nothing leaves the host: Unix sockets and shared memory only.
#[derive(Debug, Args)]
#[command(after_help = "\
Each cycle on a flow: request, wait for its Send event, notify the bytes
granted, update (all of them acked, RTT 1 ms), query: four operations.
Latencies are in microseconds (log-linear histogram, within 3%).

Examples:
  cm bench load --clients 100 --flows 100 --duration 10
  cm bench load --bulk --clients 10 --flows 1000
  cm bench load --sweep --out bench-load      (N = 1, 10, 100, 1000)
  cm bench load --quick                       (a few seconds; for tests)

Clients are threads of this process, not processes: 1000 processes with a
connection each would exhaust a small machine. The daemon is killed on
every exit of this command.")]
pub struct LoadArgs {
    /// Number of client threads, each with its own daemon connection
    /// [default: 10; 4 with --quick]. Not with --sweep.
    #[arg(long, value_name = "N", conflicts_with = "sweep")]
    pub clients: Option<u32>,
    /// Flows each client opens [default: 100; 8 with --quick].
    #[arg(long, value_name = "M")]
    pub flows: Option<u32>,
    /// Distinct destination hosts over all clients: distinct IPs in
    /// 198.18.0.0/15, one macroflow each; client i's flows go to
    /// consecutive hosts starting at i * M, wrapping
    /// [default: clients * flows / 10, at least 1; at most 131072]. Not
    /// with --sweep.
    #[arg(long, value_name = "K", conflicts_with = "sweep")]
    pub hosts: Option<u32>,
    /// Aggregate operations per second over all clients (request, notify,
    /// update and query count one each); 0 runs as fast as possible.
    #[arg(
        long,
        value_name = "OPS_PER_SEC",
        default_value_t = 0.0,
        allow_negative_numbers = true
    )]
    pub rate: f64,
    /// Seconds of measured load per run, after setup [default: 10; 1 with
    /// --quick].
    #[arg(long, value_name = "SECS", allow_negative_numbers = true)]
    pub duration: Option<f64>,
    /// Bulk calls: each client requests all its flows with one
    /// bulk_request, notifies and updates the granted ones with
    /// bulk_notify / bulk_update, and asks with one bulk_query; query
    /// latency is then that of one bulk_query of M flows.
    #[arg(long)]
    pub bulk: bool,
    /// Run once per client count of --sweep-clients with --flows flows per
    /// client (default 100) over clients * flows / 10 hosts (100,000 flows
    /// over 10,000 macroflows at N = 1000); print one row per N and write
    /// load.svg (latency p50/p99 and RSS against N) to --out.
    #[arg(long)]
    pub sweep: bool,
    /// Client counts of the sweep, comma-separated [default: 1,10,100,1000;
    /// 1,4 with --quick].
    #[arg(
        long,
        value_name = "N,N,...",
        value_delimiter = ',',
        requires = "sweep"
    )]
    pub sweep_clients: Option<Vec<u32>>,
    /// Directory for the sweep's plot (created if missing).
    #[arg(long, value_name = "DIR", default_value = "bench-load")]
    pub out: PathBuf,
    /// A small, short run for tests: 4 clients, 8 flows each, 1 s (explicit
    /// options still win).
    #[arg(long)]
    pub quick: bool,
    /// How frames travel: shm (shared-memory rings) or socket.
    #[arg(long, value_enum, default_value_t = TransportArg::Shm)]
    pub transport: TransportArg,
    /// The daemon binary [default: `cmd` in the directory of this `cm`].
    #[arg(long, value_name = "PATH")]
    pub cmd: Option<PathBuf>,
}

/// One run's shape.
#[derive(Clone, Debug)]
pub struct RunConfig {
    /// Client threads.
    pub clients: u32,
    /// Flows per client.
    pub flows: u32,
    /// Distinct destination hosts.
    pub hosts: u32,
    /// Aggregate operations per second (0: unlimited).
    pub rate: f64,
    /// Measured time.
    pub duration: Duration,
    /// Bulk calls.
    pub bulk: bool,
    /// How frames travel.
    pub transport: TransportArg,
    /// The daemon binary.
    pub cmd: PathBuf,
}

impl RunConfig {
    /// Flows over all clients.
    pub fn total_flows(&self) -> u64 {
        u64::from(self.clients) * u64::from(self.flows)
    }
}

/// What `cm bench load` will do.
#[derive(Debug)]
pub struct Plan {
    /// The runs, in order.
    pub runs: Vec<RunConfig>,
    /// A sweep (one row per run, and a plot).
    pub sweep: bool,
    /// Where the plot goes.
    pub out: PathBuf,
}

impl LoadArgs {
    /// Check the options and make the plan.
    pub fn plan(&self) -> anyhow::Result<Plan> {
        let quick = self.quick;
        let flows = self.flows.unwrap_or(if quick { 8 } else { 100 });
        let secs = self.duration.unwrap_or(if quick { 1.0 } else { 10.0 });
        if !(secs > 0.0 && secs <= MAX_DURATION_SECS) {
            bail!("--duration must be in (0, {MAX_DURATION_SECS}] seconds, not {secs}");
        }
        if !(self.rate >= 0.0 && self.rate.is_finite()) {
            bail!("--rate must be a finite number >= 0 (0: as fast as possible)");
        }
        if flows == 0 {
            bail!("--flows must be at least 1");
        }
        let counts = if self.sweep {
            self.sweep_clients.clone().unwrap_or_else(|| {
                if quick {
                    vec![1, 4]
                } else {
                    vec![1, 10, 100, 1000]
                }
            })
        } else {
            vec![self.clients.unwrap_or(if quick { 4 } else { 10 })]
        };
        if counts.is_empty() {
            bail!("--sweep-clients needs at least one client count");
        }
        let mut runs = Vec::new();
        for n in counts {
            if n == 0 || n > MAX_CLIENTS {
                bail!("the number of clients must be in 1..={MAX_CLIENTS}, not {n}");
            }
            let total = u64::from(n) * u64::from(flows);
            if total > MAX_TOTAL_FLOWS {
                bail!(
                    "{n} clients x {flows} flows = {total} flows: at most {MAX_TOTAL_FLOWS} in one run"
                );
            }
            let hosts = match self.hosts {
                Some(k) => k,
                // At most MAX_TOTAL_FLOWS / 10, which fits.
                None => u32::try_from((total / 10).max(1)).unwrap_or(MAX_HOSTS),
            };
            if hosts == 0 || hosts > MAX_HOSTS {
                bail!("--hosts must be in 1..={MAX_HOSTS} (198.18.0.0/15), not {hosts}");
            }
            runs.push(RunConfig {
                clients: n,
                flows,
                hosts,
                rate: self.rate,
                duration: Duration::from_secs_f64(secs),
                bulk: self.bulk,
                transport: self.transport,
                // Set below, once the options are known to be sound.
                cmd: PathBuf::new(),
            });
        }
        let cmd = match &self.cmd {
            Some(p) => p.clone(),
            None => std::env::current_exe()
                .context("finding this program's directory")?
                .with_file_name("cmd"),
        };
        if !cmd.is_file() {
            bail!(
                "no daemon binary at {}: build it in the same profile \
                 (`cargo build -p cm-daemon`, or --release) or pass --cmd PATH",
                cmd.display()
            );
        }
        for r in &mut runs {
            r.cmd.clone_from(&cmd);
        }
        Ok(Plan {
            runs,
            sweep: self.sweep,
            out: self.out.clone(),
        })
    }
}
