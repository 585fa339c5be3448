//! The set-up the kernel TCP experiments share: `cmd --kernel-tcp` in the
//! host's namespace, an emulated path, and Debian's `python3 -m
//! http.server` in the sender's namespace serving a sparse file, all torn
//! down in the right order on every exit path (the path first, so that no
//! namespace keeps `cm` as its default when it is unregistered).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::error::{RealError, Result};
use crate::harness::{HostOptions, Rig};
use crate::proc::Proc;
use cm_netem::{Node, PathConfig};

/// The HTTP server's port in the sender's namespace.
pub const HTTP_PORT: u16 = 8080;

/// The `cmd` binary: `$CM_CMD`, else beside this program (or one directory
/// up, for test binaries in `target/*/deps`).
fn cmd_binary() -> Result<PathBuf> {
    if let Some(p) = std::env::var_os("CM_CMD") {
        return Ok(PathBuf::from(p));
    }
    let exe = std::env::current_exe().map_err(|e| RealError::Program(e.to_string()))?;
    let dir = exe.parent().map(PathBuf::from).unwrap_or_default();
    [dir.join("cmd"), dir.join("../cmd")]
        .into_iter()
        .find(|p| p.exists())
        .ok_or_else(|| {
            RealError::Program(
                "cmd not found beside this program (cargo build --release -p cm-daemon, or set CM_CMD)"
                    .into(),
            )
        })
}

/// `cmd --kernel-tcp` on a private socket in `dir`, up and with `cm`
/// registered: the process (killed when dropped) and the socket.
pub fn start_daemon(dir: &Path) -> Result<(Proc, PathBuf)> {
    let sock = dir.join("cm.sock");
    let mut c = Command::new(cmd_binary()?);
    c.args(["--kernel-tcp", "--quiet", "--socket"])
        .arg(&sock)
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut p = Proc::spawn(c, "cmd --kernel-tcp")?;
    let until = Instant::now() + Duration::from_secs(10);
    while !(sock.exists() && cm_kernel::registered()) {
        if p.exited() || Instant::now() > until {
            return Err(RealError::Program(format!(
                "cmd --kernel-tcp did not start: {}",
                p.stderr_text().trim()
            )));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok((p, sock))
}

/// The daemon, the path and the web server of one kernel experiment.
pub struct KernelRig {
    // Dropped in this order: the server, the path, then the daemon.
    server: Option<Proc>,
    rig: Option<Rig>,
    daemon: Option<Proc>,
    sock: PathBuf,
    dir: PathBuf,
}

impl KernelRig {
    /// Start everything; the server hands out `/<name>` files of `sizes`.
    pub fn start(cfg: PathConfig, files: &[(&str, u64)]) -> Result<KernelRig> {
        if cm_kernel::registered() {
            return Err(RealError::Program(
                "a `cm` congestion control is registered already (another cmd --kernel-tcp); stop it first".into(),
            ));
        }
        let dir = std::env::temp_dir().join(format!("cm-kernel-rig-{}", std::process::id()));
        let io = |e: std::io::Error| RealError::Program(e.to_string());
        let www = dir.join("www");
        std::fs::create_dir_all(&www).map_err(io)?;
        for (name, size) in files {
            std::fs::File::create(www.join(name))
                .and_then(|f| f.set_len(*size))
                .map_err(io)?;
        }
        let mut k = KernelRig {
            server: None,
            rig: None,
            daemon: None,
            sock: dir.join("cm.sock"),
            dir,
        };
        k.daemon = Some(start_daemon(&k.dir)?.0);
        let rig = Rig::build(cfg, HostOptions::sack(true))?;
        let mut server = rig.path().command(Node::Sender, "python3");
        server
            .args(["-m", "http.server", &HTTP_PORT.to_string(), "--bind"])
            .arg(rig.path().sender_addr().to_string())
            .arg("--directory")
            .arg(&www)
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        k.rig = Some(rig);
        k.server = Some(Proc::spawn(server, "python3 -m http.server")?);
        k.wait_for_server()?;
        Ok(k)
    }

    fn wait_for_server(&self) -> Result<()> {
        let until = Instant::now() + Duration::from_secs(10);
        loop {
            let mut c = self.rig().path().command(Node::Receiver, "curl");
            c.args(["-s", "-o", "/dev/null", "--max-time", "2", &self.url("")])
                .stdout(Stdio::null())
                .stderr(Stdio::null());
            if c.status().is_ok_and(|s| s.success()) {
                return Ok(());
            }
            if Instant::now() > until {
                return Err(RealError::Program(
                    "python3 -m http.server did not answer".into(),
                ));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The path and its receivers.
    pub fn rig(&self) -> &Rig {
        self.rig.as_ref().expect("the rig lives until finish")
    }

    /// CPU time the daemon has used so far (`/proc/<pid>/schedstat`; it
    /// is one thread).
    pub fn daemon_cpu(&self) -> Option<Duration> {
        let pid = self.daemon.as_ref()?.id()?;
        let s = std::fs::read_to_string(format!("/proc/{pid}/schedstat")).ok()?;
        let ns: u64 = s.split_whitespace().next()?.parse().ok()?;
        Some(Duration::from_nanos(ns))
    }

    /// The daemon's control socket (for `cm stat`).
    pub fn socket(&self) -> &Path {
        &self.sock
    }

    /// The URL of a served file.
    pub fn url(&self, name: &str) -> String {
        format!(
            "http://{}:{HTTP_PORT}/{name}",
            self.rig().path().sender_addr()
        )
    }

    /// The sender's namespace's default congestion control (its web
    /// server's connections use it).
    pub fn set_server_cc(&self, cc: &str) -> Result<()> {
        Ok(self
            .rig()
            .path()
            .sysctl(Node::Sender, "net.ipv4.tcp_congestion_control", cc)?)
    }

    /// `curl` in the receiver's namespace fetching `name`, printing
    /// `<bytes> <seconds>`; at most `max_secs`.
    pub fn curl(&self, name: &str, max_secs: f64) -> Result<Proc> {
        let mut c = self.rig().path().command(Node::Receiver, "curl");
        c.args(["-s", "-o", "/dev/null", "--max-time"])
            .arg(format!("{max_secs:.0}"))
            .args(["-w", "%{size_download} %{time_total}\n", &self.url(name)])
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        Proc::spawn(c, "curl")
    }

    /// Stop the server, tear the path down, stop the daemon.
    pub fn finish(mut self) -> Result<()> {
        self.server.take();
        if let Some(r) = self.rig.take() {
            r.finish()?;
        }
        self.daemon.take();
        Ok(())
    }
}

impl Drop for KernelRig {
    fn drop(&mut self) {
        self.server.take();
        self.rig.take();
        self.daemon.take();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `<bytes> <seconds>` as curl's `-w` printed it.
pub fn parse_curl(out: &str) -> Result<(f64, f64)> {
    let mut it = out.split_whitespace().map(str::parse::<f64>);
    match (it.next(), it.next()) {
        (Some(Ok(b)), Some(Ok(t))) if t > 0.0 => Ok((b, t)),
        _ => Err(RealError::Program(format!("curl printed {out:?}"))),
    }
}
