//! The `cm` command-line tool: the Congestion Manager on this machine.

use clap::{Parser, Subcommand};

mod bench_load;
mod byte_arg;
mod ccudp_acks;
mod demo;
mod experiment_cmd;
mod flow_cmd;
mod procfs;
mod proxy_cmd;
mod query_cmd;
mod referee_cmd;
mod select_cmd;
mod sim_cmd;
mod soak;
mod stat_cmd;
mod stat_view;
mod stream_cmd;
mod top_cmd;
mod ttcp_bench_cmd;
mod ttcp_cmd;
mod vat_cmd;
mod wait;
mod wrap_cmd;

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
    /// Referee the simulated figures' baselines with ns-2 (the papers'
    /// simulator): ours, ns-2's and the paper's figure side by side.
    Referee(referee_cmd::RefereeArgs),
    /// Show the CM daemon's macroflows and, under each, its flows (window,
    /// rate, srtt, rttvar, loss, bytes in flight, share, owner).
    Stat(stat_cmd::StatArgs),
    /// `cm stat`, live: redraw every interval, with each flow's measured
    /// sending rate.
    Top(top_cmd::TopArgs),
    /// Your macroflow state towards a host: window, rate, srtt, rttvar,
    /// loss (exit status 1 if there is none).
    Query(query_cmd::QueryArgs),
    /// Open a CM flow at the daemon and send real UDP traffic over loopback
    /// to a receiver this command starts, paced by the CM (request /
    /// callback, acks fed back with RTT samples); prints a summary.
    Flow(flow_cmd::FlowArgs),
    /// ttcp-style bulk transfers: `cm ttcp recv` / `cm ttcp send host:port`,
    /// TCP/CM (TCP over UDP, congestion control by the CM) or Linux TCP.
    Ttcp(ttcp_cmd::TtcpArgs),
    /// Run a private daemon under misbehaving clients (killed mid-call,
    /// garbage, floods, limits, a second user) while checking every second
    /// that well-behaved clients are served and nothing leaks; exits 1 on
    /// any violation.
    Soak(soak::SoakArgs),
    /// Benchmarks against a running system: `cm bench load` drives a `cmd`
    /// it starts with many clients and flows.
    Bench(bench_load::BenchArgs),
    /// Run an unmodified program with congestion control forced on its UDP
    /// sends (LD_PRELOAD): a small queue per flow, sent as the CM grants.
    Wrap(wrap_cmd::WrapArgs),
    /// The middleware paper's VoIP proxy: `cm proxy ingress` takes an
    /// application's datagrams and sends them through a congestion-
    /// controlled channel with a small queue; `cm proxy egress` delivers.
    Proxy(proxy_cmd::ProxyArgs),
    /// vat-style interactive audio over the CM: `cm vat send` polices a
    /// 64 kbit/s source to the CM's rate and sends from a drop-from-head
    /// buffer as the CM grants; `cm vat recv` reports one-way delay,
    /// jitter and loss.
    Vat(vat_cmd::VatArgs),
    /// Layered streaming over the CM: `cm stream serve --api alf|rate`
    /// picks the layer from cm_query at each grant or from rate
    /// callbacks; `cm stream play` plays out and reports per second.
    Stream(stream_cmd::StreamArgs),
    /// The receiver CM for `cm wrap` senders: count arriving UDP datagrams
    /// and answer probes (root).
    Receiver(wrap_cmd::ReceiverArgs),
    /// Pick a transport from requirements and behaviour (TAPS properties,
    /// the transport-selection paper's §4.1); print the choice and why.
    Select(select_cmd::SelectArgs),
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let ok = |r: anyhow::Result<()>| r.map(|()| std::process::ExitCode::SUCCESS);
    let result = match cli.command {
        Command::Demo(a) => ok(demo::run(&a)),
        Command::Sim(a) => ok(sim_cmd::run_sim(&a)),
        Command::Experiment(a) => ok(experiment_cmd::run_experiment(&a)),
        Command::Referee(a) => referee_cmd::run(&a).map(|pass| {
            if pass {
                std::process::ExitCode::SUCCESS
            } else {
                std::process::ExitCode::from(1)
            }
        }),
        Command::Stat(a) => ok(stat_cmd::run(&a)),
        Command::Top(a) => ok(top_cmd::run(&a)),
        Command::Query(a) => query_cmd::run(&a),
        Command::Flow(a) => ok(flow_cmd::run(&a)),
        Command::Ttcp(a) => ok(ttcp_cmd::run(&a)),
        Command::Soak(a) => soak::run(&a),
        Command::Bench(a) => ok(bench_load::run(&a)),
        Command::Wrap(a) => ok(wrap_cmd::run(&a)),
        Command::Proxy(a) => ok(proxy_cmd::run(&a)),
        Command::Vat(a) => ok(vat_cmd::run(&a)),
        Command::Stream(a) => ok(stream_cmd::run(&a)),
        Command::Receiver(a) => ok(wrap_cmd::run_receiver(&a)),
        Command::Select(a) => ok(select_cmd::run(&a)),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            // The cause chain on one line, without a debug dump.
            eprintln!("error: {e:#}");
            std::process::ExitCode::from(2)
        }
    }
}
