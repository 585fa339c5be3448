//! `cm soak`: the daemon under everyone else (RFC 3124 §6: the CM must
//! survive misbehaving applications). A private `cmd` serves well-behaved
//! clients while, at the same time, other clients open and close flows as
//! fast as they can, die by SIGKILL in the middle of their calls, never
//! read their grants, write garbage to the socket, exceed the flow limit,
//! or run as a second user. A monitor checks the invariants every second:
//!
//! - the daemon is alive, its RSS and descriptor count stay bounded;
//! - no flow outlives its (killed) client by more than two seconds;
//! - every well-behaved client is served (a grant, an update and a query
//!   per turn) within its latency bound, and keeps making progress;
//! - the flow limit holds, with its own error, for the offender only.
//!
//! It prints a summary (operations, faults injected, checks passed) and
//! exits non-zero on any violation.

mod monitor;
mod workers;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use workers::Tally;

/// Options of `cm soak`.
#[derive(Debug, clap::Args)]
pub struct SoakArgs {
    /// How long to run, in minutes (fractions allowed).
    #[arg(long, default_value_t = 2.0)]
    minutes: f64,
    /// Well-behaved clients (threads, each with its own connection).
    #[arg(long, default_value_t = 4)]
    clients: usize,
    /// Longest a well-behaved client's turn (request, grant, notify,
    /// update, query) may take, in milliseconds. The mix keeps both cores
    /// of a small machine busy, so the default bounds starvation, not
    /// scheduling noise.
    #[arg(long, default_value_t = 500)]
    latency_ms: u64,
    /// Most flows per client the daemon allows (the limit exceeded).
    #[arg(long, default_value_t = 64)]
    flow_limit: usize,
    /// The daemon binary (default: `cmd` next to this program).
    #[arg(long)]
    daemon: Option<PathBuf>,
    /// Internal: run as a child client of the given role.
    #[arg(long, hide = true)]
    child: Option<String>,
    /// Internal: the daemon's socket, for a child.
    #[arg(long, hide = true)]
    socket: Option<PathBuf>,
}

/// `cm soak`.
pub fn run(a: &SoakArgs) -> Result<std::process::ExitCode> {
    if let Some(role) = &a.child {
        let socket = a.socket.as_deref().context("--child needs --socket")?;
        workers::child_main(role, socket)?;
        return Ok(std::process::ExitCode::SUCCESS);
    }
    if !(a.minutes > 0.0 && a.minutes.is_finite() && a.minutes <= 24.0 * 60.0) {
        bail!("--minutes must be in (0, 1440], not {}", a.minutes);
    }
    if a.clients == 0 || a.flow_limit == 0 {
        bail!("--clients and --flow-limit must be at least 1");
    }
    let daemon_bin = match &a.daemon {
        Some(p) => p.clone(),
        None => std::env::current_exe()?.with_file_name("cmd"),
    };
    if !daemon_bin.exists() {
        bail!(
            "no daemon binary at {} (build it: cargo build -p cm-daemon; or pass --daemon)",
            daemon_bin.display()
        );
    }
    let dir = TempDir::new()?;
    let socket = dir.0.join("cm.sock");
    let mut daemon = Daemon::start(&daemon_bin, &socket, a.flow_limit)?;
    let result = soak(a, &socket, &mut daemon);
    daemon.stop();
    let report = result?;
    report.print();
    Ok(if report.violations.is_empty() {
        std::process::ExitCode::SUCCESS
    } else {
        std::process::ExitCode::FAILURE
    })
}

fn soak(a: &SoakArgs, socket: &Path, daemon: &mut Daemon) -> Result<monitor::Report> {
    let stop = Arc::new(AtomicBool::new(false));
    let tally = Arc::new(Tally::default());
    let duration = Duration::from_secs_f64(a.minutes * 60.0);
    let latency = Duration::from_millis(a.latency_ms);
    let mut threads = workers::start_all(socket, a.clients, a.flow_limit, latency, &stop, &tally)?;
    let started = Instant::now();
    let report = monitor::watch(
        socket,
        daemon,
        &tally,
        monitor::Bounds {
            duration,
            latency,
            clients: a.clients,
        },
    );
    stop.store(true, Ordering::Relaxed);
    for t in threads.drain(..) {
        if t.join().is_err() {
            tally.note_violation("a worker thread panicked".to_owned());
        }
    }
    let mut report = report?;
    report.seconds = started.elapsed().as_secs_f64();
    report.absorb(&tally);
    Ok(report)
}

/// The daemon under test: a `cmd` process on a private socket.
pub(crate) struct Daemon {
    child: Child,
}

impl Daemon {
    fn start(bin: &Path, socket: &Path, flow_limit: usize) -> Result<Daemon> {
        let child = Command::new(bin)
            .arg("--socket")
            .arg(socket)
            .arg("--max-flows-per-client")
            .arg(flow_limit.to_string())
            .arg("--quiet")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .with_context(|| format!("start {}", bin.display()))?;
        let mut d = Daemon { child };
        let end = Instant::now() + Duration::from_secs(10);
        while libcm::Cm::connect(socket).is_err() {
            if Instant::now() > end || d.child.try_wait()?.is_some() {
                d.stop();
                bail!("the daemon did not start listening at {}", socket.display());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(d)
    }

    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether the daemon is still running.
    pub(crate) fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A private directory for the socket (readable by a second user),
/// removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> Result<TempDir> {
        use std::os::unix::fs::PermissionsExt;
        let p = std::env::temp_dir().join(format!(
            "cm-soak-{}-{}",
            std::process::id(),
            cm_clock::secs_since_epoch(std::time::Instant::now()).to_bits()
        ));
        std::fs::create_dir_all(&p).with_context(|| format!("create {}", p.display()))?;
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755))?;
        Ok(TempDir(p))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
