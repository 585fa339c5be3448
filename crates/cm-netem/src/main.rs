//! `cm-netem`: build an emulated network path between network namespaces, self-test
//! it, or clean up after killed runs. See `cm-netem --help`.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use clap::{Args, Parser, Subcommand};
mod topo_cli;

use topo_cli::{TOPO_EXAMPLES, TopoArgs};

use cm_netem::{Path, PathConfig, Queue, SelfTestOptions, parse_duration, parse_queue, parse_rate};

const EXAMPLES: &str = "\
Examples:
  cm-netem up --rate 10mbit --delay 30ms --queue 64pkt --loss 0.01
      then, in another terminal, e.g.:
      ip netns exec <receiver ns> iperf3 -s
      ip netns exec <sender ns> iperf3 -c <receiver address>
  cm-netem selftest --rate 100mbit --delay 5ms --json
  cm-netem selftest --rate 10mbit --delay 10ms --reorder 0.05 --reorder-delay 5ms --duplicate 0.02
  cm-netem topo experiments/topologies/collapse-fig1.toml --selftest
  cm-netem cleanup

Topology: sender --veth--> router [tbf rate/queue on tunf -> TUN delay box] --veth--> receiver
(random loss by a tc-BPF filter at the receiver's ingress; reordering and duplication of
sender -> receiver packets in the delay box). Needs root.";

/// Emulated network paths between Linux network namespaces (tbf bottleneck, TUN delay
/// box, tc-BPF random loss).
#[derive(Parser, Debug)]
#[command(name = "cm-netem", version, after_help = EXAMPLES)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Build a path, print how to use it, keep it up until Ctrl-C (or SIGTERM), tear down.
    Up {
        #[command(flatten)]
        path: PathArgs,
        /// Print path statistics at this interval (e.g. 1s).
        #[arg(long, value_parser = parse_duration)]
        stats_every: Option<Duration>,
    },
    /// Build a path, measure its delay, rate and loss (and reordering and duplication
    /// when configured), print the report, tear down. Exits 1 when any measurement is
    /// more than the tolerance off.
    Selftest {
        #[command(flatten)]
        path: PathArgs,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
        /// Most time the loss phase may take.
        #[arg(long, default_value = "15s", value_parser = parse_duration)]
        loss_budget: Duration,
        /// Most time the reordering/duplication phase may take (only run when
        /// --reorder or --duplicate is non-zero).
        #[arg(long, default_value = "15s", value_parser = parse_duration)]
        reorder_budget: Duration,
        /// Allowed relative error.
        #[arg(long, default_value_t = 0.05)]
        tolerance: f64,
    },
    /// Build a multi-node network from a file's [topology] table (a scenario file
    /// or a topology-only file), print its nodes, optionally self-test every link,
    /// then hold it up, run a command, or (with --selftest alone) tear down.
    #[command(after_help = TOPO_EXAMPLES)]
    Topo(TopoArgs),
    /// Delete namespaces left behind by cm-netem processes that no longer exist.
    Cleanup,
}

#[derive(Args, Debug)]
struct PathArgs {
    /// Bottleneck rate sender → receiver (IP level): 10mbit, 100Mbit, 500kbit, 1gbit.
    #[arg(long, default_value = "10mbit", value_parser = parse_rate)]
    rate: u64,
    /// One-way delay added in each direction: 30ms, 5ms, 0.1s.
    #[arg(long, default_value = "30ms", value_parser = parse_duration)]
    delay: Duration,
    /// Bottleneck queue: bytes (100kB, 150000b), packets of 1500 B (64pkt), or bdp
    /// (rate × 2 × delay).
    #[arg(long, default_value = "bdp", value_parser = parse_queue)]
    queue: Queue,
    /// Random loss probability at the receiver's ingress, in [0, 1).
    #[arg(long, default_value_t = 0.0)]
    loss: f64,
    /// Also limit receiver → sender to this rate (default: unlimited).
    #[arg(long, value_parser = parse_rate)]
    reverse_rate: Option<u64>,
    /// Reordering: probability in [0, 1] that a sender → receiver packet is held back
    /// by --reorder-delay beyond the one-way delay, so packets behind it overtake it.
    #[arg(long, default_value_t = 0.0)]
    reorder: f64,
    /// Extra delay of a held-back packet (e.g. 5ms); required when --reorder > 0.
    #[arg(long, default_value = "0", value_parser = parse_duration)]
    reorder_delay: Duration,
    /// Duplication: probability in [0, 1] that a sender → receiver packet is
    /// delivered twice (the copy right after the original).
    #[arg(long, default_value_t = 0.0)]
    duplicate: f64,
    /// The bottleneck tbf's bucket in bytes (default: two MTUs or 1 ms of
    /// tokens, whichever is larger); 1520 spaces back-to-back packets as a
    /// serial line does (packet-pair and packet-bunch measurements).
    #[arg(long)]
    burst: Option<u64>,
}

impl PathArgs {
    fn config(&self) -> PathConfig {
        PathConfig {
            rate_bps: self.rate,
            one_way_delay: self.delay,
            queue: self.queue,
            loss: self.loss,
            reverse_rate_bps: self.reverse_rate,
            reorder: self.reorder,
            reorder_delay: self.reorder_delay,
            duplicate: self.duplicate,
            burst_bytes: self.burst,
        }
    }
}

/// SIGINT/SIGTERM set this to the signal number.
pub(crate) fn register_signals() -> Result<Arc<AtomicUsize>> {
    let sig = Arc::new(AtomicUsize::new(0));
    for s in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register_usize(s, Arc::clone(&sig), s as usize)
            .context("installing signal handlers")?;
    }
    Ok(sig)
}

/// ", reorder p (+d), duplicate p" for the features in use.
fn impairments(c: &PathConfig) -> String {
    let mut s = String::new();
    if c.reorder > 0.0 {
        s += &format!(", reorder {} (+{:?})", c.reorder, c.reorder_delay);
    }
    if c.duplicate > 0.0 {
        s += &format!(", duplicate {}", c.duplicate);
    }
    s
}

fn describe(path: &Path) -> String {
    let c = path.config();
    let (r1, r2) = path.router_addrs();
    let [snd, rtr, rcv] = path.namespaces();
    format!(
        "cm-netem: path up: {} bottleneck, {:?} one way, queue {} B, loss {}{}{}\n\
         \x20 sender    netns {snd:<22} address {} (eth0)\n\
         \x20 router    netns {rtr:<22} {r1} / {r2}; tbf on tunf, delay box on tunf/tunr\n\
         \x20 receiver  netns {rcv:<22} address {} (eth0)\n\
         Use it, e.g.:\n\
         \x20 ip netns exec {rcv} iperf3 -s\n\
         \x20 ip netns exec {snd} iperf3 -c {}\n\
         \x20 tc -n {rtr} -s qdisc show dev tunf",
        cm_report::fmt::rate(c.rate_bps as f64),
        c.one_way_delay,
        c.queue_bytes(),
        c.loss,
        c.reverse_rate_bps
            .map(|r| format!(", reverse {}", cm_report::fmt::rate(r as f64)))
            .unwrap_or_default(),
        impairments(c),
        path.sender_addr(),
        path.receiver_addr(),
        path.receiver_addr(),
    )
}

fn up(args: &PathArgs, stats_every: Option<Duration>) -> Result<i32> {
    let sig = register_signals()?;
    let path = Path::build(args.config())?;
    println!("{}", describe(&path));
    println!("Ctrl-C tears it down.");
    let mut last = Instant::now();
    while sig.load(Ordering::Relaxed) == 0 {
        std::thread::sleep(Duration::from_millis(50));
        if let Some(every) = stats_every {
            if last.elapsed() >= every {
                last = Instant::now();
                match path.stats() {
                    Ok(s) => println!(
                        "sent {} pkts ({} B), dropped {}, backlog {} B; delay box fwd {} rev {} pkts, {} held back, {} duplicated",
                        s.bottleneck.sent_packets,
                        s.bottleneck.sent_bytes,
                        s.bottleneck.dropped,
                        s.bottleneck.backlog_bytes,
                        s.delay_box.forward.packets,
                        s.delay_box.reverse.packets,
                        s.delay_box.forward.reordered,
                        s.delay_box.forward.duplicated
                    ),
                    Err(e) => eprintln!("cm-netem: stats: {e:#}"),
                }
            }
        }
    }
    let s = sig.load(Ordering::Relaxed);
    path.teardown()?;
    eprintln!("cm-netem: signal {s}: path torn down");
    Ok(128 + s as i32)
}

fn selftest(args: &PathArgs, json: bool, opts: SelfTestOptions) -> Result<i32> {
    let sig = register_signals()?;
    let path = Arc::new(Path::build(args.config())?);
    if !json {
        eprintln!("{}", describe(&path));
        eprintln!(
            "self-testing (up to {:?} for the loss phase, {:?} for reordering/duplication)...",
            opts.loss_budget, opts.reorder_budget
        );
    }
    let (tx, rx) = std::sync::mpsc::channel();
    let p2 = Arc::clone(&path);
    std::thread::spawn(move || {
        let _ = tx.send(p2.self_test_report(&opts));
    });
    let report = loop {
        if let Ok(r) = rx.recv_timeout(Duration::from_millis(50)) {
            break r?;
        }
        let s = sig.load(Ordering::Relaxed);
        if s != 0 {
            path.teardown()?;
            eprintln!("cm-netem: signal {s}: path torn down");
            return Ok(128 + s as i32);
        }
    };
    path.teardown()?;
    if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!("{report}");
    }
    Ok(if report.pass { 0 } else { 1 })
}

fn run() -> Result<i32> {
    let cli = Cli::parse();
    match cli.cmd {
        Cmd::Up { path, stats_every } => up(&path, stats_every),
        Cmd::Selftest {
            path,
            json,
            loss_budget,
            reorder_budget,
            tolerance,
        } => {
            let opts = SelfTestOptions {
                loss_budget,
                reorder_budget,
                tolerance,
                ..Default::default()
            };
            selftest(&path, json, opts)
        }
        Cmd::Topo(args) => topo_cli::run(&args),
        Cmd::Cleanup => {
            let deleted = cm_netem::sweep_stale()?;
            if deleted.is_empty() {
                println!("cm-netem: nothing to clean up");
            }
            for ns in deleted {
                println!("deleted namespace {ns}");
            }
            Ok(0)
        }
    }
}

fn main() {
    let code = match run() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("cm-netem: error: {e:#}");
            1
        }
    };
    std::process::exit(code);
}
