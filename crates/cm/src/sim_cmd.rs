//! `cm sim`: run a scenario file on the simulator and print the result as JSON.

use std::path::PathBuf;

use anyhow::Context;
use cm_experiments::{scenario::Scenario, simulate::run};

/// Arguments of `cm sim`.
#[derive(Debug, clap::Args)]
pub struct SimArgs {
    /// The scenario (TOML, see experiments/scenarios/).
    pub scenario: PathBuf,
    /// Override the scenario's seed.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Override the scenario's duration, seconds.
    #[arg(long)]
    pub duration: Option<f64>,
    /// Run the scenario in ns-2 (the papers' simulator, `apt-get install
    /// ns2`) instead: NewReno, SACK, web and CBR flows only.
    #[arg(long, conflicts_with = "tcl")]
    pub ns2: bool,
    /// Print the ns-2 Tcl script of the scenario and exit.
    #[arg(long)]
    pub tcl: bool,
}

/// Runs `cm sim`.
pub fn run_sim(a: &SimArgs) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(&a.scenario)
        .with_context(|| format!("reading {}", a.scenario.display()))?;
    let mut s = Scenario::from_toml(&text).with_context(|| a.scenario.display().to_string())?;
    if let Some(seed) = a.seed {
        s.seed = seed;
    }
    if let Some(d) = a.duration {
        s.duration = d;
    }
    if a.tcl {
        print!("{}", cm_experiments::ns2::tcl::script(&s)?);
        return Ok(());
    }
    if a.ns2 {
        let r = cm_experiments::ns2::run(&s)?;
        println!("{}", serde_json::to_string_pretty(&r)?);
        return Ok(());
    }
    let r = run(&s)?;
    println!("{}", serde_json::to_string_pretty(&r)?);
    Ok(())
}
