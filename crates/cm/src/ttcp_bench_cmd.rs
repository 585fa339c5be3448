//! `cm ttcp bench`: the data path's cost per byte, every path in one run
//! (`cm_ttcp::bench`), as a table with ratios against the raw-UDP and
//! Linux-TCP rows of the same run.

use anyhow::{Context, Result};
use cm_ttcp::bench::{BenchConfig, BenchRow, run as run_bench};

use crate::bench_load::args::{RunConfig, TransportArg};
use crate::bench_load::daemon::DaemonProcess;
use crate::byte_arg::parse_bytes;

/// Options of `cm ttcp bench`.
#[derive(Debug, clap::Args)]
pub struct BenchArgs {
    /// Bytes per transfer (TCP/CM, CC-UDP, Linux TCP).
    #[arg(long, default_value = "1GB")]
    bytes: String,
    /// Datagrams of 1200 bytes per raw-UDP row.
    #[arg(long, default_value_t = 1_000_000)]
    datagrams: u64,
    /// Rounds of every row (each row reports its median run).
    #[arg(long, default_value_t = 3)]
    repeat: usize,
    /// Skip the rows through a private daemon.
    #[arg(long)]
    no_daemon: bool,
    /// Print the rows as JSON.
    #[arg(long)]
    json: bool,
}

/// Run it.
pub fn run(a: &BenchArgs) -> Result<()> {
    let bytes = parse_bytes(&a.bytes).with_context(|| format!("--bytes {}", a.bytes))?;
    if a.datagrams == 0 {
        anyhow::bail!("--datagrams must be > 0");
    }
    if a.repeat == 0 {
        anyhow::bail!("--repeat must be > 0");
    }
    // The daemon in its own process, as users run it; its CPU is read from
    // /proc (its threads' scheduler statistics, to the nanosecond).
    let daemon = if a.no_daemon {
        None
    } else {
        let cmd = std::env::current_exe()
            .context("finding this program's directory")?
            .with_file_name("cmd");
        if !cmd.is_file() {
            anyhow::bail!(
                "no daemon binary at {}: build it in the same profile \
                 (cargo build --release -p cm-daemon) or pass --no-daemon",
                cmd.display()
            );
        }
        let run = RunConfig {
            clients: 1,
            flows: 1,
            hosts: 1,
            rate: 0.0,
            duration: std::time::Duration::ZERO,
            bulk: false,
            transport: TransportArg::Shm,
            cmd,
        };
        Some(DaemonProcess::start(&run)?)
    };
    let cfg = BenchConfig {
        bytes,
        datagrams: a.datagrams,
        daemon: daemon.as_ref().map(|d| d.socket().to_path_buf()),
        repeat: a.repeat,
    };
    let pid = daemon.as_ref().map(DaemonProcess::pid);
    let daemon_cpu = move || pid.and_then(|p| crate::procfs::threads_cpu_time(p).ok());
    eprintln!(
        "cm ttcp bench: {} per transfer, {} raw datagrams of 1200 B, on loopback, {} round(s)",
        cm_report::fmt::bytes(bytes),
        a.datagrams,
        a.repeat
    );
    let rows = run_bench(&cfg, &daemon_cpu, |r| eprintln!("  {:<28} done", r.name))?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
    } else {
        print!("{}", table(&rows));
    }
    Ok(())
}

/// The rows with ratios: sender CPU per MB against raw UDP (one per call)
/// and Linux TCP, datagram rate against raw UDP with GSO and against raw
/// UDP one datagram per call.
pub fn table(rows: &[BenchRow]) -> String {
    let find = |p: &str| rows.iter().find(|r| r.name.starts_with(p));
    let raw = find("raw UDP, 1");
    let gso = find("raw UDP, GSO");
    let reno = find("Linux TCP");
    let ratio = |a: f64, b: Option<f64>| b.filter(|b| *b > 0.0).map_or(f64::NAN, |b| a / b);
    let mut out = format!(
        "{:<28} {:>8} {:>11} {:>9} {:>9} {:>9} {:>8} {:>8} {:>8} {:>9}\n",
        "path",
        "Gbit/s",
        "datagrams/s",
        "snd ms/MB",
        "rcv ms/MB",
        "cmd ms/MB",
        "snd/raw",
        "snd/reno",
        "dgr/gso",
        "dgr/1call"
    );
    for r in rows {
        // Linux TCP has no datagrams of its own to count.
        let dgr = if r.datagrams_per_s > 0.0 {
            format!("{:.0}", r.datagrams_per_s)
        } else {
            "-".into()
        };
        out += &format!(
            "{:<28} {:>8.2} {:>11} {:>9.3} {:>9.3} {:>9.3} {:>8.2} {:>8.2} {:>8.2} {:>9.2}\n",
            r.name,
            r.goodput_bps / 1e9,
            dgr,
            r.sender_ms_per_mb,
            r.receiver_ms_per_mb,
            r.other_ms_per_mb,
            ratio(r.sender_ms_per_mb, raw.map(|x| x.sender_ms_per_mb)),
            ratio(r.sender_ms_per_mb, reno.map(|x| x.sender_ms_per_mb)),
            ratio(r.datagrams_per_s, gso.map(|x| x.datagrams_per_s)),
            ratio(r.datagrams_per_s, raw.map(|x| x.datagrams_per_s)),
        );
    }
    out
}
