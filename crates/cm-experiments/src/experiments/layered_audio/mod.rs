//! `layered-audio` — an adaptive layered audio sender and a TCP/CM transfer
//! on one CM host against one TCP NewReno transfer (sigcomm1999 §5.2,
//! Fig 15).
//!
//! 0.5 Mbit/s bottleneck, 120 ms round-trip propagation delay, CBR cross
//! traffic. The audio uses rate callbacks (`cm_thresh`/`cmapp_update`) to
//! pick the highest of 10, 20, 40, 80, 160, 320 kbit/s encodings that fits
//! its share, in 1 KB packets. Expected: audio + TCP/CM together about what
//! NewReno gets (paper ≈ 65 + 85 vs 150 kbit/s), the audio mostly at
//! 80 kbit/s. The paper does not give the CBR rate; this experiment uses 150 kbit/s
//! (30% of the link), which leaves the three test flows about 117 kbit/s
//! each if shared per flow, 175 per side if shared per host.
//!
//! Besides the paper's path (DropTail queue of one bandwidth-delay product)
//! a [`Variant`] selects the controls that locate where the result departs
//! from the paper: the same path without the audio, with a second TCP/CM
//! transfer in its place (an ensemble of two TCPs instead of TCP + audio),
//! and an equal-loss path on which random loss rather than queue overflow
//! drops packets, so every flow sees the same loss rate.
//!
//! The simulation of one run is in [`simulation`]; this module sweeps it
//! and reports the experiment.

pub mod simulation;

use std::fmt::Write as _;

use serde_json::json;

use super::{ExperimentError, Opts, Output, check, progress};
use crate::plot::{Plot, Series, Style};
use crate::progress::par_map;
use simulation::{AudioRun, Companion, PathKind, Variant, run_with};

/// The paper's run and its controls, in the order they are reported.
const VARIANTS: [Variant; 5] = [
    Variant::PAPER,
    Variant {
        path: PathKind::DropTailBdp,
        companion: Companion::Nothing,
    },
    Variant {
        path: PathKind::DropTailBdp,
        companion: Companion::SecondTcpCm,
    },
    Variant {
        path: PathKind::EqualLoss,
        companion: Companion::Audio,
    },
    Variant {
        path: PathKind::EqualLoss,
        companion: Companion::Nothing,
    },
];

/// Means over the seeds of one variant.
struct Summary {
    newreno: f64,
    audio: f64,
    tcpcm: f64,
    tcpcm2: f64,
    loss_newreno: f64,
    loss_tcpcm: f64,
    loss_companion: f64,
    loss_cbr: f64,
}

impl Summary {
    fn of(runs: &[&AudioRun]) -> Summary {
        let mean = |f: &dyn Fn(&AudioRun) -> f64| {
            cm_report::stats::mean(&runs.iter().map(|r| f(r)).collect::<Vec<_>>())
        };
        Summary {
            newreno: mean(&|r| r.newreno_kbps),
            audio: mean(&|r| r.audio_kbps),
            tcpcm: mean(&|r| r.tcpcm_kbps),
            tcpcm2: mean(&|r| r.tcpcm2_kbps),
            loss_newreno: mean(&|r| r.loss.newreno),
            loss_tcpcm: mean(&|r| r.loss.tcpcm),
            loss_companion: mean(&|r| r.loss.companion),
            loss_cbr: mean(&|r| r.loss.cbr),
        }
    }

    /// The CM host's total over NewReno's.
    fn ratio(&self) -> f64 {
        (self.audio + self.tcpcm + self.tcpcm2) / self.newreno.max(1e-9)
    }
}

/// Every variant over ten seeds of 60 s. Single runs scatter widely (the
/// equal-loss ratio from 0.76 to 1.17 over seeds 1-10), and all 50 runs
/// take about 0.1 s, so `--quick` runs the whole experiment too.
pub fn run(opts: &Opts) -> Result<Output, ExperimentError> {
    let (secs, seeds) = (60, 10);
    let jobs: Vec<(u64, Variant)> = VARIANTS
        .iter()
        .flat_map(|&v| (1..=seeds).map(move |s| (s, v)))
        .collect();
    let bar = progress("layered-audio", jobs.len(), opts);
    let runs: Vec<AudioRun> = par_map(&jobs, opts.threads, &bar, |&(seed, v)| {
        run_with(secs, seed, v)
    })
    .into_iter()
    .collect::<Result<_, _>>()
    .map_err(|e| ExperimentError::Setup(e.to_string()))?;
    let mut csv = String::from(
        "variant,seed,newreno_kbps,audio_kbps,tcpcm_kbps,tcpcm2_kbps,loss_newreno,loss_tcpcm,loss_companion,loss_cbr,most_used_kbps\n",
    );
    for r in &runs {
        let _ = writeln!(
            csv,
            "{},{},{:.1},{:.1},{:.1},{:.1},{:.4},{:.4},{:.4},{:.4},{}",
            r.variant.label(),
            r.seed,
            r.newreno_kbps,
            r.audio_kbps,
            r.tcpcm_kbps,
            r.tcpcm2_kbps,
            r.loss.newreno,
            r.loss.tcpcm,
            r.loss.companion,
            r.loss.cbr,
            r.most_used_kbps
        );
    }
    let of = |v: Variant| -> Vec<&AudioRun> { runs.iter().filter(|r| r.variant == v).collect() };
    let [paper_v, ctrl_v, pair_v, eq_v, eq_ctrl_v] = VARIANTS;
    let paper = Summary::of(&of(paper_v));
    let ctrl = Summary::of(&of(ctrl_v));
    let pair = Summary::of(&of(pair_v));
    let eq = Summary::of(&of(eq_v));
    let eq_ctrl = Summary::of(&of(eq_ctrl_v));
    let mut enc: Vec<(u32, f64)> = Vec::new();
    for r in of(paper_v) {
        for &(k, s) in &r.time_at_encoding {
            match enc.iter_mut().find(|e| e.0 == k) {
                Some(e) => e.1 += s,
                None => enc.push((k, s)),
            }
        }
    }
    let most_used = enc
        .iter()
        .copied()
        .fold((0, -1.0), |b, e| if e.1 > b.1 { e } else { b })
        .0;
    let total: f64 = enc.iter().map(|e| e.1).sum();
    let summary = vec![
        format!(
            "paper path: newreno {:.0} kbit/s, audio {:.0}, tcpcm {:.0}, (audio+tcpcm)/newreno {:.2}",
            paper.newreno,
            paper.audio,
            paper.tcpcm,
            paper.ratio()
        ),
        format!(
            "paper path loss: newreno {:.1}%, tcpcm {:.1}%, audio {:.1}%, cbr {:.1}%",
            paper.loss_newreno * 100.0,
            paper.loss_tcpcm * 100.0,
            paper.loss_companion * 100.0,
            paper.loss_cbr * 100.0
        ),
        format!(
            "controls: no audio {:.2}, two tcpcm {:.2}; equal loss: audio {:.0} + tcpcm {:.0} vs newreno {:.0} = {:.2} (no audio {:.2})",
            ctrl.ratio(),
            pair.ratio(),
            eq.audio,
            eq.tcpcm,
            eq.newreno,
            eq.ratio(),
            eq_ctrl.ratio()
        ),
        format!("most used encoding {most_used} kbit/s"),
    ];
    Ok(Output {
        name: "layered-audio".into(),
        csv,
        plot: Plot {
            title: "Layered audio: time at each encoding (sigcomm1999 Fig 15)".into(),
            x_label: "encoding (kbit/s)".into(),
            y_label: "fraction of time".into(),
            series: vec![Series {
                label: "audio over the CM".into(),
                points: enc.iter().map(|&(k, s)| (f64::from(k), s / total.max(1e-9))).collect(),
                style: Style::Scatter,
            }],
        },
        metrics: json!({
            "newreno_kbps": paper.newreno, "audio_kbps": paper.audio, "tcpcm_kbps": paper.tcpcm,
            "cm_over_newreno": paper.ratio(), "most_used_kbps": most_used, "time_at_encoding_s": enc,
            "loss_newreno": paper.loss_newreno, "loss_tcpcm": paper.loss_tcpcm,
            "loss_audio": paper.loss_companion, "loss_cbr": paper.loss_cbr,
            "control_tcpcm_over_newreno": ctrl.ratio(),
            "two_tcpcm_over_newreno": pair.ratio(),
            "equal_loss_cm_over_newreno": eq.ratio(),
            "equal_loss_audio_kbps": eq.audio, "equal_loss_tcpcm_kbps": eq.tcpcm,
            "equal_loss_newreno_kbps": eq.newreno,
            "equal_loss_control_tcpcm_over_newreno": eq_ctrl.ratio(),
            "seeds": seeds, "seconds": secs,
        }),
        paper: json!({"newreno_kbps": 150, "audio_kbps": 65, "tcpcm_kbps": 85, "most_used_kbps": 80}),
        checks: vec![
            check("cm_over_newreno", paper.ratio(), "≈ 1.0 (150 vs 65+85)", "within 20%", (0.8..=1.2).contains(&paper.ratio())),
            check("most_used_kbps", f64::from(most_used), "80", "= 80", most_used == 80),
            check("two_tcpcm_over_newreno", pair.ratio(), "— (an ensemble behaves as one TCP, §4.1)", "within 20%", (0.8..=1.2).contains(&pair.ratio())),
            check("equal_loss_cm_over_newreno", eq.ratio(), "≈ 1.0 (the claim where every flow sees the same loss rate)", "within 20%", (0.8..=1.2).contains(&eq.ratio())),
        ],
        notes: vec![
            "Paper path: 0.5 Mbit/s, 60 ms one way, DropTail queue = BDP (7500 B, about 5 packets); 150 kbit/s CBR cross traffic in 1000-byte packets (the paper gives no rate); audio (cm_thresh 25%) and TCP/CM on one CM host to one receiver, NewReno from another host. Controls on the same path: the CM host without the audio, and with a second TCP/CM transfer in its place. Equal-loss path: the same link with a 100-packet queue and 5% random loss, so drops hit every flow at the same rate.".into(),
            "Claim not reproduced on the paper path: audio + TCP/CM get cm_over_newreno (about 1.6 over seeds 1-10) of NewReno there, where the paper has 1.0. Where it departs, with evidence from this run's controls: (1) the CM host's ensemble logic is not the cause: with two TCP/CM transfers in the macroflow instead of TCP + audio, the host gets about what NewReno gets (two_tcpcm_over_newreno), and on the equal-loss path the audio + TCP/CM match NewReno within 20% with a split close to the paper's (equal_loss_*: 61 + 97 vs 166 kbit/s, the paper's 65 + 85 vs 150); (2) the DropTail queue is: it drops the smooth, 1 KB audio packets several times less often than TCP's bursts (loss_audio and loss_cbr against loss_newreno), and the CM correctly backs off only for the losses its flows see, so a macroflow that carries smooth traffic sees fewer congestion signals per byte than one Reno and takes more (TCP's rate goes as 1/sqrt(p)). This bias is not an artefact of this simulator: scripts/ns3-droptail-bias.sh runs the path with no CM (two NewReno, the 150 kbit/s CBR and an 80 kbit/s stream of 1000-byte datagrams, 10 seeds of 60 s) in ns-3.37 and in this simulator; smooth streams lose 0.40x TCP's rate in ns-3 and 0.31x in this one with the 7500-byte queue (4.3% vs 10.9%; 3.7% vs 12.0%), 0.42x and 0.32x with a 5-packet queue. The same audio macroflow against a lone, equally paced TCP/CM (not a variant here; experiments/scenarios/layered-audio-*.toml with transport = \"tcpcm\" for the competitor, 10 seeds) gets 1.53x: the advantage is the audio's, not a NewReno artefact. Nothing was tuned to the number. The ns-2 referee (`cargo run --release -p cm -- referee layered-audio`, docs/referee.md) runs the same no-CM path in ns-2, the paper's simulator: with this 7500-byte queue the smooth streams lose 0.33x TCP's loss rate there (0.29x here), and with ns's defaults, a queue of 7 packets and 1000-byte TCP packets (experiments/scenarios/droptail-bias-packets.toml), the bias is gone in both simulators (about 1.1x in ns-2 and 1.2x here). The paper's ≈ 1 is what a packet-mode queue gives, a setting its text does not state; with it this simulator's cm_over_newreno is about 1.3.".into(),
            "Four behaviours this path depends on have regression tests named after them: (1) TCP/CM reports the three segments behind the third duplicate ACK as departed, so that with a window under 8 segments the halved CM window has room for the retransmission; (2) the CM does not grow its window from data reported during fast recovery (RFC 6582 §3.2); (3) a timeout ending a failed recovery, or a repeated timeout, does not halve ssthresh again, and exponential aging while waiting for the RTO does not shrink the window the timeout's ssthresh is taken from (RFC 5681 §3.1); (4) the self-clocked audio, charged to the macroflow but not window-limited and reporting every 100 ms, does not grow the shared window faster than one TCP per RTT. Without them the no-audio control reads about 0.88 instead of 1.1; the paper-path ratio does not depend on them.".into(),
        ],
        summary,
    })
}
