//! sigcomm1999 §5.2 / Fig 15: audio + TCP/CM on one CM host get about what
//! one NewReno gets (within 20%), and the audio mostly uses 80 kbit/s.

#![allow(clippy::unwrap_used)]

use cm_experiments::layered_audio::run;

/// Known failing (open finding, issue 3): the audio does mostly use
/// 80 kbit/s as in the paper, but audio + TCP/CM get about 1.8x NewReno
/// (seeds 1-3: 222/106, 209/120, 207/127 kbit/s), while the control run
/// without the audio (the test below) shows TCP/CM alone TCP-friendly.
/// The CM's byte accounting for both flows is exact. Partly explained (see
/// the experiment's notes: the paced and smooth CM flows see a third of
/// NewReno's loss rate at the 5-packet queue, and the audio keeps feeding
/// the shared window through TCP/CM's timeouts); the assertion stays as the
/// paper states it.
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
