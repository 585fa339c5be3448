//! Test support: find the built libcm.so, compile C programs against it
//! with `cc`, run them with a time limit, and run a CM daemon for them.

#![allow(dead_code)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

static N: AtomicU32 = AtomicU32::new(0);

/// The crate's directory.
pub fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The profile directory (target/debug or target/release).
pub fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test exe");
    exe.parent()
        .and_then(Path::parent)
        .expect("target/<profile>/deps")
        .to_path_buf()
}

/// The directory holding libcm.so / libcm.a: `cargo test` builds them into
/// target/<profile>/deps beside the test binaries (`cargo build` also
/// copies them up to target/<profile>).
pub fn lib_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test exe");
    let deps = exe.parent().expect("target/<profile>/deps").to_path_buf();
    for dir in [deps, profile_dir()] {
        if dir.join("libcm.so").exists() && dir.join("libcm.a").exists() {
            return dir;
        }
    }
    panic!("no libcm.so near {}: build cm-ffi first", exe.display())
}

/// A fresh temporary directory, removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        let d = std::env::temp_dir().join(format!(
            "cm-ffi-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        ));
        std::fs::create_dir_all(&d).expect("temp dir");
        TempDir(d)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Compile C sources with `cc` against cm.h and libcm (shared unless
/// `static_link`), failing the test on any warning.
pub fn cc(sources: &[PathBuf], out: &Path, static_link: bool) {
    let lib = lib_dir();
    let mut cmd = Command::new("cc");
    cmd.args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-O1"])
        .arg("-I")
        .arg(crate_dir().join("include"))
        .arg("-I")
        .arg(crate_dir().join("examples/c"))
        .args(sources)
        .arg("-o")
        .arg(out);
    if static_link {
        cmd.arg(lib.join("libcm.a"))
            .args(["-lpthread", "-ldl", "-lm", "-lgcc_s"]);
    } else {
        cmd.arg("-L")
            .arg(&lib)
            .arg("-lcm")
            .arg(format!("-Wl,-rpath,{}", lib.display()))
            .arg("-lm")
            .arg("-pthread");
    }
    let o = cmd.output().expect("run cc (install build-essential)");
    assert!(
        o.status.success(),
        "cc failed:\n{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

/// Build tests/c/`name`.c into `dir` (against the shared libcm).
pub fn build_c_test(name: &str, dir: &Path) -> PathBuf {
    build_c("tests/c", name, dir)
}

/// Build one of the C examples into `dir`.
pub fn build_example(name: &str, dir: &Path) -> PathBuf {
    build_c("examples/c", name, dir)
}

/// Build the crate's `sub`/`name`.c into `dir` (against the shared libcm).
fn build_c(sub: &str, name: &str, dir: &Path) -> PathBuf {
    let out = dir.join(name);
    cc(&[crate_dir().join(format!("{sub}/{name}.c"))], &out, false);
    out
}

/// A finished C program: its exit status and output.
pub struct Run {
    pub ok: bool,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    /// The `key=value` fields of the line starting `RESULT <what>`.
    pub fn result(&self, what: &str) -> HashMap<String, String> {
        let prefix = format!("RESULT {what} ");
        let line = self
            .stdout
            .lines()
            .find(|l| l.starts_with(&prefix))
            .unwrap_or_else(|| panic!("no {prefix:?} line in:\n{}\n{}", self.stdout, self.stderr));
        line[prefix.len()..]
            .split_whitespace()
            .filter_map(|kv| kv.split_once('='))
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect()
    }

    /// A numeric field of the RESULT line.
    pub fn num(&self, what: &str, key: &str) -> f64 {
        let r = self.result(what);
        r.get(key)
            .unwrap_or_else(|| panic!("no {key} in {r:?}"))
            .parse()
            .unwrap_or_else(|_| panic!("{key} not a number in {r:?}"))
    }
}

/// A C test program's run (`PROG MODE` of tests/c): it exited 0, printed
/// "PROG MODE: N checks, 0 failures" with N at least `min_checks`, and no
/// Rust panic was caught on the way (one prints to stderr).
pub fn check_summary(r: &Run, prog: &str, mode: &str, min_checks: u32) {
    assert!(r.ok, "{prog} {mode} failed:\n{}\n{}", r.stdout, r.stderr);
    let line = r
        .stdout
        .lines()
        .find(|l| l.starts_with(&format!("{prog} {mode}:")))
        .unwrap_or_else(|| panic!("no summary:\n{}\n{}", r.stdout, r.stderr));
    assert!(line.ends_with(" 0 failures"), "{line}\n{}", r.stderr);
    let checks: u32 = line
        .split_whitespace()
        .nth(2)
        .and_then(|n| n.parse().ok())
        .expect("check count");
    assert!(checks >= min_checks, "only {checks} checks ran: {line}");
    assert!(!r.stderr.contains("panicked"), "{}", r.stderr);
}

/// Run a program with `env`, killing it after `limit`.
pub fn run(prog: &Path, args: &[&str], env: &[(&str, &str)], limit: Duration) -> Run {
    let mut c = Command::new(prog);
    c.args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .env_remove("CM_EXAMPLE_MODE")
        // cargo test points LD_LIBRARY_PATH at target/<profile>, which
        // outranks the programs' RUNPATH and may hold an older libcm.so
        // from a `cargo build`: load the library the program was linked with.
        .env_remove("LD_LIBRARY_PATH");
    for (k, v) in env {
        c.env(k, v);
    }
    let child = c.spawn().expect("spawn C program");
    let o = wait_limit(child, limit);
    Run {
        ok: o.status.success(),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

fn wait_limit(mut child: Child, limit: Duration) -> Output {
    let end = Instant::now() + limit;
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if Instant::now() < end => std::thread::sleep(Duration::from_millis(10)),
            _ => {
                let _ = child.kill();
                break;
            }
        }
    }
    child.wait_with_output().expect("collect output")
}

/// The CM daemon (`cmd`'s own loop) on a thread, on a socket in a fresh
/// temporary directory; stopped and removed on drop, whatever happened.
pub struct Daemon {
    pub path: PathBuf,
    _d: cm_daemon::TempDaemon,
}

impl Daemon {
    pub fn start() -> Daemon {
        let d = cm_daemon::TempDaemon::start().expect("daemon starts");
        Daemon {
            path: d.socket().to_path_buf(),
            _d: d,
        }
    }

    pub fn socket(&self) -> &str {
        self.path.to_str().expect("utf-8 temp path")
    }
}

/// The `cmd` binary as a separate process (`cmd --socket PATH`), killed on
/// drop. Panics when the binary is not built in this profile directory:
/// `cargo test --workspace` builds it (the `cm-daemon` package's own tests need
/// it); alone, run `cargo build -p cm-daemon` first.
pub struct DaemonProcess {
    pub path: PathBuf,
    child: Child,
    _dir: TempDir,
}

impl DaemonProcess {
    pub fn start() -> DaemonProcess {
        let dir = TempDir::new("cmd");
        let path = dir.0.join("cm.sock");
        let child = spawn_cmd(&path);
        let d = DaemonProcess {
            path,
            child,
            _dir: dir,
        };
        let end = Instant::now() + Duration::from_secs(10);
        while !d.path.exists() {
            assert!(Instant::now() < end, "cmd did not create its socket");
            std::thread::sleep(Duration::from_millis(10));
        }
        d
    }

    pub fn socket(&self) -> &str {
        self.path.to_str().expect("utf-8 temp path")
    }

    /// The daemon's process id (for tests that stop it).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGKILL the daemon (a crash: no goodbye to its clients).
    pub fn kill_now(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// A new daemon on the same socket path (after `kill_now`); waits
    /// until it accepts connections.
    pub fn restart(&mut self) {
        self.kill_now();
        self.child = spawn_cmd(&self.path);
        let end = Instant::now() + Duration::from_secs(10);
        while libcm::Cm::connect(&self.path).is_err() {
            assert!(Instant::now() < end, "cmd did not listen again");
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

/// Start `cmd --socket path`.
fn spawn_cmd(path: &Path) -> Child {
    let bin = profile_dir().join("cmd");
    assert!(
        bin.exists(),
        "no cmd binary at {} (cargo build -p cm-daemon, or test the workspace)",
        bin.display()
    );
    Command::new(&bin)
        .arg("--socket")
        .arg(path)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn cmd")
}

impl Drop for DaemonProcess {
    fn drop(&mut self) {
        // SIGKILL ends it whatever its state (a test may have stopped it).
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
