//! `cm referee`: run the baseline half of the simulated figures in ns-2 and
//! in this simulator, and print them side by side with the paper's figure.

use std::path::PathBuf;

use anyhow::{Context, bail};
use cm_experiments::referee::{self, EXPERIMENTS, Select};
use cm_transport::tcp::{RtoInRecovery, SsthreshRule};

/// Arguments of `cm referee`.
#[derive(Debug, clap::Args)]
pub struct RefereeArgs {
    /// Experiments to referee (default: every one with a referee:
    /// tcp-friendly, seq-trace, web4, sharing, layered-audio,
    /// tfrc-friendly, scalability-t1).
    pub experiments: Vec<String>,
    /// Short scenarios and fewer conditions (what the tests run).
    #[arg(long)]
    pub quick: bool,
    /// Seeds per condition (default 10; 2 with --quick).
    #[arg(long)]
    pub seeds: Option<u64>,
    /// Also run every TCP case with SACK (ours RFC 6675, ns-2 Sack1).
    #[arg(long)]
    pub sack: bool,
    /// Write `referee.md` and one `<experiment>.json` referee block each here.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// This simulator's NewReno ssthresh rule for every TCP flow:
    /// flightsize (the default: RFC 5681), pipe (ns-3) or cwnd (Linux,
    /// ns-2). ns-2 always halves cwnd.
    #[arg(long, value_name = "RULE")]
    pub ssthresh: Option<SsthreshRule>,
    /// This simulator's ssthresh for a timeout inside recovery on every TCP
    /// flow: keep (the default: Linux) or halve (ns-2).
    #[arg(long, value_name = "RULE")]
    pub rto_in_recovery: Option<RtoInRecovery>,
    /// Also write every case's first-seed scenarios here as TOML files
    /// (`<experiment>-<n>.toml` for ns-2's side, `-cm.toml` for the CM half),
    /// to rerun one with `cm sim FILE` and `cm sim FILE --ns2`.
    #[arg(long, value_name = "DIR")]
    pub scenarios: Option<PathBuf>,
    /// Worker threads.
    #[arg(long, default_value_t = 2)]
    pub threads: usize,
    /// Exit with status 1 unless every condition is within the tolerances
    /// (metric 10%, drops 20% of ns-2's).
    #[arg(long)]
    pub check: bool,
}

/// Runs `cm referee`; `Ok(false)` when `--check` found a condition out of tolerance.
pub fn run(a: &RefereeArgs) -> anyhow::Result<bool> {
    for e in &a.experiments {
        if !EXPERIMENTS.contains(&e.as_str()) {
            bail!(
                "no referee for {e:?} (experiments with one: {})",
                EXPERIMENTS.join(", ")
            );
        }
    }
    if !cm_experiments::ns2::available() {
        bail!(
            "ns-2 is not installed: `{}` does not run (apt-get install ns2, or scripts/ns2-referee.sh as root; CM_NS2 names another binary)",
            cm_experiments::ns2::binary().display()
        );
    }
    let sel = Select::new(a.quick, a.seeds, a.sack);
    let names: Vec<&str> = a.experiments.iter().map(String::as_str).collect();
    let tweak = |c: &mut referee::Case| {
        for s in c.runs.iter_mut().chain(c.cm.iter_mut().flatten()) {
            for f in &mut s.flows {
                if matches!(f.transport.as_str(), "newreno" | "web") {
                    if let Some(r) = a.ssthresh {
                        f.ssthresh = Some(r.name().into());
                    }
                    if let Some(r) = a.rto_in_recovery {
                        f.rto_in_recovery = Some(r.name().into());
                    }
                }
            }
        }
    };
    if let Some(dir) = &a.scenarios {
        write_scenarios(dir, &names, sel, &tweak)?;
    }
    // The progress bar only where a person watches (not in CI logs).
    let quiet = !std::io::IsTerminal::is_terminal(&std::io::stderr());
    let verdicts = referee::judge_experiments(&names, sel, a.threads.max(1), quiet, tweak)?;
    let table = referee::table(&verdicts);
    println!("{table}");
    let judged = verdicts.iter().filter(|v| v.judged).count();
    let failed = verdicts.iter().filter(|v| v.judged && !v.pass).count();
    println!(
        "{} of {judged} judged conditions within tolerance (baselines: 10% metric, 20% drops; TCP/CM against ns-2's baseline: 20%)",
        judged - failed,
    );
    if let Some(dir) = &a.out {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let md = dir.join("referee.md");
        std::fs::write(&md, &table).with_context(|| format!("writing {}", md.display()))?;
        for n in EXPERIMENTS
            .iter()
            .filter(|n| verdicts.iter().any(|v| v.experiment == **n))
        {
            let p = dir.join(format!("{n}.json"));
            let text = serde_json::to_string_pretty(&referee::block(n, &verdicts))?;
            std::fs::write(&p, text).with_context(|| format!("writing {}", p.display()))?;
        }
        eprintln!("wrote {}", dir.display());
    }
    Ok(!a.check || failed == 0)
}

/// Writes each case's first-seed scenarios of `names` (all if empty) as TOML.
fn write_scenarios(
    dir: &std::path::Path,
    names: &[&str],
    sel: Select,
    tweak: &impl Fn(&mut referee::Case),
) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let all = if names.is_empty() { EXPERIMENTS } else { names };
    let mut n = 0;
    for e in all {
        for (k, mut c) in referee::cases(Some(e), sel)?.into_iter().enumerate() {
            tweak(&mut c);
            let cm = c.cm.as_ref().and_then(|v| v.first());
            for (suffix, s) in [("", c.runs.first()), ("-cm", cm)] {
                let Some(s) = s else { continue };
                let p = dir.join(format!("{e}-{}{suffix}.toml", k + 1));
                let text = format!("# {e}: {}\n{}", c.condition, s.to_toml()?);
                std::fs::write(&p, text).with_context(|| format!("writing {}", p.display()))?;
                n += 1;
            }
        }
    }
    eprintln!("wrote {n} scenario files to {}", dir.display());
    Ok(())
}
