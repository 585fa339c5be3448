//! `cm stream serve|play`: layered streaming over the CM
//! (cm-implementation-linux §3.4–3.5, Figs 8–9), and with `--nack`
//! NACK-based scalable video (iscc §VI).

use std::cell::RefCell;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use cm_apps::stream::{Api, ClientConfig, Layers, StreamClient, StreamServer};
use cm_apps::video::{VideoClient, VideoClientConfig, VideoConfig, VideoServer};
use libcm::ccudp::SharedCm;

use crate::proxy_cmd::{Common, positive, relay};

/// `cm stream`.
#[derive(Debug, Args)]
#[command(after_help = "Example: a minute of layered video from A to B.
  on B:  cm stream play --listen 0.0.0.0:5020 --every 1
  on A:  cm stream serve --to B:5020 --api alf --secs 60
The source has 4 cumulative layers (0.25, 0.5, 1 and 1.75 Mbit/s) at 25
frames/s. --api alf asks cm_query at each grant and sends the next packet of
the current frame at the layer that rate carries, each frame at its time
(--ahead S sends up to S seconds ahead as fast as the CM grants, and the
client buffers them; --ahead all has no bound); --api rate chooses the
layer at each rate callback (cm_thresh at 3/4 and 4/3) and sends whole
frames on its own clock into a 64 KiB buffer. The client plays after a
startup buffer and prints, per --every seconds, frames played, frozen
(base layer incomplete at play time), the layer and the goodput. Feedback
to the server's CM is the client's CC-UDP acknowledgements.

With --nack at both ends, NACK-based scalable video instead (iscc §VI):
  on B:  cm stream play --nack --listen 0.0.0.0:5020 --every 1
  on A:  cm stream serve --nack --to B:5020 --controller iscc:l=2 --secs 60
A base layer (--base-kbit, 14 by default) plus a fine-grained enhancement
layer up to --top-kbit, sent at the rate the controller allows (aimd, iiad,
tfrc, iscc:l=2, ...; see docs/api.md) in bunches of 3 packets. The client
acknowledges once per RTT, NACKs base packets missing before their playout
deadline, and returns packet-bunch capacity samples, which ISCC runs on. It
prints the loss, the frozen pictures and its capacity estimate.")]
pub struct StreamArgs {
    #[command(subcommand)]
    end: End,
}

#[derive(Debug, Subcommand)]
enum End {
    /// The layered server.
    Serve(ServeArgs),
    /// The client: plays out and reports.
    Play(PlayArgs),
}

#[derive(Debug, Args)]
struct ServeArgs {
    /// The client (HOST:PORT).
    #[arg(long)]
    to: SocketAddr,
    /// alf (request/callback, cm_query at each grant) or rate (rate callbacks).
    #[arg(long, default_value = "alf")]
    api: Api,
    /// How long to stream, seconds.
    #[arg(long, default_value_t = 30.0)]
    secs: f64,
    /// With --api alf: send frames up to this many seconds ahead of their
    /// time, as fast as the CM grants (a stored stream; the client buffers
    /// them; cm stream play holds at most 300 s ahead), or "all" for no
    /// bound (the paper's Fig 8 server). 0 is a live source.
    #[arg(long, default_value = "0", conflicts_with = "nack")]
    ahead: String,
    /// NACK-based scalable video instead of the 4-layer source.
    #[arg(long)]
    nack: bool,
    /// With --nack: the macroflow's controller (e.g. aimd, iiad, tfrc, iscc:l=2).
    #[arg(long, default_value = "iscc:l=2", requires = "nack")]
    controller: String,
    /// With --nack: the base layer's rate, kbit/s.
    #[arg(long, default_value_t = 14.0, requires = "nack")]
    base_kbit: f64,
    /// With --nack: the top rate (base plus enhancement), kbit/s.
    #[arg(long, default_value_t = 1500.0, requires = "nack")]
    top_kbit: f64,
    /// With --nack: the client's playout delay, seconds (base packets NACKed until then).
    #[arg(long, default_value_t = 3.0, requires = "nack")]
    playout: f64,
    /// With --nack: the client holds its feedback back up to this many
    /// seconds (its --report with --batch); the retransmission timeout stays above it.
    #[arg(long, requires = "nack")]
    feedback_hold: Option<f64>,
    /// Print the report as pretty JSON when done.
    #[arg(long)]
    json: bool,
    /// Print the counts to stderr every this many seconds.
    #[arg(long)]
    every: Option<f64>,
}

#[derive(Debug, Args)]
struct PlayArgs {
    /// Where to listen (e.g. 0.0.0.0:5020).
    #[arg(long)]
    listen: SocketAddr,
    /// Seconds of startup buffer before the first frame plays.
    #[arg(long, default_value_t = 1.0)]
    startup: f64,
    /// Stop when nothing has come for this many seconds.
    #[arg(long, default_value_t = 3.0)]
    idle: f64,
    /// NACK-based scalable video (the server's --nack).
    #[arg(long)]
    nack: bool,
    /// With --nack: the playout delay, seconds (as the server's).
    #[arg(long, default_value_t = 3.0, requires = "nack")]
    playout: f64,
    /// With --nack: the longest time between acknowledgements, seconds
    /// (about one RTT is used when shorter, unless --batch is given).
    #[arg(long, default_value_t = 0.2, requires = "nack")]
    report: f64,
    /// With --nack: delay feedback until this many packets have arrived or
    /// --report has passed, whichever is first (e.g. --batch 500 --report 2).
    #[arg(long, requires = "nack")]
    batch: Option<u32>,
    #[command(flatten)]
    common: Common,
}

/// Run one end; print its report.
pub fn run(a: &StreamArgs) -> anyhow::Result<()> {
    let cm: SharedCm = Rc::new(RefCell::new(libcm::Cm::new().context("opening the CM")?));
    match &a.end {
        End::Serve(s) if s.nack => serve_nack(s, &cm),
        End::Play(p) if p.nack => play_nack(p, &cm),
        End::Serve(s) => {
            let Some(duration) = positive("secs", Some(s.secs))? else {
                bail!("--secs is required")
            };
            let ahead = match s.ahead.as_str() {
                "all" => None,
                a => match a.parse().map(Duration::try_from_secs_f64) {
                    Ok(Ok(d)) => Some(d),
                    _ => bail!("--ahead {a:?}: give seconds (0 or more) or \"all\""),
                },
            };
            let mut sv = StreamServer::connect(&cm, s.to, Layers::default(), s.api, duration)?;
            sv.send_ahead(ahead);
            let pace = match (s.api, ahead) {
                (Api::Rate, _) => "frames on its own clock".to_string(),
                (Api::Alf, None) => "as fast as the CM grants".to_string(),
                (Api::Alf, Some(Duration::ZERO)) => "each frame at its time".to_string(),
                (Api::Alf, Some(a)) => format!("up to {} s ahead", a.as_secs_f64()),
            };
            eprintln!(
                "cm stream serve: {:?} to {} for {} s, {pace} (layers 0.25/0.5/1/1.75 Mbit/s, 25 frames/s)",
                s.api, s.to, s.secs
            );
            let common = Common {
                secs: None,
                json: s.json,
                every: s.every,
            };
            relay(&mut sv, &cm, &common, StreamServer::report, |sv| {
                let r = sv.report();
                format!(
                    "frames {} layer {} switches {} packets {} skipped {} buffer drops {}",
                    r.frames,
                    r.layers.last().map_or(0, |l| l.1),
                    r.switches,
                    r.packets,
                    r.skipped,
                    r.buffer_drops
                )
            })
        }
        End::Play(p) => {
            let (Some(startup), Some(idle)) = (
                positive("startup", Some(p.startup))?,
                positive("idle", Some(p.idle))?,
            ) else {
                bail!("--startup and --idle are required")
            };
            let cfg = ClientConfig {
                listen: p.listen,
                layers: Layers::default(),
                startup,
                idle,
            };
            let mut c = StreamClient::bind(&cm, cfg)?;
            eprintln!(
                "cm stream play: listening on {}; plays {} s after the first packet, stops {} s after the last",
                c.local_addr()?,
                p.startup,
                p.idle
            );
            relay(&mut c, &cm, &p.common, StreamClient::report, |c| {
                let r = c.report();
                let last = r.seconds.iter().rev().find(|s| s.frames > 0);
                format!(
                    "played {} frozen {} switches {} layer {:.1} goodput {:.0} kbit/s",
                    r.played,
                    r.frozen,
                    r.switches,
                    last.map_or(-1.0, |s| s.mean_layer),
                    last.map_or(0.0, |s| s.goodput_bps / 1e3)
                )
            })
        }
    }
}

/// `cm stream serve --nack`.
fn serve_nack(s: &ServeArgs, cm: &SharedCm) -> anyhow::Result<()> {
    let (Some(duration), Some(playout)) = (
        positive("secs", Some(s.secs))?,
        positive("playout", Some(s.playout))?,
    ) else {
        bail!("--secs and --playout are required")
    };
    let controller = s
        .controller
        .parse()
        .with_context(|| format!("--controller {}", s.controller))?;
    let cfg = VideoConfig {
        base_bps: s.base_kbit * 1e3,
        top_bps: s.top_kbit * 1e3,
        playout,
        duration,
        controller,
        feedback_hold: positive("feedback-hold", s.feedback_hold)?,
        ..VideoConfig::default()
    };
    let mut sv = VideoServer::connect(cm, s.to, cfg)?;
    eprintln!(
        "cm stream serve --nack: to {} for {} s, {} (base {} kbit/s, top {} kbit/s, bunches of 3)",
        s.to, s.secs, s.controller, s.base_kbit, s.top_kbit
    );
    let common = Common {
        secs: None,
        json: s.json,
        every: s.every,
    };
    relay(&mut sv, cm, &common, VideoServer::report, |sv| {
        let r = sv.report();
        let kbit = |b: Option<f64>| b.map_or("-".to_string(), |b| format!("{:.0}", b / 1e3));
        format!(
            "rate {} kbit/s capacity {} kbit/s base {} resent {} enhancement {} lost {} samples {}",
            kbit(r.rate_bps),
            kbit(r.capacity_bps),
            r.base,
            r.resent,
            r.enhancement,
            r.lost,
            r.samples
        )
    })
}

/// `cm stream play --nack`.
fn play_nack(p: &PlayArgs, cm: &SharedCm) -> anyhow::Result<()> {
    let (Some(playout), Some(idle), Some(report)) = (
        positive("playout", Some(p.playout))?,
        positive("idle", Some(p.idle))?,
        positive("report", Some(p.report))?,
    ) else {
        bail!("--playout, --idle and --report are required")
    };
    if p.batch == Some(0) {
        bail!("--batch must be at least 1");
    }
    let cfg = VideoClientConfig {
        listen: p.listen,
        report,
        playout,
        idle,
        batch: p.batch,
    };
    let mut c = VideoClient::bind(cfg)?;
    eprintln!(
        "cm stream play --nack: listening on {}; playout delay {} s, stops {} s after the last packet",
        c.local_addr()?,
        p.playout,
        p.idle
    );
    relay(&mut c, cm, &p.common, VideoClient::report, |c| {
        let r = c.report();
        format!(
            "packets {} loss {:.2}% pictures {} frozen {} recovered {} capacity {} kbit/s",
            r.packets,
            r.loss * 100.0,
            r.pictures,
            r.frozen,
            r.recovered,
            r.median_sample_bps
                .map_or("-".to_string(), |b| format!("{:.0}", b / 1e3))
        )
    })
}
