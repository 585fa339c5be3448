//! `cm experiment`: run the papers' experiments and write CSV, SVG, JSON
//! (and `report.md` for `all`).

use std::path::PathBuf;
use std::time::Instant;

use cm_experiments::experiments::{self, EXPERIMENTS, Opts};
use cm_experiments::referee::{self, Select};

/// Arguments of `cm experiment`.
#[derive(Debug, clap::Args)]
pub struct ExperimentArgs {
    /// Experiment name, `all` (every simulator experiment), `real` (every
    /// real-network experiment: needs root), or `list`.
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
    /// Also referee the experiment's baseline with ns-2 (`cm referee`,
    /// with SACK cases too) and add the `referee` block to its JSON. Needs
    /// ns-2 (`apt-get install ns2`); experiments without a referee are
    /// left as they are.
    #[arg(long)]
    pub referee: bool,
}

/// Runs `cm experiment`.
pub fn run_experiment(a: &ExperimentArgs) -> anyhow::Result<()> {
    if a.name == "list" {
        let rows: Vec<(&str, &str)> = EXPERIMENTS
            .iter()
            .map(|(n, d, _)| (*n, *d))
            .chain(cm_real::EXPERIMENTS.iter().map(|(n, d, _)| (*n, *d)))
            .collect();
        let w = rows.iter().map(|(n, _)| n.len()).max().unwrap_or(0);
        for (n, d) in rows {
            println!("{n:w$} {d}");
        }
        return Ok(());
    }
    if a.name == "real" || cm_real::is_real(&a.name) {
        let opts = cm_real::RealOpts {
            quick: a.quick,
            quiet: false,
        };
        let names: Vec<&str> = if a.name == "real" {
            cm_real::EXPERIMENTS.iter().map(|(n, _, _)| *n).collect()
        } else {
            vec![a.name.as_str()]
        };
        let report = (a.name == "real").then_some("report-real.md");
        // Ctrl-C or SIGTERM mid-run stops the programs the experiment
        // started and deletes its namespaces before exiting.
        cm_netem::teardown_on_signals("cm experiment")?;
        return run_each(a, &names, report, |n| Ok(cm_real::run(n, &opts)?));
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
    let report = (a.name == "all").then_some("report.md");
    run_each(a, &names, report, |n| Ok(experiments::run(n, &opts)?))
}

/// Runs `names` one after another with `run`, writing each one's files and
/// printing its checks, then the markdown `report` of them all if asked.
fn run_each(
    a: &ExperimentArgs,
    names: &[&str],
    report: Option<&str>,
    run: impl Fn(&str) -> anyhow::Result<experiments::Output>,
) -> anyhow::Result<()> {
    let mut outs = Vec::new();
    for &n in names {
        let t0 = Instant::now();
        let o = run(n)?;
        let mut json = o.json();
        if let (true, Some(doc)) = (
            a.referee && referee::EXPERIMENTS.contains(&n),
            json.as_object_mut(),
        ) {
            doc.insert("referee".into(), referee_block(a, n)?);
        }
        experiments::write_with(&o, &a.out, &json)?;
        print_checks(n, &o);
        eprintln!(
            "{n}: {:.1} s, wrote {}/{n}.{{csv,svg,json}}",
            t0.elapsed().as_secs_f64(),
            a.out.display()
        );
        outs.push(o);
    }
    if let Some(file) = report {
        let path = a.out.join(file);
        std::fs::write(&path, experiments::report(&outs, a.quick))?;
        eprintln!("wrote {}", path.display());
    }
    Ok(())
}

fn print_checks(n: &str, o: &experiments::Output) {
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
}

/// Runs `n`'s referee cases (ns-2 and ours), prints their table and
/// returns their `referee` block.
fn referee_block(a: &ExperimentArgs, n: &str) -> anyhow::Result<serde_json::Value> {
    let sel = Select::new(a.quick, None, true);
    let verdicts = referee::judge_experiments(&[n], sel, a.threads.max(1), false, |_| {})?;
    println!("{}", referee::table(&verdicts));
    Ok(referee::block(n, &verdicts))
}
