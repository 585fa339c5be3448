//! `layered-audio` (sigcomm1999 §5.2, Fig 15): see [`crate::layered_audio`].

use std::fmt::Write as _;

use serde_json::json;

use super::{ExperimentError, Opts, Output, check, progress};
use crate::layered_audio::{AudioRun, run_with};
use crate::plot::{Plot, Series, Style};
use crate::progress::par_map;

/// Three seeds with the audio, and the same without it as a control.
pub fn run(opts: &Opts) -> Result<Output, ExperimentError> {
    let secs = if opts.quick { 30 } else { 60 };
    let jobs: Vec<(u64, bool)> = [1, 2, 3]
        .into_iter()
        .flat_map(|s| [(s, true), (s, false)])
        .collect();
    let bar = progress("layered-audio", jobs.len(), opts);
    let runs: Vec<AudioRun> = par_map(&jobs, opts.threads, &bar, |&(seed, audio)| {
        run_with(secs, seed, audio)
    })
    .into_iter()
    .collect::<Result<_, _>>()
    .map_err(|e| ExperimentError::Setup(e.to_string()))?;
    let mut csv = String::from("seed,audio,newreno_kbps,audio_kbps,tcpcm_kbps,most_used_kbps\n");
    for (r, &(_, a)) in runs.iter().zip(&jobs) {
        let _ = writeln!(
            csv,
            "{},{a},{:.1},{:.1},{:.1},{}",
            r.seed, r.newreno_kbps, r.audio_kbps, r.tcpcm_kbps, r.most_used_kbps
        );
    }
    let with: Vec<&AudioRun> = runs
        .iter()
        .zip(&jobs)
        .filter(|(_, j)| j.1)
        .map(|(r, _)| r)
        .collect();
    let ctrl: Vec<&AudioRun> = runs
        .iter()
        .zip(&jobs)
        .filter(|(_, j)| !j.1)
        .map(|(r, _)| r)
        .collect();
    let mean = |v: &[&AudioRun], f: fn(&AudioRun) -> f64| {
        v.iter().map(|r| f(r)).sum::<f64>() / v.len().max(1) as f64
    };
    let newreno = mean(&with, |r| r.newreno_kbps);
    let audio = mean(&with, |r| r.audio_kbps);
    let tcpcm = mean(&with, |r| r.tcpcm_kbps);
    let ratio = (audio + tcpcm) / newreno;
    let ctrl_ratio = mean(&ctrl, |r| r.tcpcm_kbps) / mean(&ctrl, |r| r.newreno_kbps);
    let mut enc: Vec<(u32, f64)> = Vec::new();
    for r in &with {
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
            "newreno {newreno:.0} kbit/s, audio {audio:.0}, tcpcm {tcpcm:.0}, (audio+tcpcm)/newreno {ratio:.2}"
        ),
        format!("control without audio: tcpcm/newreno {ctrl_ratio:.2}"),
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
        metrics: json!({"newreno_kbps": newreno, "audio_kbps": audio, "tcpcm_kbps": tcpcm,
                        "cm_over_newreno": ratio, "control_tcpcm_over_newreno": ctrl_ratio,
                        "most_used_kbps": most_used, "time_at_encoding_s": enc}),
        paper: json!({"newreno_kbps": 150, "audio_kbps": 65, "tcpcm_kbps": 85, "most_used_kbps": 80}),
        checks: vec![
            check("cm_over_newreno", ratio, "≈ 1.0 (150 vs 65+85)", "within 20%", (0.8..=1.2).contains(&ratio)),
            check("most_used_kbps", f64::from(most_used), "80", "= 80", most_used == 80),
        ],
        notes: vec![
            "0.5 Mbit/s, 60 ms one way, queue = BDP (about 5 packets); 150 kbit/s CBR cross traffic (the paper gives no rate); audio (cm_thresh 25%) and TCP/CM on one CM host to one receiver, NewReno from another host.".into(),
            "Bugs found and fixed while investigating (issue 3; regression tests named after each): (1) TCP/CM did not report the three segments behind the third duplicate ACK as departed, so with a window under 8 segments the halved CM window had no room for the retransmission and every single loss waited for the RTO (this was the 4-BDP no-audio control at 0.48x NewReno; that scenario file gives 0.97x with this fix alone and 0.80x with all four, 30-seed mean 0.74 -> 0.84); (2) the CM grew its window from data reported during fast recovery (RFC 6582 §3.2); (3) a timeout ending a failed recovery, or a repeated timeout, halved ssthresh again, and exponential aging while waiting for the RTO shrank the window the timeout's ssthresh was taken from (RFC 5681 §3.1); (4) the self-clocked audio, charged to the macroflow but not window-limited and reporting every 100 ms, grew the shared window faster than one TCP per RTT (after a timeout, 1 MTU to 3-4 MTU in one RTT). Fixing them left this metric where it was (1.81 over 3 seeds before and after; 30-seed scenario sweeps below); the control without audio went from 0.88 to 1.18 (3 seeds).".into(),
            "Still open (claim not reproduced): audio + TCP/CM stay at about 1.8x NewReno at the 1-BDP queue. The audio is charged exactly as the paper's audio server would be (cm_notify for every packet, no grants, sigcomm1999 §3.2.2 'the CM does not shape such traffic'; encoding picked on cmapp_update from its share of window/srtt; receiver reports every 100 ms turned into cm_update with loss as TRANSIENT), and byte accounting is exact. Evidence over 30 seeds with 100 ms start jitter (experiments/scenarios/layered-audio-q{1,2,4}-{audio,control}.toml, mean (audio+TCP/CM)/NewReno before -> after the fixes): 1 BDP 1.89 -> 1.84 with audio, 0.96 -> 1.15 control; 2 BDP 1.56 -> 1.49, control 0.99 -> 0.98; 4 BDP 1.52 -> 1.37, control 0.74 -> 0.84. What remains: (a) at the 5-packet DropTail queue the flows see very different loss rates (NewReno 13.9%, paced TCP/CM 7.7%, smooth audio 3.3%), and NewReno, with windows of 3-6 segments and no limited transmit, spends much of the run in timeouts (about 50 per 60 s, 17 s silent in a typical run) while the rate-clocked audio keeps the macroflow sending through TCP/CM's timeouts; (b) at deep queues TCP/CM's fast retransmission waits for a CM grant until the halved window has room (about half a window of duplicate ACKs, 0.3 s at the 4-BDP queue) where NewReno retransmits at once (RFC 5681 §3.2 step 3), so with RTO = last new ACK + ~0.75 s and a 0.55 s RTT most TCP/CM recoveries end in a spurious timeout (4-BDP control: TCP/CM 8-10 timeouts and ~30 retransmits vs NewReno 5-9 and ~95). (b) needs a way for a retransmission to bypass the window in the CM API or in TCP/CM; not attempted here.".into(),
        ],
        summary,
    })
}
