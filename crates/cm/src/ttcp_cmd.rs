//! `cm ttcp`: ttcp-style bulk transfers, TCP/CM (over UDP, congestion
//! control by the CM), Linux TCP, or CC-UDP (unreliable datagrams through
//! a `CcUdpSocket`, the receiver sending nothing back), through `cm-ttcp`.

use std::io::{IsTerminal, Write};
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use cm_report::fmt;
use cm_ttcp::{
    ProgressSample, Receiver, ReceiverOptions, SendSpec, Summary, Transport, Until, cm_config,
};
use libcm::Cm;

use crate::byte_arg::parse_bytes;
use crate::stat_view::SocketArg;

/// Options of `cm ttcp`.
#[derive(Debug, clap::Args)]
pub struct TtcpArgs {
    #[command(subcommand)]
    cmd: TtcpCmd,
}

#[derive(Debug, clap::Subcommand)]
enum TtcpCmd {
    /// Receive transfers and print a summary line for each.
    Recv(RecvArgs),
    /// Send one bulk transfer and print its summary.
    Send(SendArgs),
    /// Measure the data path on loopback: raw UDP (one datagram per call,
    /// and GSO), TCP/CM embedded and through a private daemon, CC-UDP and
    /// Linux TCP Reno, in one run, with each end's CPU per MB.
    Bench(crate::ttcp_bench_cmd::BenchArgs),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Kind {
    /// TCP/CM: TCP over UDP, congestion control by the CM.
    Tcpcm,
    /// Linux TCP with `--cc`.
    Tcp,
    /// CC-UDP: datagrams through libcm's CcUdpSocket (an embedded CM per
    /// transfer), congestion controlled by the CM protocol's probes.
    Ccudp,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum CmMode {
    /// The daemon if one listens, else an embedded CM.
    Auto,
    /// A CM inside this process.
    Embedded,
    /// The CM daemon (error if none).
    Daemon,
}

#[derive(Debug, clap::Args)]
struct RecvArgs {
    /// Address to listen on.
    #[arg(long, default_value = "0.0.0.0:5001")]
    listen: SocketAddr,
    /// Transport to receive.
    #[arg(long, value_enum, default_value_t = Kind::Tcpcm)]
    transport: Kind,
    /// Linux TCP: congestion control of the listening socket (ACK path).
    #[arg(long, default_value = "reno")]
    cc: String,
    /// Exit after this many transfers (default: run until killed).
    #[arg(long)]
    count: Option<usize>,
    /// Write the received data to this file (the 2nd transfer to FILE.2,
    /// ...) instead of discarding it.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// Print summaries as JSON lines.
    #[arg(long)]
    json: bool,
    /// CC-UDP: run no receiver CM (the sender falls back to CC-UDP's acks).
    #[arg(long)]
    no_receiver_cm: bool,
    /// TCP/CM: the advertised receive window (e.g. 384KiB), which caps the
    /// sender's window; default 16 MiB.
    #[arg(long, value_name = "BYTES")]
    window: Option<String>,
}

#[derive(Debug, clap::Args)]
struct SendArgs {
    /// The receiver, host:port.
    dst: String,
    /// Bytes to send (decimal units: 10MB, 500kB, 1GB; or MiB, KiB).
    #[arg(long, default_value = "10MB", conflicts_with = "file")]
    bytes: String,
    /// Send this file (all of it) instead of `--bytes` of zeros.
    #[arg(long, value_name = "FILE")]
    file: Option<PathBuf>,
    /// Transport.
    #[arg(long, value_enum, default_value_t = Kind::Tcpcm)]
    transport: Kind,
    /// Linux TCP congestion control (reno, cubic, ...).
    #[arg(long, default_value = "reno")]
    cc: String,
    /// Which CM. TCP/CM: auto uses the daemon if one listens. CC-UDP:
    /// auto is an embedded CM of the transfer's own unless --cm-socket is
    /// given.
    #[arg(long, value_enum, default_value_t = CmMode::Auto)]
    cm: CmMode,
    #[command(flatten)]
    daemon: SocketArg,
    /// Print the summary as JSON (with progress samples every 100 ms).
    #[arg(long)]
    json: bool,
    /// TCP/CM: use SACK (RFC 2018 / RFC 6675; the receiver follows the SYN).
    #[arg(long)]
    sack: bool,
    /// CC-UDP: payload bytes per datagram (default: the most the CM's MTU
    /// leaves, 1456).
    #[arg(long, value_name = "BYTES")]
    payload: Option<usize>,
    /// UDP batching not to use (TCP/CM and CC-UDP), as CM_UDP_OFFLOAD:
    /// a comma-separated list of no-gso, no-gro, no-mmsg, or none.
    #[arg(long, value_name = "WORDS")]
    udp_offload: Option<String>,
}

/// Run `cm ttcp`.
pub fn run(a: &TtcpArgs) -> Result<()> {
    match &a.cmd {
        TtcpCmd::Recv(r) => recv(r),
        TtcpCmd::Send(s) => send(s),
        TtcpCmd::Bench(b) => crate::ttcp_bench_cmd::run(b),
    }
}

fn transport(kind: Kind, cc: &str) -> Transport {
    match kind {
        Kind::Tcpcm => Transport::TcpCm,
        Kind::Tcp => Transport::linux(cc),
        Kind::Ccudp => Transport::CcUdp,
    }
}

fn recv(a: &RecvArgs) -> Result<()> {
    let t = transport(a.transport, &a.cc);
    let defaults = ReceiverOptions::default();
    let rcv_wnd = match &a.window {
        None => defaults.rcv_wnd,
        Some(w) => {
            let bytes = parse_bytes(w)?;
            match u32::try_from(bytes) {
                Ok(b) if b > 0 => b,
                _ => anyhow::bail!("--window {w}: between 1 byte and 4 GiB"),
            }
        }
    };
    let opts = ReceiverOptions {
        rcv_wnd,
        output: a.out.clone(),
        ccudp: cm_ttcp::CcUdpReceiverOptions {
            cm_protocol: !a.no_receiver_cm,
            restart_after: None,
        },
        ..defaults
    };
    let mut rx = Receiver::bind(a.listen, &t, opts)?;
    eprintln!("cm ttcp: receiving {t} on {}", rx.local_addr());
    let until = Until {
        count: a.count,
        ..Until::default()
    };
    let json = a.json;
    rx.serve(&until, &mut |s: &Summary| {
        if json {
            match serde_json::to_string(s) {
                Ok(line) => println!("{line}"),
                Err(e) => eprintln!("error: {e}"),
            }
        } else {
            println!("{s}  from {}", s.peer);
        }
    })?;
    Ok(())
}

fn send(a: &SendArgs) -> Result<()> {
    let bytes = match &a.file {
        Some(f) => std::fs::metadata(f)
            .with_context(|| format!("{}", f.display()))?
            .len(),
        None => parse_bytes(&a.bytes)?,
    };
    if bytes == 0 {
        bail!("nothing to send: the file is empty");
    }
    let dst = a
        .dst
        .to_socket_addrs()
        .with_context(|| format!("resolving {:?} (want host:port)", a.dst))?
        .next()
        .ok_or_else(|| anyhow!("{:?} resolves to no address", a.dst))?;
    let t = transport(a.transport, &a.cc);
    let mut cm = match (a.transport, a.cm) {
        (Kind::Tcp, _) => None,
        // CC-UDP makes its own embedded CM unless a daemon is asked for.
        (Kind::Ccudp, CmMode::Daemon) => Some(a.daemon.connect()?),
        (Kind::Ccudp, CmMode::Auto) if a.daemon.socket.is_some() => Some(a.daemon.connect()?),
        (Kind::Ccudp, _) => None,
        (Kind::Tcpcm, CmMode::Embedded) => Some(Cm::embedded(cm_config())?),
        (Kind::Tcpcm, CmMode::Daemon) => Some(a.daemon.connect()?),
        (Kind::Tcpcm, CmMode::Auto) => Some(match &a.daemon.socket {
            Some(_) => a.daemon.connect()?,
            None => cm_ttcp::default_cm()?,
        }),
    };
    let tty = std::io::stderr().is_terminal();
    // ~4 updates a second on a terminal, one every 2 s otherwise.
    let every = if tty {
        Duration::from_millis(250)
    } else {
        Duration::from_secs(2)
    };
    let mut spec = SendSpec::new(dst, bytes, t.clone());
    spec.file = a.file.clone();
    spec.sack = a.sack;
    spec.payload = a.payload;
    spec.udp_offload = a.udp_offload.clone();
    let spec = spec.progress(if a.json {
        Duration::from_millis(100)
    } else {
        every
    });
    if let Some(cm) = &cm {
        eprintln!(
            "cm ttcp: sending {} to {dst} over {t} ({:?} CM)",
            fmt::bytes(bytes),
            cm.mode()
        );
    } else {
        eprintln!("cm ttcp: sending {} to {dst} over {t}", fmt::bytes(bytes));
    }
    let mut last: Option<(Instant, ProgressSample)> = None;
    let mut shown = Instant::now();
    let mut observer = |_: usize, s: &ProgressSample| {
        let now = Instant::now();
        let (pt, pb) = last.map_or((0.0, 0), |(_, p)| (p.t, p.bytes));
        let dt = s.t - pt;
        let rate = if dt > 0.0 {
            s.bytes.saturating_sub(pb) as f64 * 8.0 / dt
        } else {
            0.0
        };
        last = Some((now, *s));
        if now.duration_since(shown) + Duration::from_millis(5) < every && s.bytes < bytes {
            return;
        }
        shown = now;
        let pct = s.bytes as f64 * 100.0 / bytes as f64;
        let line = format!(
            "{:>10}  {pct:5.1}%  {:>14}  {:6.1} s",
            fmt::bytes(s.bytes),
            fmt::rate(rate),
            s.t
        );
        let mut err = std::io::stderr().lock();
        let _ = if tty {
            write!(err, "\r{line}  ")
        } else {
            writeln!(err, "{line}")
        };
        let _ = err.flush();
    };
    let r = cm_ttcp::send_observed(&spec, cm.as_mut(), Some(&mut observer));
    if tty {
        eprintln!();
    }
    let s = r?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&s)?);
    } else {
        println!("{s}");
    }
    Ok(())
}
