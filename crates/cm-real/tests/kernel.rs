//! The kernel TCP experiments' claims on their quick versions: unmodified
//! `curl` downloads from `python3 -m http.server` whose connections use
//! the `cm` congestion control of `cmd --kernel-tcp`. They need root, BTF
//! and a build with clang, and say "skipped: needs …" without them.

use cm_real::{RealOpts, run};

mod common;
use common::{my_namespaces, root};

/// The serial lock when this machine can run kernel experiments.
fn kernel() -> Option<std::sync::MutexGuard<'static, ()>> {
    let serial = root()?;
    if let Some(need) = cm_kernel::unsupported() {
        eprintln!("skipped: needs {need}");
        return None;
    }
    Some(serial)
}

fn assert_passes(name: &str) {
    let opts = RealOpts {
        quick: true,
        quiet: true,
    };
    let out = run(name, &opts).unwrap_or_else(|e| panic!("{name}: {e:#}"));
    assert!(my_namespaces().is_empty(), "{name} left namespaces behind");
    assert!(!cm_kernel::registered(), "{name} left `cm` registered");
    for c in &out.checks {
        assert!(
            c.pass,
            "{name}: {} = {:.3} fails {} (summary: {:#?})",
            c.metric, c.ours, c.accept, out.summary
        );
    }
}

/// Four kernel connections on `cm` in one macroflow leave the outside
/// Reno flow at least 0.40 of the link (0.60 in quick runs here), four on
/// Reno at most 0.25 (0.19-0.21); Jain among the four 1.000.
#[test]
fn kernel_ensemble_competes_like_one_flow() {
    if let Some(_serial) = kernel() {
        assert_passes("kernel-ensemble");
    }
}

/// Retrievals 2-9 on `cm` start from the macroflow's window: 0.38 faster
/// than fresh Reno connections in quick runs here (accept >= 0.30).
#[test]
fn kernel_sharing_later_retrievals_are_faster() {
    if let Some(_serial) = kernel() {
        assert_passes("kernel-sharing");
    }
}

/// One long download on `cm` moves what Reno moves (ratio 0.997-1.001
/// in quick runs here).
#[test]
fn kernel_throughput_costs_no_throughput() {
    if let Some(_serial) = kernel() {
        assert_passes("kernel-throughput");
    }
}
