//! Teardown on SIGINT and SIGTERM for programs that build paths and
//! networks deep inside long runs (`cm experiment`, `cm demo`), where the
//! signal cannot be polled between steps as the `cm-netem` CLI does.
//!
//! [`teardown_on_signals`] starts a thread that waits for either signal.
//! On one it stops this process's child processes (programs run in the
//! namespaces, such as `iperf3`: a namespace stays alive while a process
//! runs in it), deletes every namespace this process created (their
//! devices, qdiscs and filters go with them), and exits with 128 + the
//! signal's number, as a shell reports a process killed by it. Namespaces
//! of a SIGKILLed process cannot be handled here; [`crate::sweep_stale`]
//! removes them later.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal, kill_process};
use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

use crate::error::{NetemError, Result};
use crate::netns::{list_namespaces, owner_pid};
use crate::teardown::tear_down;

/// How long children get to exit after SIGTERM before SIGKILL.
const CHILD_GRACE: Duration = Duration::from_secs(1);

/// Install the handler: from now on SIGINT and SIGTERM tear down what this
/// process built and exit. `program` names it in the message printed.
pub fn teardown_on_signals(program: &'static str) -> Result<()> {
    let mut signals = Signals::new([SIGINT, SIGTERM]).map_err(|error| NetemError::Io {
        context: "installing the SIGINT/SIGTERM handler".into(),
        error,
    })?;
    std::thread::Builder::new()
        .name("cm-netem-signals".into())
        .spawn(move || {
            if let Some(sig) = signals.forever().next() {
                let name = if sig == SIGINT { "SIGINT" } else { "SIGTERM" };
                eprintln!(
                    "\n{program}: {name}: stopping child processes and deleting this process's namespaces"
                );
                if let Err(e) = clean_up() {
                    eprintln!("{program}: {e}");
                }
                std::process::exit(128 + sig);
            }
        })
        .map_err(|error| NetemError::Io {
            context: "starting the signal thread".into(),
            error,
        })?;
    Ok(())
}

/// Stop the descendants of this process, then delete its namespaces.
fn clean_up() -> Result<()> {
    let me = std::process::id();
    let kids = descendants(me);
    signal_all(&kids, Signal::TERM);
    let deadline = Instant::now() + CHILD_GRACE;
    while kids.iter().any(|&p| alive(p)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    signal_all(&kids, Signal::KILL);
    let ours: Vec<String> = list_namespaces()
        .into_iter()
        .filter(|ns| owner_pid(ns) == Some(me))
        .collect();
    tear_down(
        std::iter::empty(),
        ours,
        "deleting this process's namespaces",
    )
}

fn signal_all(pids: &[u32], sig: Signal) {
    for &p in pids {
        if let Some(pid) = i32::try_from(p).ok().and_then(Pid::from_raw) {
            // A process that already exited gives ESRCH: nothing to do.
            let _ = kill_process(pid, sig);
        }
    }
}

fn alive(pid: u32) -> bool {
    // A zombie has exited but not been reaped: gone for this purpose.
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| parse_stat(&s))
        .is_some_and(|(state, _)| state != 'Z')
}

/// `(state, ppid)` from a `/proc/<pid>/stat` line. The command name, in
/// parentheses, may itself hold spaces and parentheses: the fields after
/// it start at the last `)`.
fn parse_stat(line: &str) -> Option<(char, u32)> {
    let rest = &line[line.rfind(')')? + 1..];
    let mut f = rest.split_whitespace();
    let state = f.next()?.chars().next()?;
    let ppid = f.next()?.parse().ok()?;
    Some((state, ppid))
}

/// Every live process descended from `root`, children before their own
/// children.
fn descendants(root: u32) -> Vec<u32> {
    let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
    if let Ok(dir) = std::fs::read_dir("/proc") {
        for e in dir.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            if let Some((_, ppid)) = std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|s| parse_stat(&s))
            {
                children.entry(ppid).or_default().push(pid);
            }
        }
    }
    let mut out = Vec::new();
    let mut next = vec![root];
    while let Some(p) = next.pop() {
        for &c in children.get(&p).map_or(&[][..], Vec::as_slice) {
            out.push(c);
            next.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn stat_lines_parse_past_odd_command_names() {
        assert_eq!(
            parse_stat("4242 (iperf3) S 4000 4242 4000 0 -1"),
            Some(('S', 4000))
        );
        assert_eq!(parse_stat("17 (a) b (c) R 1 17 17 0 -1"), Some(('R', 1)));
        assert_eq!(parse_stat("garbage"), None);
    }

    #[test]
    fn a_spawned_child_is_a_descendant_until_it_is_killed() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = child.id();
        assert!(descendants(std::process::id()).contains(&pid));
        assert!(alive(pid));
        signal_all(&[pid], Signal::TERM);
        let status = child.wait().unwrap();
        // Ended by the signal, not by sleep running out.
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(status.signal(), Some(libc::SIGTERM));
        assert!(!alive(pid));
    }
}
