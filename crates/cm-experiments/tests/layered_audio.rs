//! sigcomm1999 §5.2 / Fig 15: audio + TCP/CM on one CM host get about what
//! one NewReno gets (within 20%), and the audio mostly uses 80 kbit/s.

#![allow(clippy::unwrap_used)]

use cm_experiments::experiments::layered_audio::simulation::{
    AudioRun, Companion, PathKind, Variant, run_with,
};

fn variant(path: PathKind, companion: Companion) -> Variant {
    Variant { path, companion }
}

/// Seeds 1-3 of 60 s runs of `v`.
fn runs(v: Variant) -> Vec<AudioRun> {
    [1, 2, 3]
        .into_iter()
        .map(|s| {
            let r = run_with(60, s, v).unwrap();
            eprintln!(
                "{} seed {s}: newreno {:.0} audio {:.0} tcpcm {:.0} tcpcm2 {:.0}; loss {:?}; encodings {:?}",
                v.label(),
                r.newreno_kbps,
                r.audio_kbps,
                r.tcpcm_kbps,
                r.tcpcm2_kbps,
                r.loss,
                r.time_at_encoding
            );
            r
        })
        .collect()
}

/// The mean of `f` over `runs`.
fn mean(runs: &[AudioRun], f: impl Fn(&AudioRun) -> f64) -> f64 {
    cm_report::stats::mean(&runs.iter().map(f).collect::<Vec<_>>())
}

fn host_over_newreno(r: &AudioRun) -> f64 {
    (r.audio_kbps + r.tcpcm_kbps + r.tcpcm2_kbps) / r.newreno_kbps
}

/// Known failing (open finding, issue 3): the audio does mostly use
/// 80 kbit/s as in the paper, but on the paper's path (DropTail queue of one
/// BDP) audio + TCP/CM get about 1.7x NewReno (10 seeds: 86 + 122 vs 124
/// kbit/s).
///
/// The tests below locate the cause: the CM's ensemble logic matches one
/// TCP (two TCP/CM transfers in the macroflow get about NewReno's share),
/// and where drops hit every flow alike (random loss, deep queue) the audio
/// and TCP/CM together match NewReno with the paper's split. The DropTail queue drops
/// the smooth audio (and the CBR) about four times less often than
/// NewReno's bursts, and the CM backs off for the losses its flows see.
/// The assertion stays as the paper states it.
#[test]
#[ignore = "known failing: audio + TCP/CM get 1.7x NewReno on the paper path, see doc comment"]
fn audio_and_tcpcm_together_match_newreno_and_audio_mostly_at_80k() {
    let rs = runs(Variant::PAPER);
    for r in &rs {
        assert_eq!(
            r.most_used_kbps, 80,
            "seed {}: {:?}",
            r.seed, r.time_at_encoding
        );
    }
    let ratio = mean(&rs, host_over_newreno);
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
    let rs = runs(variant(PathKind::DropTailBdp, Companion::Nothing));
    let ratio = mean(&rs, host_over_newreno);
    assert!(
        (0.8..=1.25).contains(&ratio),
        "tcpcm/newreno without audio = {ratio:.3}"
    );
}

/// sigcomm1999 §4.1 on the paper's path: two TCP/CM transfers sharing one
/// macroflow get about what one NewReno gets, so the macroflow's ensemble
/// logic is not what makes the audio's host take more.
#[test]
fn two_tcpcm_transfers_on_one_cm_get_about_one_newrenos_share() {
    let rs = runs(variant(PathKind::DropTailBdp, Companion::SecondTcpCm));
    let ratio = mean(&rs, host_over_newreno);
    assert!(
        (0.8..=1.2).contains(&ratio),
        "two tcpcm / newreno = {ratio:.3}"
    );
}

/// The paper's claim where drops hit every flow alike (5% random loss,
/// a queue that rarely fills): audio + TCP/CM within 20% of NewReno.
#[test]
fn with_equal_loss_audio_and_tcpcm_together_match_newreno() {
    let rs = runs(variant(PathKind::EqualLoss, Companion::Audio));
    let ratio = mean(&rs, host_over_newreno);
    assert!(
        (0.8..=1.2).contains(&ratio),
        "(audio+tcpcm)/newreno = {ratio:.3}"
    );
}

/// What differs on the paper's path: the DropTail queue drops the smooth
/// audio far less often than NewReno's bursts.
#[test]
fn droptail_drops_the_smooth_audio_less_often_than_newreno() {
    let rs = runs(Variant::PAPER);
    let audio = mean(&rs, |r| r.loss.companion);
    let newreno = mean(&rs, |r| r.loss.newreno);
    assert!(
        audio * 2.0 < newreno,
        "loss: audio {audio:.3}, newreno {newreno:.3}"
    );
}
