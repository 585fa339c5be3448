//! sigcomm1999 §5.2 / Fig 15: audio + TCP/CM on one CM host get about what
//! one NewReno gets (within 20%), and the audio mostly uses 80 kbit/s.

#![allow(clippy::unwrap_used)]

use cm_experiments::layered_audio::run;

/// Known failing (open finding, issue 3): the audio does mostly use
/// 80 kbit/s as in the paper, but audio + TCP/CM get about 1.8x NewReno
/// (seeds 1-3 after the fixes below: 229/101, 206/125, 206/130 kbit/s).
///
/// Four real bugs were found and fixed on the way, each with a regression
/// test: TCP/CM did not report the three segments behind the third
/// duplicate ACK (`regression_third_dupack_reports_the_three_departed_segments`,
/// cm-transport; the no-audio 4-BDP control scenario went from 0.48x to
/// 0.97x NewReno with it, 0.80x with all fixes; 30-seed mean 0.74 -> 0.84), and the CM's AIMD grew during fast recovery, halved ssthresh
/// twice per episode, let aging shrink the timeout's ssthresh, and let the
/// unwindowed audio's feedback grow the window faster than one TCP per RTT
/// (`regression_*` in cm-core's `controller::aimd`). They did not move this
/// ratio (1.81 before and after, 3 seeds; 1.89 -> 1.84 over 30 seeds).
///
/// The audio is charged to the macroflow exactly as sigcomm1999 §3.2.2 /
/// §5.2 describe (every packet notified, no grants, encoding from its share
/// of the rate on `cmapp_update`, receiver feedback through `cm_update`),
/// and the byte accounting is exact. What remains, with evidence in the
/// experiment's notes: at the 5-packet DropTail queue NewReno sees about
/// twice TCP/CM's and four times the audio's loss rate and spends much of
/// the run in timeouts (about 50 per minute, windows of 3-6 segments, no
/// limited transmit), while the rate-clocked audio keeps the macroflow
/// sending through TCP/CM's timeouts. The assertion stays as the paper
/// states it.
#[test]
#[ignore = "known failing: audio + TCP/CM get 1.8x NewReno, see doc comment"]
fn audio_and_tcpcm_together_match_newreno_and_audio_mostly_at_80k() {
    let mut ratio_sum = 0.0;
    let seeds = [1, 2, 3];
    for seed in seeds {
        let r = run(60, seed).unwrap();
        eprintln!(
            "seed {seed}: newreno {:.0} audio {:.0} tcpcm {:.0} kbit/s; encodings {:?}",
            r.newreno_kbps, r.audio_kbps, r.tcpcm_kbps, r.time_at_encoding
        );
        ratio_sum += (r.audio_kbps + r.tcpcm_kbps) / r.newreno_kbps;
        assert_eq!(
            r.most_used_kbps, 80,
            "seed {seed}: {:?}",
            r.time_at_encoding
        );
    }
    let ratio = ratio_sum / seeds.len() as f64;
    assert!(
        (0.8..=1.2).contains(&ratio),
        "(audio+tcpcm)/newreno = {ratio:.3}"
    );
}

/// The control run: without the audio, TCP/CM on the CM host against one
/// NewReno is TCP-friendly (sigcomm1999 §4.1), so the layered-audio gap is
/// not TCP/CM's own.
#[test]
fn control_without_audio_tcpcm_is_tcp_friendly() {
    let seeds = [1, 2, 3];
    let mut ratio = 0.0;
    for seed in seeds {
        let r = cm_experiments::layered_audio::run_with(60, seed, false).unwrap();
        eprintln!(
            "control seed {seed}: newreno {:.0} tcpcm {:.0}",
            r.newreno_kbps, r.tcpcm_kbps
        );
        ratio += r.tcpcm_kbps / r.newreno_kbps / seeds.len() as f64;
    }
    assert!(
        (0.8..=1.25).contains(&ratio),
        "tcpcm/newreno without audio = {ratio:.3}"
    );
}
