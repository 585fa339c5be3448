//! One run: start the daemon, start the clients and wait for their setup,
//! let the load go for the configured time, measure the daemon with every
//! client still connected, release the clients and merge what they saw.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context, anyhow, bail};

use super::args::{RunConfig, TransportArg};
use super::client::{self, ClientPlan, ClientResult, Phase, Shared};
use super::daemon::DaemonProcess;
use super::hist::Hist;
use crate::procfs::{self, ProcSample};

/// Stack of a client thread (libcm needs little; 1000 default 2 MiB
/// stacks would only be address space, but there is no need).
const CLIENT_STACK: usize = 512 * 1024;

/// How often progress is printed on long phases.
const PROGRESS_EVERY: Duration = Duration::from_secs(1);

/// What one run measured.
#[derive(Debug)]
pub struct RunResult {
    /// The run's shape.
    pub cfg: RunConfig,
    /// Operations over all clients.
    pub ops: u64,
    /// From the start of the load to the last client's last cycle.
    pub elapsed: Duration,
    /// Query round trips, all clients.
    pub query: Hist,
    /// Request -> Send event, all clients.
    pub grant: Hist,
    /// Grants not seen within their limit.
    pub grant_timeouts: u64,
    /// Error events from the daemon.
    pub daemon_errors: u64,
    /// The daemon before any client connected.
    pub idle: ProcSample,
    /// The daemon at the end of the load, every client connected.
    pub loaded: ProcSample,
    /// The daemon's CPU time during the load.
    pub daemon_cpu: Duration,
    /// This process's (the clients') CPU time during the load.
    pub client_cpu: Duration,
    /// Time to connect every client and open every flow.
    pub setup: Duration,
}

impl RunResult {
    /// Operations per second.
    pub fn ops_per_sec(&self) -> f64 {
        self.ops as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// The clients' threads; on drop (any way out), told to abort and joined.
struct Clients {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<ClientResult>>,
}

impl Clients {
    fn join(&mut self) -> Vec<ClientResult> {
        self.threads
            .drain(..)
            .map(|t| {
                t.join().unwrap_or_else(|_| ClientResult {
                    error: Some("a client thread panicked".into()),
                    ..ClientResult::default()
                })
            })
            .collect()
    }
}

impl Drop for Clients {
    fn drop(&mut self) {
        if !self.threads.is_empty() {
            self.shared.set(Phase::Abort);
            self.join();
        }
    }
}

/// Run `cfg` once.
pub fn run_once(cfg: &RunConfig) -> anyhow::Result<RunResult> {
    let mut daemon = DaemonProcess::start(cfg)?;
    let pid = daemon.pid();
    let idle = procfs::sample(pid)?;
    let shared = Arc::new(Shared::new());
    let t_setup = Instant::now();
    let mut clients = Clients {
        shared: Arc::clone(&shared),
        threads: Vec::new(),
    };
    let transport = match cfg.transport {
        TransportArg::Shm => libcm::Transport::SharedMemory,
        TransportArg::Socket => libcm::Transport::Socket,
    };
    for id in 0..cfg.clients {
        let plan = ClientPlan {
            id,
            clients: cfg.clients,
            flows: cfg.flows,
            hosts: cfg.hosts,
            rate: cfg.rate,
            bulk: cfg.bulk,
            socket: daemon.socket().to_path_buf(),
            transport,
        };
        let sh = Arc::clone(&shared);
        let t = std::thread::Builder::new()
            .name(format!("load-{id}"))
            .stack_size(CLIENT_STACK)
            .spawn(move || client::run(&plan, &sh))
            .with_context(|| format!("starting client thread {id}"))?;
        clients.threads.push(t);
    }
    // Setup: generous, bounded by the work (a round trip per flow).
    let limit = Duration::from_secs(60) + Duration::from_micros(500) * cfg.flows * cfg.clients;
    let waited = wait_for(
        &shared.ready,
        cfg.clients,
        limit,
        &mut daemon,
        "setup",
        |n| format!("{n}/{} clients connected with their flows", cfg.clients),
    );
    if let Err(e) = waited {
        // The daemon goes first, so that clients blocked on it return.
        drop(daemon);
        return Err(e);
    }
    let setup = t_setup.elapsed();
    if shared.failed.load(Ordering::SeqCst) {
        shared.set(Phase::Abort);
        return Err(first_error(clients.join()));
    }
    let cpu0 = procfs::cpu_time(pid)?;
    let self0 = procfs::cpu_time(std::process::id())?;
    let start = Instant::now();
    shared.set(Phase::Go {
        start,
        end: start + cfg.duration,
    });
    let limit = cfg.duration + Duration::from_secs(30);
    let waited = wait_for(
        &shared.done,
        cfg.clients,
        limit,
        &mut daemon,
        "load",
        |_| {
            format!(
                "{:.0}/{:.0} s, {} operations",
                start
                    .elapsed()
                    .as_secs_f64()
                    .min(cfg.duration.as_secs_f64()),
                cfg.duration.as_secs_f64(),
                shared.ops.load(Ordering::Relaxed)
            )
        },
    );
    if let Err(e) = waited {
        drop(daemon);
        return Err(e);
    }
    let loaded = procfs::sample(pid)?;
    let self1 = procfs::cpu_time(std::process::id())?;
    shared.set(Phase::Release);
    let results = clients.join();
    if results.iter().any(|r| r.error.is_some()) {
        return Err(first_error(results));
    }
    let mut r = RunResult {
        cfg: cfg.clone(),
        ops: 0,
        elapsed: Duration::ZERO,
        query: Hist::default(),
        grant: Hist::default(),
        grant_timeouts: 0,
        daemon_errors: 0,
        idle,
        loaded,
        daemon_cpu: loaded.cpu.saturating_sub(cpu0),
        client_cpu: self1.saturating_sub(self0),
        setup,
    };
    for c in &results {
        r.ops += c.ops;
        r.query.merge(&c.query);
        r.grant.merge(&c.grant);
        r.grant_timeouts += c.grant_timeouts;
        r.daemon_errors += c.daemon_errors;
        if let Some(f) = c.finished {
            r.elapsed = r.elapsed.max(f.saturating_duration_since(start));
        }
    }
    Ok(r)
}

/// Wait until `counter` reaches `n`, printing `progress` on stderr every
/// second once the wait is long; fail if `limit` passes or the daemon
/// exits (the caller then kills it first, so that clients blocked on it
/// return).
fn wait_for(
    counter: &std::sync::atomic::AtomicU32,
    n: u32,
    limit: Duration,
    daemon: &mut DaemonProcess,
    what: &str,
    progress: impl Fn(u32) -> String,
) -> anyhow::Result<()> {
    let t0 = Instant::now();
    let mut shown = t0;
    loop {
        let got = counter.load(Ordering::SeqCst);
        if got >= n {
            return Ok(());
        }
        if !daemon.alive() {
            bail!("the daemon exited during {what}");
        }
        if t0.elapsed() > limit {
            bail!(
                "{what} did not finish within {} s ({}): {} of {n} clients still wait for the daemon",
                limit.as_secs(),
                progress(got),
                n - got
            );
        }
        if shown.elapsed() >= PROGRESS_EVERY {
            shown = Instant::now();
            eprintln!("bench load: {what}: {}", progress(got));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn first_error(results: Vec<ClientResult>) -> anyhow::Error {
    let failed = results.iter().filter(|r| r.error.is_some()).count();
    let first = results
        .into_iter()
        .find_map(|r| r.error)
        .unwrap_or_else(|| "unknown".into());
    anyhow!("{failed} client(s) failed; the first: {first}")
}
