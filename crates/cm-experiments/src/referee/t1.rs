//! `scalability-t1` beside ns-2: the loss `p_n` of `n` flows of AIMD, IIAD
//! and TFRC on the T1 in this simulator (the experiment's NACK-based,
//! rate-paced streams with its calibrated parameters) and in ns-2 (window
//! binomial TCP and `Agent/TCP`'s TFRC: [`crate::ns2::t1`]), with SQRT in
//! ns-2 only (the experiment has no SQRT scheme). The two are different
//! models of each scheme, so the rows are shown, not judged.

use super::{RefereeError, Verdict};
use crate::experiments::scalability_t1::simulation::{self, Scheme, T1Params};
use crate::experiments::scalability_t1::{PAPER, params, sizes};
use crate::ns2::t1::{self as ns2t1, SCHEMES, T1Scheme};
use crate::progress::{Progress, par_map};

/// ns-2's measurement starts this long after the last flow started (the
/// window schemes leave slow start within a few round trips).
const SETTLE_S: f64 = 20.0;

/// Our scheme for an ns-2 one, if the experiment has it.
fn ours_of(s: T1Scheme) -> Option<Scheme> {
    match s.name() {
        "AIMD" => Some(Scheme::Aimd),
        "IIAD" => Some(Scheme::Iiad),
        "TFRC" => Some(Scheme::Tfrc),
        _ => None,
    }
}

/// One job: ours (calibrated) or ns-2's run of a scheme at `n` flows.
enum Job {
    Ours(Scheme, T1Params),
    Ns2(T1Scheme, T1Params),
}

/// Every scheme at every `n` of the experiment's sweep (quick: its quick
/// sweep), in both simulators.
pub fn judge(quick: bool, threads: usize, quiet: bool) -> Result<Vec<Verdict>, RefereeError> {
    let (ns, after, steps, calib_s) = sizes(quick);
    let ours: Vec<Scheme> = SCHEMES.iter().filter_map(|&s| ours_of(s)).collect();
    let bar = Progress::new("referee scalability-t1 calibration", ours.len(), quiet);
    let calib = par_map(&ours, threads, &bar, |&s| {
        simulation::calibrate(s, &params(s, 2, calib_s, None), steps)
    });
    let mut jobs = Vec::new();
    for (&s, c) in ours.iter().zip(calib) {
        let (param, _) = c.map_err(|e| RefereeError::Case(e.to_string()))?;
        for &n in &ns {
            jobs.push(Job::Ours(s, params(s, n, after, Some(param))));
        }
    }
    for &s in &SCHEMES {
        for &n in &ns {
            jobs.push(Job::Ns2(s, params(Scheme::Aimd, n, after, None)));
        }
    }
    let bar = Progress::new("referee scalability-t1", jobs.len(), quiet);
    let losses = par_map(&jobs, threads, &bar, |j| match j {
        Job::Ours(_, p) => simulation::run(p)
            .map(|r| (r.loss, r.packets as f64 * r.loss))
            .map_err(|e| RefereeError::Case(e.to_string())),
        Job::Ns2(s, p) => {
            let from = p.stagger_s * p.n.saturating_sub(1) as f64 + SETTLE_S;
            ns2t1::run(p, *s, from)
                .map(|r| (r.loss(), r.drops as f64))
                .map_err(RefereeError::from)
        }
    });
    let mut got = Vec::new();
    for (j, l) in jobs.iter().zip(losses) {
        got.push((j, l?));
    }
    let mut out = Vec::new();
    for &s in &SCHEMES {
        for &n in &ns {
            let ns2 = got.iter().find_map(|(j, l)| match j {
                Job::Ns2(x, p) if *x == s && p.n == n => Some(*l),
                _ => None,
            });
            let ours = got.iter().find_map(|(j, l)| match j {
                Job::Ours(x, p) if Some(*x) == ours_of(s) && p.n == n => Some(*l),
                _ => None,
            });
            let Some((ns2_loss, ns2_drops)) = ns2 else {
                continue;
            };
            let paper = PAPER
                .iter()
                .find(|(x, _, _)| Some(*x) == ours_of(s))
                .and_then(|&(_, p2, p50)| match n {
                    2 => Some(p2),
                    50 => Some(p50),
                    _ => None,
                });
            let (o, od) = ours.unwrap_or((f64::NAN, f64::NAN));
            out.push(Verdict {
                experiment: "scalability-t1".into(),
                condition: format!(
                    "{}, n = {n} (ns-2: {})",
                    s.name(),
                    if s == T1Scheme::Tfrc {
                        "Agent/TFRC"
                    } else {
                        "window binomial TCP"
                    }
                ),
                metric: "loss_rate".into(),
                seeds: 1,
                ours: o,
                ns2: ns2_loss,
                delta: o / ns2_loss - 1.0,
                ours_drops: od,
                ns2_drops,
                drops_delta: od / ns2_drops - 1.0,
                paper,
                paper_text: paper.map(|p| format!("p_{n} = {p}")),
                relative: true,
                judged: false,
                pass: true,
            });
        }
    }
    Ok(out)
}
