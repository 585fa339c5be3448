//! `tcp-friendly` (sigcomm1999 Fig 6) and `web4` (Fig 14) with and without
//! delayed ACKs at every TCP receiver (RFC 5681 §4.2, Linux's 40 ms): each
//! grid point's throughputs and ratio, web4's aggregates and Jain indices,
//! and every check of both runs.
//!
//! ```sh
//! cargo run --release -p cm-experiments --example delayed_acks [-- [--quick] [OUT_DIR]]
//! ```
//!
//! With `OUT_DIR`, the delayed-ACK runs' CSV, SVG and JSON go there
//! (`tcp-friendly-delayed-ack.*`, `web4-delayed-ack.*`). Exits with 1 if a
//! check fails.

use std::path::PathBuf;

use cm_experiments::experiments::{
    self, ExperimentError, LINUX_DELAYED_ACK_MS, Opts, Output, tcp_friendly, web4,
};

type RunWith = fn(&Opts, Option<u64>) -> Result<Output, ExperimentError>;

fn f(v: &serde_json::Value, k: &str) -> f64 {
    v[k].as_f64().unwrap_or(f64::NAN)
}

fn checks(label: &str, o: &Output) {
    for c in &o.checks {
        println!(
            "  {label:<16} {:<24} {:>8.3}  accept {:<12} {}",
            c.metric,
            c.ours,
            c.accept,
            if c.pass { "PASS" } else { "FAIL" }
        );
    }
}

fn tcp_friendly_table(plain: &Output, delack: &Output) {
    println!("tcp-friendly: median over seeds per grid point (bit/s), ratio = TCP/CM / NewReno");
    println!(
        "  {:>9} {:>4} | {:>9} {:>9} {:>6} | {:>9} {:>9} {:>6}",
        "rate", "ms", "tcpcm", "newreno", "ratio", "tcpcm", "newreno", "ratio"
    );
    println!(
        "  {:>14} | {:^26} | {:^26}",
        "",
        "ACK every segment",
        format!("delayed ACKs ({LINUX_DELAYED_ACK_MS} ms)")
    );
    let empty = Vec::new();
    let a = plain.metrics["conditions"].as_array().unwrap_or(&empty);
    let b = delack.metrics["conditions"].as_array().unwrap_or(&empty);
    for (x, y) in a.iter().zip(b) {
        println!(
            "  {:>9} {:>4} | {:>9.0} {:>9.0} {:>6.2} | {:>9.0} {:>9.0} {:>6.2}",
            x["rate_bps"].as_u64().unwrap_or(0),
            f(x, "one_way_ms"),
            f(x, "tcpcm_bps"),
            f(x, "newreno_bps"),
            f(x, "median_ratio"),
            f(y, "tcpcm_bps"),
            f(y, "newreno_bps"),
            f(y, "median_ratio"),
        );
    }
    checks("every segment", plain);
    checks("delayed ACKs", delack);
}

fn web4_table(plain: &Output, delack: &Output) {
    println!("web4: means over seeds");
    for (label, o) in [("every segment", plain), ("delayed ACKs", delack)] {
        let m = &o.metrics;
        println!(
            "  {label:<16} aggregate newreno {:>6.0} kbit/s, cm {:>6.0} kbit/s; jain newreno {:.3}, cm {:.3}; loss newreno {:.3}, cm {:.3}",
            f(m, "aggregate_newreno_bps") / 1e3,
            f(m, "aggregate_cm_bps") / 1e3,
            f(m, "jain_newreno"),
            f(m, "jain_cm"),
            f(m, "loss_newreno"),
            f(m, "loss_cm"),
        );
    }
    for (label, o) in [("every segment", plain), ("delayed ACKs", delack)] {
        for l in &o.summary {
            println!("  {label:<16} {l}");
        }
    }
    checks("every segment", plain);
    checks("delayed ACKs", delack);
}

fn main() -> Result<(), ExperimentError> {
    let mut quick = false;
    let mut out = None;
    for a in std::env::args().skip(1) {
        match a.as_str() {
            "--quick" => quick = true,
            dir => out = Some(PathBuf::from(dir)),
        }
    }
    let opts = Opts {
        quick,
        quiet: true,
        threads: std::thread::available_parallelism().map_or(2, usize::from),
    };
    let mut pass = true;
    let runs: [(&str, RunWith); 2] = [
        ("tcp-friendly", tcp_friendly::run_with),
        ("web4", web4::run_with),
    ];
    for (name, run) in runs {
        let plain = run(&opts, None)?;
        let delack = run(&opts, Some(LINUX_DELAYED_ACK_MS))?;
        if name == "web4" {
            web4_table(&plain, &delack);
        } else {
            tcp_friendly_table(&plain, &delack);
        }
        println!();
        pass &= plain.pass() && delack.pass();
        if let Some(dir) = &out {
            experiments::write(&delack, dir)?;
        }
    }
    if !pass {
        std::process::exit(1);
    }
    Ok(())
}
