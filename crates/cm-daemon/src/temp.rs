//! A daemon on a thread, on a socket in a fresh temporary directory: for
//! tests, benchmarks and examples that need a real daemon without a
//! system-wide one.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::thread::JoinHandle;

use crate::{Daemon, DaemonConfig, DaemonError, StopHandle};

static N: AtomicU32 = AtomicU32::new(0);

/// A running daemon, stopped (and its directory removed) when dropped.
///
/// ```
/// let d = cm_daemon::TempDaemon::start().unwrap();
/// assert!(d.socket().exists());
/// ```
pub struct TempDaemon {
    socket: PathBuf,
    dir: PathBuf,
    stop: StopHandle,
    thread: Option<JoinHandle<()>>,
}

impl TempDaemon {
    /// The name of the thread the daemon runs on.
    pub const THREAD_NAME: &'static str = "cmd-daemon";

    /// With the default configuration (and quiet logs).
    pub fn start() -> Result<TempDaemon, DaemonError> {
        TempDaemon::with_config(DaemonConfig::default())
    }

    /// With `cfg` (its socket path is ignored).
    pub fn with_config(cfg: DaemonConfig) -> Result<TempDaemon, DaemonError> {
        crate::log::set_quiet(true);
        let dir = std::env::temp_dir().join(format!(
            "cmd-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        ));
        std::fs::create_dir_all(&dir)?;
        let socket = dir.join("cm.sock");
        let mut d = match Daemon::bind(cfg, &socket) {
            Ok(d) => d,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&dir);
                return Err(e);
            }
        };
        let stop = d.stop_handle();
        let run = move || {
            if let Err(e) = d.run() {
                crate::log!(error, "msg=\"daemon loop failed\" error=\"{e}\"");
            }
        };
        // Named, so tests can find its CPU time in /proc/self/task.
        let thread = match std::thread::Builder::new()
            .name(Self::THREAD_NAME.into())
            .spawn(run)
        {
            Ok(t) => t,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&dir);
                return Err(e.into());
            }
        };
        Ok(TempDaemon {
            socket,
            dir,
            stop,
            thread: Some(thread),
        })
    }

    /// The control socket.
    pub fn socket(&self) -> &Path {
        &self.socket
    }
}

impl Drop for TempDaemon {
    fn drop(&mut self) {
        self.stop.stop();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
