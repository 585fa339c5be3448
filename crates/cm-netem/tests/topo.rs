//! Multi-node networks (`cm_netem::Network`): the collapse topology of
//! experiments/topologies/collapse-fig1.toml builds, routes n0 -> n4 and
//! n1 -> n5 along the simulator's routes, passes its per-link self-test, and
//! nothing is left behind (drop, panic, a build that fails part-way, SIGINT to
//! `cm-netem topo`). Needs root; the tests run one at a time (a lock), so the
//! measurements do not overlap on a 2-core machine.
#![allow(clippy::unwrap_used)]

use std::io::{BufRead, BufReader};
use std::net::UdpSocket;
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use cm_netem::{BuildStep, Network, TopoSelfTestOptions, parse_topology};
use cm_sim::spec::TopologySpec;

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

const COLLAPSE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../experiments/topologies/collapse-fig1.toml"
);

fn collapse() -> TopologySpec {
    parse_topology(&std::fs::read_to_string(COLLAPSE).unwrap()).unwrap()
}

/// Namespaces named after `pid` (ours or a child's).
fn namespaces_of(pid: u32) -> Vec<String> {
    let prefix = format!("cmn{pid}x");
    cm_netem::netns::list_namespaces()
        .into_iter()
        .filter(|n| n.starts_with(&prefix))
        .collect()
}

/// Threads of ours that a network starts: delay boxes and namespace threads.
fn network_threads() -> Vec<String> {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("comm")).ok())
        .map(|c| c.trim().to_string())
        .filter(|c| c.starts_with("delaybox-") || c.starts_with("cmn-"))
        .collect()
}

/// No namespace of ours (or of `pid`) and no delay box or namespace thread left.
fn assert_clean(what: &str, pid: Option<u32>) {
    for p in pid.into_iter().chain([std::process::id()]) {
        assert_eq!(
            namespaces_of(p),
            Vec::<String>::new(),
            "{what}: namespaces left"
        );
    }
    let deadline = Instant::now() + Duration::from_secs(2);
    while !network_threads().is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(
        network_threads(),
        Vec::<String>::new(),
        "{what}: threads left"
    );
}

/// Send `n` datagrams from node `from` to node `to`'s address; how many arrived.
fn udp_reaches(net: &Network, from: &str, to: &str, n: u32) -> u32 {
    let dst = net.node_addr(to).unwrap();
    let rx = net
        .spawn_in(to, move || UdpSocket::bind((dst, 0)))
        .unwrap()
        .join()
        .unwrap()
        .unwrap();
    rx.set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let port = rx.local_addr().unwrap().port();
    net.spawn_in(from, move || {
        let s = UdpSocket::bind("0.0.0.0:0").unwrap();
        for _ in 0..n {
            s.send_to(&[7u8; 32], (dst, port)).unwrap();
            std::thread::sleep(Duration::from_millis(20));
        }
    })
    .unwrap()
    .join()
    .unwrap();
    let mut got = 0;
    let mut buf = [0u8; 64];
    while got < n && rx.recv(&mut buf).is_ok() {
        got += 1;
    }
    got
}

fn sent_packets(net: &Network) -> Vec<u64> {
    (0..net.links().len())
        .map(|i| net.link_stats(i).unwrap().sent_packets)
        .collect()
}

#[test]
fn collapse_routes_and_passes_its_self_test() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    if !cm_netem::is_root() {
        println!("skipped: needs root");
        return;
    }
    let t = Instant::now();
    let net = Network::build(&collapse()).unwrap();
    println!("built in {:.2} s", t.elapsed().as_secs_f64());
    assert_eq!(namespaces_of(std::process::id()).len(), 6);
    assert_eq!(net.route("n0", "n4").unwrap(), Some(vec![0, 4, 6]));
    assert_eq!(net.route("n1", "n5").unwrap(), Some(vec![2, 4, 8]));
    assert!(net.node_addr("n9").is_err());

    // n0 -> n4 crosses links 0, 4, 6 (their queues count it) and no other.
    for (from, to, path) in [("n0", "n4", [0, 4, 6]), ("n1", "n5", [2, 4, 8])] {
        let before = sent_packets(&net);
        assert_eq!(udp_reaches(&net, from, to, 5), 5, "{from} -> {to}");
        let after = sent_packets(&net);
        for (i, (b, a)) in before.iter().zip(&after).enumerate() {
            if path.contains(&i) {
                assert!(a - b >= 5, "{from} -> {to}: link {i} sent {}", a - b);
            } else {
                assert_eq!(a - b, 0, "{from} -> {to}: link {i} carried something");
            }
        }
    }
    // A program run in a node's namespace sees the node's address.
    let out = net
        .exec("n5", "ip")
        .unwrap()
        .args(["-4", "-o", "addr", "show"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(&net.node_addr("n5").unwrap().to_string()),
        "{text}"
    );

    let report = net.self_test(&TopoSelfTestOptions::default()).unwrap();
    println!("{report}");
    assert!(report.pass, "{report}");
    assert_eq!(report.links.len(), 10);
    for l in &report.links {
        assert_eq!(l.probes, 15, "{l:?}");
    }
    for l in &report.links {
        assert_eq!(l.flood_lost, 0, "{l:?}");
    }
    drop(net);
    assert_clean("drop", None);

    // A line with what collapse lacks: a 0-delay 100 Mbit/s link, and a
    // 2 Mbit/s / 64 kbit/s link of 20 ms with a 10-packet queue.
    let line = parse_topology(LINE).unwrap();
    let net = Network::build(&line).unwrap();
    let report = net.self_test(&TopoSelfTestOptions::default()).unwrap();
    println!("{report}");
    assert!(report.pass, "{report}");
    assert_eq!(report.links[3].rate_bps, 64_000.0);
    assert!((10..=11).contains(&report.links[3].backlog_packets));
    drop(net);
    assert_clean("drop line", None);
}

const LINE: &str = r#"
[topology]
[[topology.node]]
name = "a"
[[topology.node]]
name = "r"
kind = "router"
[[topology.node]]
name = "b"
[[topology.link]]
a = "a"
b = "r"
rate_bps = 100_000_000
delay_ms = 0.0
[[topology.link]]
a = "r"
b = "b"
rate_bps = 2_000_000
reverse_rate_bps = 64_000
delay_ms = 20.0
queue_packets = 10
"#;

#[test]
fn nothing_is_left_behind() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    if !cm_netem::is_root() {
        println!("skipped: needs root");
        return;
    }
    let spec = collapse();

    // Builds that fail part-way.
    for step in [BuildStep::Namespaces, BuildStep::Links, BuildStep::Routes] {
        let e = Network::build_failing_at(&spec, step).expect_err("must fail");
        assert!(format!("{e:#}").contains("injected failure"), "{e:#}");
        assert_clean(&format!("failed build at {step:?}"), None);
    }
    // An invalid description fails before anything exists.
    let mut bad = spec.clone();
    bad.links[0].b = "nowhere".into();
    let e = Network::build(&bad).expect_err("unknown node");
    assert!(format!("{e}").contains("nowhere"), "{e}");

    // A panic with the network alive.
    let r = std::panic::catch_unwind(|| {
        let net = Network::build(&spec).unwrap();
        let h = net.spawn_in("n2", || panic!("boom in n2")).unwrap();
        assert!(h.join().is_err());
        panic!("boom with the network alive");
    });
    assert!(r.is_err());
    assert_clean("panic", None);

    // SIGINT to `cm-netem topo FILE`: tears down, exits 130.
    let mut child = Command::new(env!("CARGO_BIN_EXE_cm-netem"))
        .args(["topo", COLLAPSE])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut lines = Vec::new();
    for line in (&mut out).lines() {
        let line = line.unwrap();
        let up = line.contains("Ctrl-C tears it down");
        lines.push(line);
        if up {
            break;
        }
    }
    assert_eq!(namespaces_of(pid).len(), 6, "{lines:?}");
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(pid as i32).unwrap(),
        rustix::process::Signal::INT,
    )
    .unwrap();
    let status = child.wait().unwrap();
    drop(out);
    assert_eq!(status.code(), Some(130), "{status}");
    assert_clean("SIGINT", Some(pid));
}

#[test]
fn cli_runs_a_command_with_the_nodes_in_its_environment() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    if !cm_netem::is_root() {
        println!("skipped: needs root");
        return;
    }
    let child = Command::new(env!("CARGO_BIN_EXE_cm-netem"))
        .args(["topo", COLLAPSE, "--", "sh", "-c"])
        .arg("ip netns exec \"$CM_NETEM_NS_N4\" ip -4 -o addr show | grep -q \"$CM_NETEM_ADDR_N4\" && exit 7")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(7), "{stdout}");
    assert!(stdout.contains("n4"), "{stdout}");
    assert_eq!(namespaces_of(pid), Vec::<String>::new());
}
