//! The daemon under load: a `cmd` process on a socket in a fresh temporary
//! directory, with a configuration file whose limits admit the run's
//! clients and flows; killed, reaped and its directory removed on drop, so
//! on every way out of `cm bench load` (an error, a panic unwinding).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use super::args::RunConfig;

/// How long the daemon may take to create its socket.
const START_LIMIT: Duration = Duration::from_secs(10);

static SEQ: AtomicU32 = AtomicU32::new(0);

/// A running `cmd`.
pub struct DaemonProcess {
    child: Child,
    dir: PathBuf,
    socket: PathBuf,
}

impl DaemonProcess {
    /// Start `cfg.cmd` with limits for `cfg`'s clients and flows and wait
    /// until its socket exists.
    pub fn start(cfg: &RunConfig) -> anyhow::Result<DaemonProcess> {
        let dir = std::env::temp_dir().join(format!(
            "cm-bench-load-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::SeqCst)
        ));
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let socket = dir.join("cm.sock");
        let config = dir.join("cmd.toml");
        let log = dir.join("cmd.log");
        let started = Self::spawn(cfg, &dir, &socket, &config, &log);
        let child = match started {
            Ok(c) => c,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&dir);
                return Err(e);
            }
        };
        let d = DaemonProcess { child, dir, socket };
        // On an error `d` is dropped there: the daemon is killed.
        d.wait_for_socket(&log)
    }

    fn spawn(
        cfg: &RunConfig,
        dir: &Path,
        socket: &Path,
        config: &Path,
        log: &Path,
    ) -> anyhow::Result<Child> {
        // Headroom over the run's needs; the message limit is per client and
        // must not be what the benchmark measures.
        let text = format!(
            "max_clients = {c}\nmax_clients_per_user = {c}\nmax_flows_per_client = {f}\n\
             max_messages_per_sec = 1000000000\n",
            c = cfg.clients + 16,
            f = cfg.flows + 16,
        );
        std::fs::write(config, text).with_context(|| format!("writing {}", config.display()))?;
        let log_file =
            std::fs::File::create(log).with_context(|| format!("creating {}", log.display()))?;
        Command::new(&cfg.cmd)
            .arg("--socket")
            .arg(socket)
            .arg("--config")
            .arg(config)
            .arg("--quiet")
            .current_dir(dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log_file)
            .spawn()
            .with_context(|| format!("starting {}", cfg.cmd.display()))
    }

    fn wait_for_socket(mut self, log: &Path) -> anyhow::Result<Self> {
        let end = Instant::now() + START_LIMIT;
        while !self.socket.exists() {
            if let Ok(Some(status)) = self.child.try_wait() {
                let said = std::fs::read_to_string(log).unwrap_or_default();
                bail!(
                    "the daemon exited ({status}) before listening: {}",
                    said.trim()
                );
            }
            if Instant::now() > end {
                bail!(
                    "the daemon did not create {} within {} s",
                    self.socket.display(),
                    START_LIMIT.as_secs()
                );
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        Ok(self)
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Its control socket.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// Still running?
    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

impl Drop for DaemonProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
