//! `cm vat send|recv`: vat-style interactive audio over the CM
//! (cm-implementation-linux §3.6, Fig 2).

use std::cell::RefCell;
use std::net::SocketAddr;
use std::rc::Rc;

use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use cm_apps::vat::{ReceiverConfig, Transport, VatConfig, VatReceiver, VatSender};
use libcm::ccudp::SharedCm;

use crate::proxy_cmd::{Common, positive, relay};

/// `cm vat`.
#[derive(Debug, Args)]
#[command(
    after_help = "Example: 64 kbit/s audio in 20 ms frames from A to B for a minute.
  on B:  cm vat recv --listen 0.0.0.0:5004
  on A:  cm vat send --to B:5004 --secs 60
The sender drops frames to the CM's long-term rate (the policer) and keeps
at most --buffer frames, dropping the oldest (--drop head, the default) or
the newest (--drop tail, a FIFO) when the CM cannot send them yet. The
receiver prints a line per --every seconds and, when the sender ends (or
no frame has come for --idle seconds), the one-way delay (mean, 95th percentile; sender and receiver need one clock),
the RFC 3550 jitter and the loss. --transport udp sends every frame at
once over plain UDP (no congestion control), for comparison."
)]
pub struct VatArgs {
    #[command(subcommand)]
    end: End,
}

#[derive(Debug, Subcommand)]
enum End {
    /// The audio source: policer, application buffer, socket.
    Send(SendArgs),
    /// The listener: measures delay, jitter and loss.
    Recv(RecvArgs),
}

#[derive(Debug, Args)]
struct SendArgs {
    /// The receiver (HOST:PORT).
    #[arg(long)]
    to: SocketAddr,
    /// cm (through the CM) or udp (plain, no congestion control).
    #[arg(long, default_value = "cm")]
    transport: Transport,
    /// Frames the application buffer holds.
    #[arg(long, default_value_t = 4)]
    buffer: usize,
    /// What a full buffer drops: head (the oldest) or tail (the newest, a FIFO).
    #[arg(long, default_value = "head")]
    drop: String,
    /// Send every frame the buffer takes, without policing to the CM's rate.
    #[arg(long)]
    no_policer: bool,
    /// Milliseconds of audio per frame.
    #[arg(long, default_value_t = 20.0)]
    frame_ms: f64,
    /// Bytes per frame (160 at 20 ms is 64 kbit/s).
    #[arg(long, default_value_t = 160)]
    frame_bytes: usize,
    /// How long to send, seconds.
    #[arg(long, default_value_t = 30.0)]
    secs: f64,
    /// Print the counts as pretty JSON when done.
    #[arg(long)]
    json: bool,
    /// Print the counts to stderr every this many seconds.
    #[arg(long)]
    every: Option<f64>,
}

#[derive(Debug, Args)]
struct RecvArgs {
    /// Where to listen (e.g. 0.0.0.0:5004).
    #[arg(long)]
    listen: SocketAddr,
    /// cm or udp, as the sender.
    #[arg(long, default_value = "cm")]
    transport: Transport,
    /// Stop when no frame has come for this many seconds. The sender's
    /// end message stops the receiver at once; this is for a sender that
    /// vanished, and must outlast its longest stall (through the CM,
    /// backed-off retransmission timeouts can hold it for seconds; RFC
    /// 3550 §6.3.5 times a silent participant out after at least 25 s).
    #[arg(long, default_value_t = 30.0)]
    idle: f64,
    #[command(flatten)]
    common: Common,
}

fn open_cm() -> anyhow::Result<SharedCm> {
    Ok(Rc::new(RefCell::new(
        libcm::Cm::new().context("opening the CM")?,
    )))
}

/// Run one end; print its report.
pub fn run(a: &VatArgs) -> anyhow::Result<()> {
    let cm = open_cm()?;
    match &a.end {
        End::Send(s) => {
            let Some(duration) = positive("secs", Some(s.secs))? else {
                bail!("--secs is required")
            };
            if !(s.frame_ms.is_finite() && s.frame_ms >= 1.0) {
                bail!("--frame-ms {}: give at least 1 (milliseconds)", s.frame_ms);
            }
            let frame_interval = std::time::Duration::from_secs_f64(s.frame_ms / 1e3);
            let cfg = VatConfig {
                transport: s.transport,
                frame_interval,
                frame_bytes: s.frame_bytes,
                buffer: s.buffer,
                overflow: s.drop.parse()?,
                policer: !s.no_policer,
                duration,
                ..VatConfig::default()
            };
            cfg.check().map_err(anyhow::Error::msg)?;
            let mut v = VatSender::connect(&cm, s.to, cfg.clone())?;
            eprintln!(
                "cm vat send: {:.0} kbit/s in {} ms frames to {} over {}, buffer {} (drop {}), policer {}",
                cfg.bitrate() / 1e3,
                s.frame_ms,
                s.to,
                if cfg.transport == Transport::Cm {
                    "the CM"
                } else {
                    "plain UDP"
                },
                cfg.buffer,
                cfg.overflow,
                if cfg.policer { "on" } else { "off" },
            );
            let common = Common {
                secs: None,
                json: s.json,
                every: s.every,
            };
            relay(&mut v, &cm, &common, VatSender::report, |v| {
                let r = v.report();
                format!(
                    "made {} sent {} policed {} buffer drops {} acked {} lost {}",
                    r.made, r.sent, r.policed, r.buffer_drops, r.acked, r.lost
                )
            })
        }
        End::Recv(r) => {
            let Some(idle) = positive("idle", Some(r.idle))? else {
                bail!("--idle is required")
            };
            let cfg = ReceiverConfig {
                listen: r.listen,
                transport: r.transport,
                idle,
            };
            let mut v = VatReceiver::bind(&cm, cfg)?;
            eprintln!(
                "cm vat recv: listening on {} ({}); stops when the sender ends, or {} s after the last frame",
                v.local_addr()?,
                if r.transport == Transport::Cm {
                    "through the CM"
                } else {
                    "plain UDP"
                },
                r.idle
            );
            relay(&mut v, &cm, &r.common, VatReceiver::report, |v| {
                let r = v.report();
                format!(
                    "frames {} lost {} ({:.1}%) delay mean {:.1} ms p95 {:.1} ms jitter {:.2} ms malformed {}",
                    r.frames,
                    r.lost,
                    r.loss * 100.0,
                    r.delay.mean_ms,
                    r.delay.p95_ms,
                    r.jitter_ms,
                    r.malformed
                )
            })
        }
    }
}
