//! `cm demo`: the CM on this machine, end to end, over real UDP.
//!
//! Several flows to one receiver host share one macroflow and a flow to a
//! second receiver address gets its own (flows to different hosts never
//! share). The sender is an ordinary libcm application (an embedded
//! [`libcm::Cm`], request/callback flows); receivers acknowledge what
//! crosses the bottleneck with CC-UDP's acks (`cm_transport::ccudp`), and
//! the sender turns them into `cm_update`. Flows start staggered, so later
//! ones join a macroflow that already knows the path.
//!
//! Two networks:
//! - **as root** (unless `--loopback`): a real emulated path built with
//!   cm-netem — sender and receiver in their own network namespaces, a
//!   kernel `tbf` bottleneck and DropTail queue on the router, the TUN
//!   delay box for the one-way delay. Both receiver addresses sit behind
//!   the same bottleneck, so the two macroflows compete for it.
//! - **otherwise**: loopback, each receiver behind its own user-space
//!   bottleneck (rate, DropTail queue, one-way delay) in the receiver.

mod bottleneck;
mod receiver;
mod report;
mod sender;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration as StdDuration;

use anyhow::{Result, bail};
use cm_core::{Bytes, Config};

use receiver::{PathSpec, Receiver};
use sender::{App, Sender};

/// Options of `cm demo`.
#[derive(Clone, Debug, clap::Args)]
pub struct DemoArgs {
    /// How long to run, in seconds.
    #[arg(long, default_value_t = 10.0)]
    pub duration: f64,
    /// Flows to 127.0.0.1, sharing one macroflow.
    #[arg(long, default_value_t = 3)]
    pub shared: usize,
    /// Flows to 127.0.0.2, a macroflow of their own.
    #[arg(long, default_value_t = 1)]
    pub other: usize,
    /// Bottleneck rate in front of each receiver, in Mbit/s.
    #[arg(long, default_value_t = 10.0)]
    pub rate_mbit: f64,
    /// One-way delay of each bottleneck, in milliseconds.
    #[arg(long, default_value_t = 20.0)]
    pub delay_ms: f64,
    /// Bottleneck queue in packets of 1500 bytes (default: about one
    /// bandwidth-delay product).
    #[arg(long)]
    pub queue_packets: Option<u64>,
    /// Seconds between the starts of successive flows on a macroflow.
    #[arg(long, default_value_t = 1.0)]
    pub stagger: f64,
    /// Seconds between status lines.
    #[arg(long, default_value_t = 0.5)]
    pub interval: f64,
    /// Print the summary as JSON (status lines go to stderr).
    #[arg(long)]
    pub json: bool,
    /// Use loopback with user-space bottlenecks even as root (by default
    /// root gets a real emulated path in network namespaces).
    #[arg(long)]
    pub loopback: bool,
}

/// Run the demo.
pub fn run(args: &DemoArgs) -> Result<()> {
    for (name, v) in [
        ("--duration", args.duration),
        ("--rate-mbit", args.rate_mbit),
        ("--interval", args.interval),
    ] {
        if !(v.is_finite() && v > 0.0) {
            bail!("{name} must be a positive number, got {v}");
        }
    }
    if !(args.delay_ms.is_finite()
        && args.delay_ms >= 0.0
        && args.stagger.is_finite()
        && args.stagger >= 0.0)
    {
        bail!("--delay-ms and --stagger must be non-negative numbers");
    }
    if args.shared + args.other == 0 || args.shared + args.other > 64 {
        bail!("between 1 and 64 flows in all, please");
    }
    let rate = (args.rate_mbit * 1e6 / 8.0) as u64;
    let delay = StdDuration::from_secs_f64(args.delay_ms / 1e3);
    let bdp = (rate as f64 * 2.0 * delay.as_secs_f64()) as u64;
    let queue_bytes = args
        .queue_packets
        .map_or(bdp.max(10 * 1500), |p| p.max(1) * 1500);
    if !args.loopback && cm_netem::is_root() {
        return run_emulated(args, rate, delay, queue_bytes);
    }
    eprintln!(
        "network: loopback, a user-space bottleneck in front of each receiver \
         ({} Mbit/s, {} ms one way, {} KB queue){}",
        args.rate_mbit,
        args.delay_ms,
        queue_bytes / 1000,
        if cm_netem::is_root() {
            ""
        } else {
            "; run as root for a real emulated path in network namespaces"
        }
    );
    let path = PathSpec {
        rate_bytes_per_sec: rate,
        queue_bytes,
        one_way_delay: delay,
    };
    let stop = Arc::new(AtomicBool::new(false));
    let rx_a = Receiver::spawn("127.0.0.1", Some(path), stop.clone())?;
    let rx_b = match Receiver::spawn("127.0.0.2", Some(path), stop.clone()) {
        Ok(r) => r,
        Err(e) => {
            stop.store(true, Ordering::Relaxed);
            let _ = rx_a.join();
            return Err(e);
        }
    };
    let apps = apps(args, rx_a.addr, rx_b.addr);
    let result = drive(apps, args, IpAddr::V4(Ipv4Addr::LOCALHOST));
    stop.store(true, Ordering::Relaxed);
    let drops = rx_a.join()? + rx_b.join()?;
    let f = result?;
    report::summary(&f.apps, f.elapsed, f.measured, drops, args.json)
}

/// The shared flows to `a`, staggered, then the others to `b`.
fn apps(args: &DemoArgs, a: SocketAddr, b: SocketAddr) -> Vec<App> {
    let stagger = StdDuration::from_secs_f64(args.stagger);
    let mut apps = Vec::new();
    for i in 0..args.shared {
        apps.push(App::new(a, stagger * i as u32));
    }
    for i in 0..args.other {
        apps.push(App::new(b, stagger * i as u32));
    }
    apps
}

/// A grant is one whole CC-UDP datagram (its 16-byte header included); with
/// 28 bytes of IP and UDP header it is a 1460-byte packet.
fn demo_config() -> Config {
    Config {
        mtu: Bytes(1460 - 28),
        ..Config::default()
    }
}

/// The demo on a real emulated path (root): receivers in the receiver's
/// namespace at two addresses, the sender's CM in the sender's namespace,
/// the kernel's tbf queue and the TUN delay box in between.
fn run_emulated(args: &DemoArgs, rate: u64, delay: StdDuration, queue_bytes: u64) -> Result<()> {
    let cfg = cm_netem::PathConfig {
        rate_bps: rate * 8,
        one_way_delay: delay,
        queue: cm_netem::Queue::Bytes(queue_bytes),
        loss: 0.0,
        reverse_rate_bps: None,
        ..cm_netem::PathConfig::default()
    };
    let _ = cm_netem::sweep_stale();
    // Ctrl-C or SIGTERM mid-run deletes the namespaces before exiting.
    cm_netem::teardown_on_signals("cm demo")?;
    let path = cm_netem::Path::build(cfg)?;
    let rcv = path.receiver_addr();
    // A second receiver address behind the same bottleneck (a second host
    // as far as the CM can tell).
    let other = path.add_receiver_address(1)?;
    eprintln!(
        "network: emulated path (cm-netem) {} -> tbf {} Mbit/s, {} KB queue -> delay box {} ms each way -> {rcv} and {other}; namespaces {}",
        path.sender_addr(),
        args.rate_mbit,
        queue_bytes / 1000,
        args.delay_ms,
        path.namespaces().join(", ")
    );
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let receivers = path
        .spawn_in(
            cm_netem::Node::Receiver,
            move || -> Result<(Receiver, Receiver)> {
                let a = Receiver::spawn(&rcv.to_string(), None, flag.clone())?;
                let b = Receiver::spawn(&other.to_string(), None, flag)?;
                Ok((a, b))
            },
        )?
        .join()
        .map_err(|_| anyhow::anyhow!("receiver setup panicked"))??;
    let (rx_a, rx_b) = receivers;
    let apps = apps(args, rx_a.addr, rx_b.addr);
    let sender_ip = IpAddr::V4(path.sender_addr());
    let a = args.clone();
    let result = path
        .spawn_in(cm_netem::Node::Sender, move || drive(apps, &a, sender_ip))?
        .join()
        .map_err(|_| anyhow::anyhow!("sender panicked"));
    stop.store(true, Ordering::Relaxed);
    rx_a.join()?;
    rx_b.join()?;
    let drops = path.stats().map_or(0, |s| s.bottleneck.dropped);
    path.teardown()?;
    let f = result??;
    report::summary(&f.apps, f.elapsed, f.measured, drops, args.json)
}

/// Run the sender until the end, printing status lines.
fn drive(apps: Vec<App>, args: &DemoArgs, ip: IpAddr) -> Result<Finished> {
    let mut s = Sender::new(demo_config(), apps, ip)?;
    let end = StdDuration::from_secs_f64(args.duration);
    let mark = end / 2;
    let every = StdDuration::from_secs_f64(args.interval);
    let mut next_report = every;
    let mut marked = false;
    report::header(args.json);
    loop {
        let now = s.elapsed();
        if now >= end {
            break;
        }
        if !marked && now >= mark {
            s.with_apps(|apps| {
                for a in apps {
                    a.acked_at_mark = a.acked;
                }
            });
            marked = true;
        }
        if now >= next_report {
            report::status(&mut s, now, args.json);
            next_report += every;
        }
        s.turn(next_report.min(end).min(if marked { end } else { mark }))?;
    }
    let (apps, elapsed) = s.finish();
    Ok(Finished {
        apps,
        elapsed,
        measured: end - mark,
    })
}

/// What a run leaves for the summary.
struct Finished {
    apps: Vec<App>,
    /// Time from the start to the end of the run.
    elapsed: StdDuration,
    /// The measurement window (the second half of the run).
    measured: StdDuration,
}
