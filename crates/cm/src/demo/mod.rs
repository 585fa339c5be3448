//! `cm demo`: the CM on this machine, end to end, over real UDP on loopback.
//!
//! Several flows to 127.0.0.1 share one macroflow and a flow to 127.0.0.2
//! gets its own (flows to different receivers never share). Each receiver
//! sits behind its own user-space bottleneck (rate, DropTail queue, one-way
//! delay) and acknowledges every datagram that crosses it; the acks drive
//! `cm_update`. Flows start staggered, so later ones join a macroflow that
//! already knows the path.

mod link;
mod receiver;
mod report;
mod sender;
pub(crate) mod wire;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration as StdDuration, Instant as StdInstant};

use anyhow::{Result, bail};
use cm_core::{Bytes, Config, CongestionManager, Duration, Instant};

use receiver::{PathSpec, Receiver};
use sender::{App, Sender};

/// Options of `cm demo`.
#[derive(Debug, clap::Args)]
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
    let path = PathSpec {
        rate_bytes_per_sec: rate,
        queue_bytes,
        one_way_delay: delay,
    };

    let epoch = StdInstant::now();
    let stop = Arc::new(AtomicBool::new(false));
    let rx_a = Receiver::spawn("127.0.0.1", path, epoch, stop.clone())?;
    let rx_b = match Receiver::spawn("127.0.0.2", path, epoch, stop.clone()) {
        Ok(r) => r,
        Err(e) => {
            stop.store(true, Ordering::Relaxed);
            let _ = rx_a.join();
            return Err(e);
        }
    };
    let stagger = StdDuration::from_secs_f64(args.stagger);
    let mut apps = Vec::new();
    for i in 0..args.shared {
        apps.push(App::new(rx_a.addr, stagger * i as u32));
    }
    for i in 0..args.other {
        apps.push(App::new(rx_b.addr, stagger * i as u32));
    }
    // A 1460-byte grant plus the demo's headers fits a 1500-byte packet.
    let cfg = Config {
        mtu: Bytes(1460 - 28),
        ..Config::default()
    };
    let result = drive(CongestionManager::new(cfg)?, apps, epoch, args);
    stop.store(true, Ordering::Relaxed);
    let drops = rx_a.join()? + rx_b.join()?;
    let (sender, measured) = result?;
    report::summary(&sender, measured, drops, args.json)
}

/// Run the sender until the end, printing status lines; returns the sender
/// and the length of the measurement window (the second half of the run).
fn drive(
    cm: CongestionManager,
    apps: Vec<App>,
    epoch: StdInstant,
    args: &DemoArgs,
) -> Result<(Sender, StdDuration)> {
    let mut s = Sender::new(cm, apps, epoch)?;
    let end = Instant::ZERO + Duration::from_micros((args.duration * 1e6) as u64);
    let mark = Instant::ZERO + Duration::from_micros((args.duration * 0.5e6) as u64);
    let every = Duration::from_micros((args.interval * 1e6) as u64);
    let mut next_report = Instant::ZERO + every;
    let mut marked = false;
    report::header(args.json);
    loop {
        let now = s.now();
        if now >= end {
            break;
        }
        if !marked && now >= mark {
            for a in &mut s.apps {
                a.acked_at_mark = a.acked;
            }
            marked = true;
        }
        if now >= next_report {
            report::status(&s, now, args.json);
            next_report += every;
        }
        s.turn(next_report.min(end).min(if marked { end } else { mark }))?;
    }
    let measured = StdDuration::from_micros((end - mark).as_micros());
    Ok((s, measured))
}
