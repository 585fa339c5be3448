//! What `cm bench load` prints: one table row per run, then where the time
//! and memory go and the targets met or not; for a sweep, load.svg
//! (latency and RSS against the number of clients, log x axis) drawn with
//! `cm_experiments::plot`.

use std::path::{Path, PathBuf};

use anyhow::Context;
use cm_experiments::plot::{Plot, Series, Style};

use super::args::{Plan, TransportArg};
use super::run::RunResult;

/// The targets (issue 21).
const TARGET_RSS: u64 = 256 << 20;
const TARGET_QUERY_P99_US: f64 = 1000.0;
const TARGET_BULK_OPS: f64 = 1e6;
const TARGET_FLOWS: u64 = 100_000;

const MIB: f64 = (1u64 << 20) as f64;

/// The run's description and the table's column names.
pub fn print_header(plan: &Plan) {
    if let Some(c) = plan.runs.first() {
        let rate = if c.rate > 0.0 {
            format!("{} ops/s aggregate", c.rate)
        } else {
            "as fast as possible".into()
        };
        println!(
            "cm bench load: {} calls over {}, {}, {:.1} s per run, daemon {}",
            if c.bulk { "bulk" } else { "single" },
            match c.transport {
                TransportArg::Shm => "shared memory",
                TransportArg::Socket => "the socket",
            },
            rate,
            c.duration.as_secs_f64(),
            c.cmd.display()
        );
    }
    println!(
        "{:>7} {:>7} {:>6} {:>10} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>7} {:>8} {:>10} {:>8} {:>6} {:>10}",
        "clients",
        "flows",
        "hosts",
        "ops/s",
        "q_p50",
        "q_p99",
        "q_p99.9",
        "g_p50",
        "g_p99",
        "g_p99.9",
        "cpu/op",
        "rss_MiB",
        "rss/client",
        "rss/flow",
        "fds",
        "fds/client"
    );
}

/// A quantile for the table (`-` without samples).
fn q(h: &super::hist::Hist, p: f64) -> String {
    h.quantile_us(p)
        .map_or_else(|| "-".into(), |v| format!("{v:.1}"))
}

/// Growth of the daemon over its idle self, per client and per flow.
fn growth(r: &RunResult) -> (f64, f64, f64) {
    let rss = r.loaded.rss.saturating_sub(r.idle.rss) as f64;
    let fds = r.loaded.fds.saturating_sub(r.idle.fds) as f64;
    let n = f64::from(r.cfg.clients);
    (rss / n, rss / r.cfg.total_flows() as f64, fds / n)
}

/// CPU microseconds of the daemon per operation.
fn cpu_per_op_us(r: &RunResult) -> f64 {
    r.daemon_cpu.as_secs_f64() * 1e6 / (r.ops.max(1) as f64)
}

/// One run's row.
pub fn print_row(r: &RunResult) {
    let (rss_client, rss_flow, fds_client) = growth(r);
    println!(
        "{:>7} {:>7} {:>6} {:>10.0} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>7.2} {:>8.1} {:>10.1} {:>8.0} {:>6} {:>10.2}",
        r.cfg.clients,
        r.cfg.total_flows(),
        r.cfg.hosts,
        r.ops_per_sec(),
        q(&r.query, 0.5),
        q(&r.query, 0.99),
        q(&r.query, 0.999),
        q(&r.grant, 0.5),
        q(&r.grant, 0.99),
        q(&r.grant, 0.999),
        cpu_per_op_us(r),
        r.loaded.rss as f64 / MIB,
        rss_client / 1024.0,
        rss_flow,
        r.loaded.fds,
        fds_client
    );
}

/// The legend, where the time and memory go, and the targets.
pub fn print_footer(plan: &Plan, results: &[RunResult]) {
    let bulk = plan.runs.first().is_some_and(|c| c.bulk);
    println!();
    println!(
        "ops/s: request+notify+update+query calls per second through the daemon; q_*: query round trip{}, µs;",
        if bulk {
            " (one bulk_query of all a client's flows)"
        } else {
            ""
        }
    );
    println!(
        "g_*: request -> Send event, µs; cpu/op: daemon user+system CPU per operation, µs (/proc/<pid>/stat);"
    );
    println!(
        "rss_MiB: daemon VmRSS with every client connected; rss/client (KiB), rss/flow (B), fds/client: growth over the idle daemon."
    );
    for r in results {
        print_where(r);
    }
    if let Some(big) = results.iter().max_by_key(|r| r.cfg.total_flows()) {
        print_targets(big);
    }
}

/// Where one run's time and memory went.
fn print_where(r: &RunResult) {
    let wall = r.elapsed.as_secs_f64().max(1e-9);
    let cpu_op = cpu_per_op_us(r);
    println!(
        "N={}: {} ops in {:.2} s (setup {:.2} s); daemon CPU {:.0}% of one core ({:.2} µs/op: at most {:.0} ops/s on one core), clients' CPU {:.0}%; \
         RSS {:.1} MiB = anon {:.1} + shmem {:.1} + other {:.1} (idle {:.1}); fds {} (idle {}){}{}",
        r.cfg.clients,
        r.ops,
        wall,
        r.setup.as_secs_f64(),
        cpu_share(r.daemon_cpu, wall),
        cpu_op,
        if cpu_op > 0.0 {
            1e6 / cpu_op
        } else {
            f64::INFINITY
        },
        cpu_share(r.client_cpu, wall),
        r.loaded.rss as f64 / MIB,
        r.loaded.rss_anon as f64 / MIB,
        r.loaded.rss_shmem as f64 / MIB,
        r.loaded
            .rss
            .saturating_sub(r.loaded.rss_anon + r.loaded.rss_shmem) as f64
            / MIB,
        r.idle.rss as f64 / MIB,
        r.loaded.fds,
        r.idle.fds,
        if r.grant_timeouts > 0 {
            format!("; {} grants not seen within 1 s", r.grant_timeouts)
        } else {
            String::new()
        },
        if r.daemon_errors > 0 {
            format!("; {} error events from the daemon", r.daemon_errors)
        } else {
            String::new()
        },
    );
}

/// CPU time over `wall` seconds, in percent of one CPU.
fn cpu_share(cpu: std::time::Duration, wall: f64) -> f64 {
    100.0 * cpu.as_secs_f64() / wall
}

fn verdict(ok: bool) -> &'static str {
    if ok { "met" } else { "NOT met" }
}

/// The targets against the largest run.
fn print_targets(r: &RunResult) {
    let flows = r.cfg.total_flows();
    println!(
        "targets (largest run): {} clients, {} flows over {} macroflows (target 1000 / 100000 / 10000): {}",
        r.cfg.clients,
        flows,
        r.cfg.hosts,
        verdict(r.cfg.clients >= 1000 && flows >= TARGET_FLOWS && r.cfg.hosts >= 10_000)
    );
    println!(
        "  daemon RSS {:.1} MiB <= 256 MiB: {}",
        r.loaded.rss as f64 / MIB,
        verdict(r.loaded.rss <= TARGET_RSS)
    );
    let p99 = r.query.quantile_us(0.99);
    let p99_met = p99.is_some_and(|v| v <= TARGET_QUERY_P99_US);
    println!(
        "  query p99 {} µs <= 1000 µs: {}",
        p99.map_or_else(|| "-".into(), |v| format!("{v:.1}")),
        verdict(p99_met)
    );
    if !p99_met && r.cfg.rate <= 0.0 {
        print_closed_loop_wait(r);
    }
    if r.cfg.bulk {
        println!(
            "  bulk {:.0} ops/s >= 1000000: {}",
            r.ops_per_sec(),
            verdict(r.ops_per_sec() >= TARGET_BULK_OPS)
        );
    } else {
        println!("  bulk ops/s >= 1000000: not measured here (run with --bulk)");
    }
}

/// Where a closed loop's query latency goes: each of N clients finishes a
/// cycle every N · (operations per cycle) / (operations per second), by
/// Little's law, however fast the daemon answers; with far more runnable
/// client threads than CPUs, most of it is waiting for a CPU.
fn print_closed_loop_wait(r: &RunResult) {
    let per_cycle = 4.0
        * if r.cfg.bulk {
            f64::from(r.cfg.flows)
        } else {
            1.0
        };
    let cycle_ms = f64::from(r.cfg.clients) * per_cycle / r.ops_per_sec().max(1e-9) * 1e3;
    let wall = r.elapsed.as_secs_f64().max(1e-9);
    let cpus = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    let daemon = cpu_share(r.daemon_cpu, wall);
    // A daemon short of one CPU had time to spare: the calls waited for
    // the clients' own turns on a CPU. One near a full CPU is the limit.
    let verdict = if daemon < 80.0 {
        "so a call waits mostly for a CPU, not for the daemon"
    } else {
        "so the daemon is the bottleneck"
    };
    println!(
        "  where the time goes: {} clients in a closed loop on {cpus} CPUs finish a cycle each every {cycle_ms:.1} ms \
         (Little's law: clients x operations per cycle / operations per second); the daemon was busy {daemon:.0}% of one CPU \
         ({:.2} µs per operation) and the clients' threads {:.0}%, {verdict}; compare at a set rate (--rate 20000).",
        r.cfg.clients,
        cpu_per_op_us(r),
        cpu_share(r.client_cpu, wall),
    );
}

/// Write `dir`/load.svg: query and grant latency (p50, p99) and RSS
/// against log10 of the number of clients.
pub fn write_plot(dir: &Path, results: &[RunResult]) -> anyhow::Result<PathBuf> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let x = |r: &RunResult| f64::from(r.cfg.clients).log10();
    let series = |label: &str, f: &dyn Fn(&RunResult) -> Option<f64>| Series {
        label: label.into(),
        points: results
            .iter()
            .filter_map(|r| f(r).map(|y| (x(r), y)))
            .collect(),
        style: Style::Line,
    };
    let latency = Plot {
        title: "Latency against clients".into(),
        x_label: "log10(clients): 0 = 1, 1 = 10, 2 = 100, 3 = 1000".into(),
        y_label: "µs".into(),
        series: vec![
            series("query p50", &|r| r.query.quantile_us(0.5)),
            series("query p99", &|r| r.query.quantile_us(0.99)),
            series("grant p50", &|r| r.grant.quantile_us(0.5)),
            series("grant p99", &|r| r.grant.quantile_us(0.99)),
        ],
    };
    let rss = Plot {
        title: "Daemon RSS against clients".into(),
        x_label: "log10(clients): 0 = 1, 1 = 10, 2 = 100, 3 = 1000".into(),
        y_label: "MiB".into(),
        series: vec![series("daemon RSS", &|r| Some(r.loaded.rss as f64 / MIB))],
    };
    // Two panels, one above the other, in one document.
    let top = latency.to_svg();
    let bottom = rss.to_svg().replacen("<svg ", "<svg y=\"460\" ", 1);
    let svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"720\" height=\"920\">\n{top}{bottom}</svg>\n"
    );
    let path = dir.join("load.svg");
    std::fs::write(&path, svg).with_context(|| format!("writing {}", path.display()))?;
    Ok(path)
}
