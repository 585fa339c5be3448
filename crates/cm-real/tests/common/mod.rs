//! What every real-network test file needs: one experiment at a time, and
//! this process's namespaces for the clean-up checks.

#![allow(dead_code)]

/// One real experiment at a time: they would compete for the two cores,
/// and the namespace checks look at all of this process's namespaces.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The serial lock if root, else `None` (the test skips).
pub fn root() -> Option<std::sync::MutexGuard<'static, ()>> {
    if cm_netem::is_root() {
        return Some(
            SERIAL
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
    }
    eprintln!("skipped: needs root");
    None
}

/// This process's namespaces (cm-netem names them after the pid).
pub fn my_namespaces() -> Vec<String> {
    let prefix = format!("cmn{}x", std::process::id());
    cm_netem::netns::list_namespaces()
        .into_iter()
        .filter(|n| n.starts_with(&prefix))
        .collect()
}

/// Runs the quick version of `name` and checks it left no namespace behind.
pub fn run_quick(name: &str) -> cm_experiments::experiments::Output {
    let opts = cm_real::RealOpts {
        quick: true,
        quiet: true,
    };
    let out = cm_real::run(name, &opts).unwrap_or_else(|e| panic!("{name}: {e:#}"));
    assert!(my_namespaces().is_empty(), "{name} left namespaces behind");
    out
}

/// Every check of `out` passes.
pub fn assert_checks(name: &str, out: &cm_experiments::experiments::Output) {
    for c in &out.checks {
        assert!(
            c.pass,
            "{name}: {} = {:.3} fails {} (summary: {:#?})",
            c.metric, c.ours, c.accept, out.summary
        );
    }
}
