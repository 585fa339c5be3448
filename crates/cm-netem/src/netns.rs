//! Network namespaces: running `ip`/`tc`, entering a namespace, sweeping leftovers.

use std::fs::File;
use std::path::Path as FsPath;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::thread::JoinHandle;

use crate::error::{IoContext, NetemError, Result};

/// Prefix of every namespace this crate creates: `cmn<pid>x<k>-<node>`.
pub const NS_PREFIX: &str = "cmn";

/// Where `ip netns` keeps its namespace handles.
pub const NETNS_DIR: &str = "/run/netns";

/// Whether the process runs as root (effective uid 0): building a path,
/// entering a namespace and the root-only tests need it.
pub fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// Run a program to completion; the error carries the command line and its stderr.
pub(crate) fn run(program: &str, args: &[&str]) -> Result<String> {
    let out = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|error| NetemError::Spawn {
            program: program.to_string(),
            error,
        })?;
    if !out.status.success() {
        return Err(NetemError::Command {
            cmd: format!("{program} {}", args.join(" ")),
            status: out.status,
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Run `<program> -n <ns> -batch -` (`program` is `ip` or `tc`) with `lines`
/// (one command each, without the program's name) on its stdin; the error
/// carries the first line and the program's stderr.
pub(crate) fn batch(program: &str, ns: &str, lines: &[String]) -> Result<()> {
    use std::io::Write;
    if lines.is_empty() {
        return Ok(());
    }
    let spawn_err = |error| NetemError::Spawn {
        program: program.to_string(),
        error,
    };
    let mut child = Command::new(program)
        .args(["-n", ns, "-batch", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(spawn_err)?;
    let mut input = lines.join("\n");
    input.push('\n');
    if let Some(mut stdin) = child.stdin.take() {
        // A write error shows up as ip's failure below.
        let _ = stdin.write_all(input.as_bytes());
    }
    let out = child.wait_with_output().map_err(spawn_err)?;
    if !out.status.success() {
        return Err(NetemError::Command {
            cmd: format!(
                "{program} -n {ns} -batch - ({} commands, first: {})",
                lines.len(),
                lines[0]
            ),
            status: out.status,
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(())
}

/// Run `f` on a new thread inside namespace `ns` (`label` names the thread and
/// errors). Returns once the thread has entered the namespace; `f` never runs
/// in another namespace.
pub(crate) fn spawn_in_ns<F, T>(ns: &str, label: &str, f: F) -> Result<JoinHandle<T>>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let file = open_ns(ns)?;
    let (tx, rx) = mpsc::channel::<std::io::Result<()>>();
    let handle = std::thread::Builder::new()
        .name(format!("cmn-{label}"))
        .spawn(move || {
            let entered = enter_fd(&file);
            drop(file);
            let ok = entered.is_ok();
            let _ = tx.send(entered);
            if !ok {
                std::panic::resume_unwind(Box::new("setns failed"));
            }
            f()
        })
        .io_context(|| "spawn a thread")?;
    match rx.recv() {
        Ok(Ok(())) => Ok(handle),
        Ok(Err(e)) => {
            let _ = handle.join();
            Err(NetemError::io(
                format!("entering namespace {ns} ({label})"),
                e,
            ))
        }
        Err(_) => Err(NetemError::Thread(label.to_string())),
    }
}

/// Move the calling thread into the network namespace `name` (from `/run/netns`).
pub(crate) fn enter(name: &str) -> Result<()> {
    let f = open_ns(name)?;
    enter_fd(&f).io_context(|| format!("setns into network namespace {name}"))
}

/// Open the handle of namespace `name`.
pub(crate) fn open_ns(name: &str) -> Result<File> {
    File::open(FsPath::new(NETNS_DIR).join(name))
        .io_context(|| format!("open network namespace {name}"))
}

/// Move the calling thread into the network namespace behind `f`.
pub(crate) fn enter_fd(f: &File) -> std::io::Result<()> {
    use std::os::fd::AsFd;
    rustix::thread::move_into_link_name_space(
        f.as_fd(),
        Some(rustix::thread::LinkNameSpaceType::Network),
    )
    .map_err(std::io::Error::from)
}

/// Write a sysctl (`net.ipv4.ip_forward` style key) for the calling thread's netns.
pub(crate) fn write_sysctl(key: &str, value: &str) -> Result<()> {
    let path = format!("/proc/sys/{}", key.replace('.', "/"));
    std::fs::write(&path, value).io_context(|| format!("sysctl {key}={value}"))
}

/// The namespaces currently listed in `/run/netns`.
pub fn list_namespaces() -> Vec<String> {
    let Ok(dir) = std::fs::read_dir(NETNS_DIR) else {
        return Vec::new();
    };
    let mut v: Vec<String> = dir
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().into_string().ok())
        .collect();
    v.sort();
    v
}

/// The pid encoded in one of this crate's namespace names, if it is one.
pub(crate) fn owner_pid(ns: &str) -> Option<u32> {
    let rest = ns.strip_prefix(NS_PREFIX)?;
    let (pid, rest) = rest.split_once('x')?;
    let (k, node) = rest.split_once('-')?;
    // A path's three nodes, or node `i` of a network (`t<i>`, crate::topo).
    let topo_node = node
        .strip_prefix('t')
        .is_some_and(|i| !i.is_empty() && i.bytes().all(|b| b.is_ascii_digit()));
    if !(matches!(node, "snd" | "rtr" | "rcv") || topo_node) || k.parse::<u32>().is_err() {
        return None;
    }
    pid.parse().ok()
}

fn pid_alive(pid: u32) -> bool {
    FsPath::new(&format!("/proc/{pid}")).exists()
}

/// Delete namespaces left behind by processes that no longer exist (e.g. a
/// SIGKILLed `cm-netem up`). Namespaces of live processes are not touched.
/// Returns the names it deleted.
pub fn sweep_stale() -> Result<Vec<String>> {
    let mut deleted = Vec::new();
    let mut errors = Vec::new();
    for ns in list_namespaces() {
        let Some(pid) = owner_pid(&ns) else { continue };
        if pid_alive(pid) {
            continue;
        }
        match run("ip", &["netns", "del", &ns]) {
            Ok(_) => deleted.push(ns),
            Err(e) => errors.push(e.to_string()),
        }
    }
    if !errors.is_empty() {
        return Err(NetemError::Cleanup {
            what: "sweeping stale namespaces",
            errors,
        });
    }
    Ok(deleted)
}

#[cfg(test)]
mod tests {
    use super::owner_pid;

    #[test]
    fn names() {
        assert_eq!(owner_pid("cmn1234x0-snd"), Some(1234));
        assert_eq!(owner_pid("cmn1234x12-rcv"), Some(1234));
        assert_eq!(owner_pid("cmn1234x3-t17"), Some(1234));
        assert_eq!(owner_pid("cmn1234x3-t"), None);
        assert_eq!(owner_pid("cmn1234x3-tx"), None);
        assert_eq!(owner_pid("cmn1234x0-foo"), None);
        assert_eq!(owner_pid("other"), None);
        assert_eq!(owner_pid("cmnx0-snd"), None);
    }
}
