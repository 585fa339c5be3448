//! The `cm` command-line tool: the Congestion Manager on this machine.

use clap::{Parser, Subcommand};

mod demo;
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
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Demo(a) => demo::run(&a),
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
