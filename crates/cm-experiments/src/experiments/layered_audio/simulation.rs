//! One simulated `layered-audio` run: the CM host (audio + TCP/CM) against NewReno over one bottleneck.

use cm_core::{Config, Duration, Instant, Thresholds};
use cm_sim::{DumbbellConfig, FlowTag, QueueLimit, Sim, dumbbell};
use cm_transport::{AudioConfig, CcMode};
use serde::Serialize;

use crate::hosts::{AudioSpec, CbrSpec, CmHost, ConnSpec, HostError, Pkt, ReceiverHost};

/// Why the experiment could not run.
#[derive(Debug, thiserror::Error)]
pub enum AudioExpError {
    /// The topology was rejected.
    #[error(transparent)]
    Topology(#[from] cm_sim::TopologyError),
    /// A host was rejected.
    #[error(transparent)]
    Host(#[from] HostError),
}

/// The path the flows share.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PathKind {
    /// The paper's: DropTail queue of one bandwidth-delay product (7500 B),
    /// no random loss.
    DropTailBdp,
    /// The same link with a queue of 100 packets and 5% random loss on the
    /// bottleneck: drops hit every flow at the same rate, whatever its
    /// burstiness, so the CM's response to loss is compared on equal terms.
    EqualLoss,
}

/// What runs on the CM host beside the TCP/CM transfer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Companion {
    /// The layered audio sender (the paper's experiment).
    Audio,
    /// Nothing: TCP/CM alone against NewReno (control).
    Nothing,
    /// A second TCP/CM bulk transfer in the same macroflow (ensemble
    /// control: two TCPs on the CM instead of TCP + audio).
    SecondTcpCm,
}

/// One configuration of the experiment.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Variant {
    /// The path.
    pub path: PathKind,
    /// The CM host's second flow.
    pub companion: Companion,
}

impl Variant {
    /// The paper's experiment.
    pub const PAPER: Variant = Variant {
        path: PathKind::DropTailBdp,
        companion: Companion::Audio,
    };

    /// A short label, e.g. `droptail-bdp/audio`.
    pub fn label(&self) -> String {
        let p = match self.path {
            PathKind::DropTailBdp => "droptail-bdp",
            PathKind::EqualLoss => "equal-loss",
        };
        let c = match self.companion {
            Companion::Audio => "audio",
            Companion::Nothing => "none",
            Companion::SecondTcpCm => "tcpcm2",
        };
        format!("{p}/{c}")
    }
}

/// Per-flow packet loss (dropped ÷ sent) of one run.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct LossRates {
    /// NewReno.
    pub newreno: f64,
    /// TCP/CM.
    pub tcpcm: f64,
    /// The companion flow (audio or second TCP/CM; 0 without one).
    pub companion: f64,
    /// CBR cross traffic.
    pub cbr: f64,
}

/// The outcome of one run.
#[derive(Clone, Debug, Serialize)]
pub struct AudioRun {
    /// Seed.
    pub seed: u64,
    /// The configuration.
    pub variant: Variant,
    /// Seconds simulated.
    pub seconds: u64,
    /// TCP NewReno goodput, kbit/s.
    pub newreno_kbps: f64,
    /// Audio goodput, kbit/s.
    pub audio_kbps: f64,
    /// TCP/CM goodput, kbit/s.
    pub tcpcm_kbps: f64,
    /// The second TCP/CM transfer's goodput ([`Companion::SecondTcpCm`]).
    pub tcpcm2_kbps: f64,
    /// Packet loss of each flow.
    pub loss: LossRates,
    /// Seconds spent at each encoding (kbit/s, seconds).
    pub time_at_encoding: Vec<(u32, f64)>,
    /// The encoding used for the longest time.
    pub most_used_kbps: u32,
}

const NEWRENO: FlowTag = FlowTag(1);
const TCPCM: FlowTag = FlowTag(2);
const AUDIO: FlowTag = FlowTag(3);
const CBR: FlowTag = FlowTag(4);
const TCPCM2: FlowTag = FlowTag(5);

/// Queue of the equal-loss path, packets: deep enough that it rarely fills.
const EQUAL_LOSS_QUEUE: u32 = 100;
/// Random loss of the equal-loss path.
const EQUAL_LOSS_RATE: f64 = 0.05;

/// One run of a [`Variant`] for `seconds` with `seed` (which staggers the
/// starts by up to 100 ms).
pub fn run_with(seconds: u64, seed: u64, variant: Variant) -> Result<AudioRun, AudioExpError> {
    let mut cfg = DumbbellConfig::sigcomm1999(3, 500_000, Duration::from_millis(60));
    if variant.path == PathKind::EqualLoss {
        cfg.bottleneck.queue = QueueLimit::Packets(EQUAL_LOSS_QUEUE);
        cfg.bottleneck.loss = EQUAL_LOSS_RATE;
        cfg.reverse.queue = QueueLimit::Packets(EQUAL_LOSS_QUEUE);
    }
    let d = dumbbell(&cfg)?;
    let (cm_tx, reno_tx, cbr_tx) = (d.left_hosts[0], d.left_hosts[1], d.left_hosts[2]);
    let (cm_rx, reno_rx, cbr_rx) = (d.right_hosts[0], d.right_hosts[1], d.right_hosts[2]);
    let mut sim = Sim::<Pkt>::new(d.topology, seed)?;
    let jitter = |k: u64| {
        Instant::ZERO + Duration::from_micros(crate::seeded::below(seed * 7 + k, 0, 100_000))
    };

    let mut cm = CmHost::new(cm_tx, Config::default())?;
    if variant.companion == Companion::Audio {
        cm.add_audio(AudioSpec {
            dst: cm_rx,
            tag: AUDIO,
            start: jitter(1),
            config: AudioConfig::default(),
            // One encoding step is a factor of two: report changes of 25%.
            thresholds: Thresholds::default(),
        })?;
    }
    cm.add_conn(ConnSpec::new(cm_rx, TCPCM, CcMode::Cm).start(jitter(2)))?;
    if variant.companion == Companion::SecondTcpCm {
        cm.add_conn(ConnSpec::new(cm_rx, TCPCM2, CcMode::Cm).start(jitter(1)))?;
    }
    let mut reno = CmHost::new(reno_tx, Config::default())?;
    reno.add_conn(ConnSpec::new(reno_rx, NEWRENO, CcMode::NewReno).start(jitter(3)))?;
    let mut cbr = CmHost::new(cbr_tx, Config::default())?;
    cbr.add_cbr(CbrSpec {
        dst: cbr_rx,
        tag: CBR,
        rate_bps: 150_000,
        len: 1000,
        start: Instant::ZERO,
        stop: None,
    })?;
    sim.attach(cm_tx, cm)?;
    sim.attach(reno_tx, reno)?;
    sim.attach(cbr_tx, cbr)?;
    for rx in [cm_rx, reno_rx, cbr_rx] {
        sim.attach(rx, ReceiverHost::new())?;
    }
    let end = Instant::ZERO + Duration::from_secs(seconds);
    sim.run_until(end);
    let kbps = |t: FlowTag| {
        sim.flow_stats(t).map_or(0.0, |s| {
            s.delivered_bytes as f64 * 8.0 / seconds as f64 / 1e3
        })
    };
    let loss = |t: FlowTag| {
        sim.flow_stats(t)
            .map_or(0.0, |s| s.dropped() as f64 / s.sent_packets.max(1) as f64)
    };
    let companion_tag = match variant.companion {
        Companion::Audio => Some(AUDIO),
        Companion::SecondTcpCm => Some(TCPCM2),
        Companion::Nothing => None,
    };
    let host: Option<&CmHost> = sim.host(cm_tx);
    let time_at_encoding: Vec<(u32, f64)> = host
        .and_then(|h| h.audio(0))
        .map(|a| {
            a.time_at_encoding(end)
                .into_iter()
                .map(|(k, d)| (k, d.as_secs_f64()))
                .collect()
        })
        .unwrap_or_default();
    let most_used_kbps = time_at_encoding
        .iter()
        .copied()
        .fold(
            (0, -1.0),
            |best, (k, s)| if s > best.1 { (k, s) } else { best },
        )
        .0;
    Ok(AudioRun {
        seed,
        variant,
        seconds,
        newreno_kbps: kbps(NEWRENO),
        audio_kbps: kbps(AUDIO),
        tcpcm_kbps: kbps(TCPCM),
        tcpcm2_kbps: kbps(TCPCM2),
        loss: LossRates {
            newreno: loss(NEWRENO),
            tcpcm: loss(TCPCM),
            companion: companion_tag.map_or(0.0, loss),
            cbr: loss(CBR),
        },
        time_at_encoding,
        most_used_kbps,
    })
}
