//! `cm-netem topo FILE`: a multi-node network from a `[topology]` table.

use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use clap::Args;
use cm_netem::{Network, TopoSelfTestOptions, parse_duration, parse_topology};

pub(crate) const TOPO_EXAMPLES: &str = "\
Examples:
  cm-netem topo experiments/topologies/collapse-fig1.toml --selftest
      builds n0..n5, measures every link direction's rate and delay, tears down
  cm-netem topo experiments/topologies/collapse-fig1.toml --hold 10m
      keeps it up for 10 minutes (Ctrl-C tears down earlier); meanwhile e.g.
      ip netns exec <n4's netns> iperf3 -s
  cm-netem topo collapse-fig1.toml -- sh -c 'ip netns exec $CM_NETEM_NS_N0 ping -c 3 $CM_NETEM_ADDR_N4'
      runs the command (in the root namespace) with, for every node NAME,
      CM_NETEM_NS_<NAME> (its namespace) and CM_NETEM_ADDR_<NAME> (its address)
      in the environment (NAME upper-cased, other characters than A-Z0-9 as _),
      then tears down and exits with the command's status

Each node is a namespace; each duplex link a veth pair; each link direction's rate
(tbf), DropTail queue (pfifo of queue_packets + 1 under the tbf) and delay (a TUN
delay box) sit in its transmitting node; routes are the simulator's hop-count routes.
Needs root.";

/// Arguments of `cm-netem topo`.
#[derive(Args, Debug)]
pub(crate) struct TopoArgs {
    /// TOML file with a [topology] table (e.g. experiments/topologies/collapse-fig1.toml).
    file: PathBuf,
    /// Measure every link direction's rate, DropTail queue and one-way delay against
    /// the file (about 6 s for collapse-fig1.toml); exit 1 when one is off.
    #[arg(long)]
    selftest: bool,
    /// Print the self-test's report as JSON.
    #[arg(long, requires = "selftest")]
    json: bool,
    /// Allowed relative error of the self-test.
    #[arg(long, default_value_t = 0.05)]
    tolerance: f64,
    /// Keep the network up this long (e.g. 30s, 10m; Ctrl-C ends it earlier).
    /// Without --hold and a command it stays up until Ctrl-C, unless --selftest.
    #[arg(long, value_parser = parse_duration, conflicts_with = "cmd")]
    hold: Option<Duration>,
    /// Command to run (in the root namespace) while the network is up.
    #[arg(last = true)]
    cmd: Vec<String>,
}

/// `CM_NETEM_NS_<NAME>` style variable name for node `name`.
fn env_name(kind: &str, name: &str) -> String {
    let n: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect();
    format!("CM_NETEM_{kind}_{n}")
}

fn describe(net: &Network) -> String {
    let mut s = String::from("cm-netem: network up\n");
    for n in net.nodes() {
        let addrs: Vec<String> = n.addrs.iter().map(|a| a.to_string()).collect();
        s += &format!(
            "  {:<8} {:<6} netns {:<20} {}\n",
            n.name,
            if n.router { "router" } else { "host" },
            n.ns,
            addrs.join(" ")
        );
    }
    for l in net.links() {
        s += &format!(
            "  link {:>2} {:>6} -> {:<6} {:>12}, {:?}, queue {} pkt (tbf burst {} B)\n",
            l.id,
            l.from,
            l.to,
            cm_report::fmt::rate(l.rate_bps as f64),
            l.delay,
            l.queue_packets,
            l.burst_bytes
        );
    }
    s
}

/// Wait until `until` (or forever), a signal, or `stop()`; the signal number or 0.
fn wait(sig: &AtomicUsize, until: Option<Instant>, mut stop: impl FnMut() -> bool) -> usize {
    loop {
        let s = sig.load(Ordering::Relaxed);
        if s != 0 || until.is_some_and(|u| Instant::now() >= u) || stop() {
            return s;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn torn_down_by(net: &Network, s: usize) -> Result<i32> {
    net.teardown()?;
    eprintln!("cm-netem: signal {s}: network torn down");
    Ok(128 + s as i32)
}

pub(crate) fn run(args: &TopoArgs) -> Result<i32> {
    let sig = crate::register_signals()?;
    let text = std::fs::read_to_string(&args.file)
        .with_context(|| format!("reading {}", args.file.display()))?;
    let spec = parse_topology(&text).with_context(|| format!("in {}", args.file.display()))?;
    let net = Arc::new(Network::build(&spec)?);
    print!("{}", describe(&net));
    let mut code = 0;
    if args.selftest {
        let opts = TopoSelfTestOptions {
            tolerance: args.tolerance,
            ..Default::default()
        };
        eprintln!("self-testing every link direction...");
        let (tx, rx) = std::sync::mpsc::channel();
        let n2 = Arc::clone(&net);
        std::thread::spawn(move || {
            let _ = tx.send(n2.self_test(&opts));
        });
        let mut report = None;
        let s = wait(&sig, None, || match rx.try_recv() {
            Ok(r) => {
                report = Some(r);
                true
            }
            Err(std::sync::mpsc::TryRecvError::Empty) => false,
            Err(std::sync::mpsc::TryRecvError::Disconnected) => true,
        });
        if s != 0 {
            return torn_down_by(&net, s);
        }
        let report = report.context("the self-test thread died")??;
        if args.json {
            println!("{}", serde_json::to_string_pretty(&report)?);
        } else {
            println!("{report}");
        }
        code = i32::from(!report.pass);
    }
    if let Some((program, rest)) = args.cmd.split_first() {
        let mut c = Command::new(program);
        c.args(rest);
        for n in net.nodes() {
            c.env(env_name("NS", &n.name), &n.ns);
            if let Some(a) = n.addrs.first() {
                c.env(env_name("ADDR", &n.name), a.to_string());
            }
        }
        let mut child = c.spawn().with_context(|| format!("starting {program}"))?;
        let mut status = None;
        let s = wait(&sig, None, || {
            status = child.try_wait().ok().flatten();
            status.is_some()
        });
        if s != 0 {
            let _ = child.kill();
            let _ = child.wait();
            return torn_down_by(&net, s);
        }
        net.teardown()?;
        let st = status.context("the command's status")?;
        return Ok(if code != 0 {
            code
        } else {
            st.code().unwrap_or(1)
        });
    }
    if args.hold.is_some() || !args.selftest {
        match args.hold {
            Some(h) => println!("Holding for {h:?}; Ctrl-C tears it down earlier."),
            None => println!("Ctrl-C tears it down."),
        }
        let s = wait(&sig, args.hold.map(|h| Instant::now() + h), || false);
        if s != 0 {
            return torn_down_by(&net, s);
        }
    }
    net.teardown()?;
    Ok(code)
}
