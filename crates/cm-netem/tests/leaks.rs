//! Nothing is left behind on any exit path: normal drop, panic, a build that fails
//! part-way, SIGINT to `cm-netem up`, SIGKILL followed by `sweep_stale`. Needs root.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use cm_netem::{BuildStep, Node, Path, PathConfig};

const OUR_LINKS: [&str; 5] = ["r-snd", "r-rcv", "tunf", "tunr", "eth0"];

fn sh(program: &str, args: &[&str]) -> String {
    let out = Command::new(program).args(args).output().expect("run");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Namespaces named after `pid` (ours or a child's).
fn namespaces_of(pid: u32) -> Vec<String> {
    let prefix = format!("cmn{pid}x");
    cm_netem::netns::list_namespaces()
        .into_iter()
        .filter(|n| n.starts_with(&prefix))
        .collect()
}

fn root_links() -> BTreeSet<String> {
    sh("ip", &["-o", "link", "show"])
        .lines()
        .filter_map(|l| l.split(": ").nth(1))
        .map(|n| n.split('@').next().unwrap_or(n).to_string())
        .collect()
}

fn threads() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").expect("status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("Threads:")
}

fn children() -> Vec<String> {
    let mut v = Vec::new();
    for t in std::fs::read_dir("/proc/self/task")
        .expect("tasks")
        .flatten()
    {
        let c = std::fs::read_to_string(t.path().join("children")).unwrap_or_default();
        v.extend(c.split_whitespace().map(String::from));
    }
    v
}

struct Baseline {
    links: BTreeSet<String>,
    qdiscs: String,
    threads: usize,
}

impl Baseline {
    fn take() -> Baseline {
        Baseline {
            links: root_links(),
            qdiscs: sh("tc", &["qdisc", "show"]),
            threads: threads(),
        }
    }

    /// Assert that nothing of ours (or of child `pid`) is left.
    fn assert_clean(&self, what: &str, pids: &[u32]) {
        let me = std::process::id();
        for pid in pids.iter().copied().chain([me]) {
            assert_eq!(
                namespaces_of(pid),
                Vec::<String>::new(),
                "{what}: namespaces left"
            );
        }
        let new: Vec<_> = root_links().difference(&self.links).cloned().collect();
        for l in &new {
            assert!(
                !OUR_LINKS.contains(&l.as_str()),
                "{what}: link {l} left in the root ns"
            );
        }
        let qd = sh("tc", &["qdisc", "show"]);
        for l in OUR_LINKS {
            assert!(
                !qd.contains(&format!("dev {l} ")) || self.qdiscs.contains(&format!("dev {l} ")),
                "{what}: qdisc on {l} left in the root ns"
            );
        }
        // Threads wind down asynchronously only in the harness; ours are joined.
        let deadline = Instant::now() + Duration::from_secs(2);
        while threads() > self.threads && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(threads(), self.threads, "{what}: threads left");
        assert_eq!(
            children(),
            Vec::<String>::new(),
            "{what}: child processes left"
        );
    }
}

fn quick() -> PathConfig {
    PathConfig {
        loss: 0.01,
        ..PathConfig::default()
    }
}

fn spawn_up() -> (Child, Vec<String>) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_cm-netem"))
        .args([
            "up", "--rate", "10mbit", "--delay", "10ms", "--loss", "0.01",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn cm-netem up");
    let out = child.stdout.take().expect("stdout");
    let mut lines = Vec::new();
    for line in BufReader::new(out).lines() {
        let line = line.expect("read");
        let done = line.contains("Ctrl-C tears it down");
        lines.push(line);
        if done {
            return (child, lines);
        }
    }
    let status = child.wait().expect("wait");
    panic!("cm-netem up ended before the path was up ({status}): {lines:?}");
}

#[test]
fn nothing_is_left_behind() {
    if !cm_netem::is_root() {
        println!("skipped: needs root");
        return;
    }
    let base = Baseline::take();
    let me = std::process::id();

    // (a) normal drop, after using the path from a namespace thread.
    {
        let path = Path::build(quick()).expect("build");
        assert_eq!(namespaces_of(me).len(), 3);
        let rcv = path.receiver_addr();
        let ok = path
            .spawn_in(Node::Sender, move || {
                std::net::UdpSocket::bind("0.0.0.0:0").and_then(|s| s.send_to(b"x", (rcv, 9)))
            })
            .expect("spawn_in")
            .join()
            .expect("join");
        assert!(ok.is_ok());
        path.sysctl(Node::Receiver, "net.ipv4.tcp_ecn", "1")
            .expect("sysctl");
    }
    base.assert_clean("drop", &[]);

    // (b) panics: in a namespace thread, then while the path is alive.
    let r = std::panic::catch_unwind(|| {
        let path = Path::build(quick()).expect("build");
        let h = path
            .spawn_in(Node::Receiver, || panic!("boom in the receiver"))
            .expect("spawn");
        assert!(h.join().is_err());
        path.set_loss(0.5).expect("set_loss");
        panic!("boom with the path alive");
    });
    assert!(r.is_err());
    base.assert_clean("panic", &[]);

    // (c) builds that fail part-way, and invalid configurations.
    for step in [
        BuildStep::Namespaces,
        BuildStep::DelayBox,
        BuildStep::Tbf,
        BuildStep::Loss,
    ] {
        let e = Path::build_failing_at(quick(), step).expect_err("must fail");
        assert!(format!("{e:#}").contains("injected failure"), "{e:#}");
        base.assert_clean(&format!("failed build at {step:?}"), &[]);
    }
    let e = Path::build(PathConfig {
        loss: 1.5,
        ..quick()
    })
    .expect_err("bad loss");
    assert!(format!("{e:#}").contains("loss"), "{e:#}");
    base.assert_clean("invalid config", &[]);

    // (d) SIGINT to `cm-netem up`: tears down, exits non-zero.
    let (mut child, lines) = spawn_up();
    let pid = child.id();
    assert_eq!(namespaces_of(pid).len(), 3, "{lines:?}");
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(pid as i32).expect("pid"),
        rustix::process::Signal::INT,
    )
    .expect("SIGINT");
    let status = child.wait().expect("wait");
    assert_eq!(status.code(), Some(130), "{status}");
    base.assert_clean("SIGINT", &[pid]);

    // (e) SIGKILL: namespaces stay behind until sweep_stale().
    let (mut child, _) = spawn_up();
    let pid = child.id();
    child.kill().expect("SIGKILL");
    child.wait().expect("wait");
    assert_eq!(namespaces_of(pid).len(), 3);
    let swept = cm_netem::sweep_stale().expect("sweep");
    assert_eq!(swept.len(), 3, "{swept:?}");
    base.assert_clean("SIGKILL + sweep_stale", &[pid]);
}
