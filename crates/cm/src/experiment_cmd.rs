//! `cm experiment`: run the papers' experiments.

use std::path::PathBuf;

/// Arguments of `cm experiment`.
#[derive(Debug, clap::Args)]
pub struct ExperimentArgs {
    /// Experiment name, `all`, or `list`.
    pub name: String,
    /// Output directory.
    #[arg(long, default_value = "experiment-out")]
    pub out: PathBuf,
    /// Small, fast variant.
    #[arg(long)]
    pub quick: bool,
}

/// Runs `cm experiment`.
pub fn run_experiment(a: &ExperimentArgs) -> anyhow::Result<()> {
    anyhow::bail!(
        "experiment {} not implemented yet ({:?}, quick={})",
        a.name,
        a.out,
        a.quick
    )
}
