//! `scalability-t1` beside ns-2: the loss `p_n` of `n` flows of AIMD, IIAD
//! and TFRC on the T1 in this simulator (the experiment's NACK-based,
//! rate-paced streams with its calibrated parameters) and in ns-2 (window
//! binomial TCP and `Agent/TCP`'s TFRC: [`crate::ns2::t1`]), with SQRT in
//! ns-2 only (the experiment has no SQRT scheme). The two are different
//! models of each scheme, so the rows are shown, not judged.

use super::{RefereeError, Verdict};
use crate::experiments::Opts;
use crate::experiments::scalability_t1::simulation::{Scheme, T1Params};
use crate::experiments::scalability_t1::{PAPER, params, sizes, sweep};
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

/// Every scheme at every `n` of the experiment's sweep (quick: its quick
/// sweep): ours from the experiment's own sweep, ns-2's on the same network.
pub fn judge(quick: bool, threads: usize, quiet: bool) -> Result<Vec<Verdict>, RefereeError> {
    let opts = Opts {
        quick,
        quiet,
        threads,
    };
    let ours_runs = sweep(&opts)
        .map_err(|e| RefereeError::Case(e.to_string()))?
        .runs;
    let (ns, after, _, _) = sizes(quick);
    // The script reads only the network from the parameters (n, stagger,
    // queue, seed, length), not the scheme.
    let jobs: Vec<(T1Scheme, T1Params)> = SCHEMES
        .iter()
        .flat_map(|&s| {
            ns.iter()
                .map(move |&n| (s, params(Scheme::Aimd, n, after, None)))
        })
        .collect();
    let bar = Progress::new("referee scalability-t1", jobs.len(), quiet);
    let ns2_runs = par_map(&jobs, threads, &bar, |(s, p)| {
        let from = p.stagger_s * p.n.saturating_sub(1) as f64 + SETTLE_S;
        ns2t1::run(p, *s, from)
    });
    let mut out = Vec::new();
    for ((s, p), r) in jobs.iter().zip(ns2_runs) {
        let (s, n) = (*s, p.n);
        let r = r?;
        let (ns2_loss, ns2_drops) = (r.loss(), r.drops as f64);
        let ours = ours_runs
            .iter()
            .find(|r| {
                Some(r.params.scheme) == ours_of(s) && r.params.param.is_some() && r.params.n == n
            })
            .map(|r| (r.loss, r.packets as f64 * r.loss));
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
    Ok(out)
}
