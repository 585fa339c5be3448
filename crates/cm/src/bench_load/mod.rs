//! `cm bench load`: the CM daemon at host scale.
//!
//! Starts its own `cmd` (the binary beside `cm`) on a socket in a fresh
//! temporary directory, connects N client threads to it (one
//! `libcm::Cm::connect` each), opens M flows per client over K destination
//! hosts in 198.18.0.0/15 (one macroflow per host), drives request /
//! notify / update / query for a fixed time, and prints what the daemon
//! delivered and what it cost. `--sweep` repeats that for several N and
//! draws latency and memory against N.
//!
//! One concept per module: `args` (options and their checks), `daemon`
//! (the daemon process), `crate::procfs` (its CPU, memory and descriptors),
//! `hist` (latency histograms), `client` (one client thread's loop),
//! `run` (one run: setup, phases, measurement), `report` (the table, the
//! verdicts against the targets and the sweep's plot).

pub(crate) mod args;
mod client;
pub(crate) mod daemon;
mod hist;
mod report;
mod run;

use clap::{Args, Subcommand};

pub use args::LoadArgs;

/// `cm bench ...`: benchmarks that need a running system.
#[derive(Debug, Args)]
pub struct BenchArgs {
    #[command(subcommand)]
    what: BenchCommand,
}

#[derive(Debug, Subcommand)]
enum BenchCommand {
    /// The CM daemon at host scale: N client threads, M flows each over K
    /// hosts, request/notify/update/query against a `cmd` this command
    /// starts (and stops); prints operations/s, query and grant latency
    /// percentiles, the daemon's CPU per operation, RSS and descriptors.
    Load(LoadArgs),
}

/// Run `cm bench ...`.
pub fn run(a: &BenchArgs) -> anyhow::Result<()> {
    match &a.what {
        BenchCommand::Load(l) => run_load(l),
    }
}

/// `cm bench load`: one run, or the sweep.
fn run_load(a: &LoadArgs) -> anyhow::Result<()> {
    let plan = a.plan()?;
    let mut results = Vec::new();
    let mut failed = Vec::new();
    report::print_header(&plan);
    for (i, cfg) in plan.runs.iter().enumerate() {
        if plan.runs.len() > 1 {
            eprintln!(
                "bench load: run {}/{}: {} clients, {} flows over {} hosts",
                i + 1,
                plan.runs.len(),
                cfg.clients,
                cfg.total_flows(),
                cfg.hosts
            );
        }
        match run::run_once(cfg) {
            Ok(r) => {
                report::print_row(&r);
                results.push(r);
            }
            // A sweep goes on with the next N and fails at the end.
            Err(e) if plan.runs.len() > 1 => {
                println!("{:>7} failed: {e:#}", cfg.clients);
                failed.push(format!("N={}: {e:#}", cfg.clients));
            }
            Err(e) => return Err(e),
        }
    }
    report::print_footer(&plan, &results);
    if plan.sweep && !results.is_empty() {
        let path = report::write_plot(&plan.out, &results)?;
        println!("plot: {}", path.display());
    }
    if !failed.is_empty() {
        anyhow::bail!(
            "{} of {} runs failed: {}",
            failed.len(),
            plan.runs.len(),
            failed.join("; ")
        );
    }
    Ok(())
}
