//! The `cm` command-line tool: the Congestion Manager on this machine.

use clap::{Parser, Subcommand};

mod demo;
mod experiment_cmd;
mod sim_cmd;
mod wait;

/// The Congestion Manager: host-wide congestion control shared by every
/// flow to the same destination.
#[derive(Debug, Parser)]
#[command(name = "cm", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run flows over loopback UDP through emulated bottlenecks, paced by the
    /// CM: several flows share a macroflow, another has its own; prints each
    /// macroflow's window, rate, srtt and loss as it goes, then goodput and
    /// fairness.
    Demo(demo::DemoArgs),
    /// Run a scenario file (TOML) on the simulator; print the result as JSON.
    Sim(sim_cmd::SimArgs),
    /// Run a paper experiment (or `all`, or `list`): CSV, SVG and JSON out.
    Experiment(experiment_cmd::ExperimentArgs),
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Demo(a) => demo::run(&a),
        Command::Sim(a) => sim_cmd::run_sim(&a),
        Command::Experiment(a) => experiment_cmd::run_experiment(&a),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            // The cause chain on one line, without a debug dump.
            eprintln!("error: {e:#}");
            std::process::ExitCode::from(2)
        }
    }
}
