//! `cm experiment`: run the papers' experiments and write CSV, SVG, JSON
//! (and `report.md` for `all`).

use std::path::PathBuf;
use std::time::Instant;

use cm_experiments::experiments::{self, EXPERIMENTS, Opts};

/// Arguments of `cm experiment`.
#[derive(Debug, clap::Args)]
pub struct ExperimentArgs {
    /// Experiment name, `all`, or `list`.
    pub name: String,
    /// Output directory.
    #[arg(long, default_value = "experiment-out")]
    pub out: PathBuf,
    /// Small, fast variant (fewer seeds and conditions).
    #[arg(long)]
    pub quick: bool,
    /// Worker threads for multi-run sweeps.
    #[arg(long, default_value_t = 2)]
    pub threads: usize,
}

/// Runs `cm experiment`.
pub fn run_experiment(a: &ExperimentArgs) -> anyhow::Result<()> {
    if a.name == "list" {
        for (n, d, _) in EXPERIMENTS {
            println!("{n:14} {d}");
        }
        return Ok(());
    }
    let opts = Opts {
        quick: a.quick,
        quiet: false,
        threads: a.threads.max(1),
    };
    let names: Vec<&str> = if a.name == "all" {
        EXPERIMENTS.iter().map(|(n, _, _)| *n).collect()
    } else {
        vec![a.name.as_str()]
    };
    let mut outs = Vec::new();
    for n in names {
        let t0 = Instant::now();
        let o = experiments::run(n, &opts)?;
        experiments::write(&o, &a.out)?;
        for c in &o.checks {
            println!(
                "{n}: {} = {:.3} (paper {}, accept {}) {}",
                c.metric,
                c.ours,
                c.paper,
                c.accept,
                if c.pass { "PASS" } else { "FAIL" }
            );
        }
        eprintln!(
            "{n}: {:.1} s, wrote {}/{n}.{{csv,svg,json}}",
            t0.elapsed().as_secs_f64(),
            a.out.display()
        );
        outs.push(o);
    }
    if a.name == "all" {
        let path = a.out.join("report.md");
        std::fs::write(&path, experiments::report(&outs, a.quick))?;
        eprintln!("wrote {}", path.display());
    }
    Ok(())
}
