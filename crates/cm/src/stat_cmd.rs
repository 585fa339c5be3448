//! `cm stat`: every macroflow the caller may see and, under each, its flows
//! (cm-implementation-linux §2: the daemon's view of the host's flows).

use anyhow::Result;

use crate::stat_view::{SocketArg, StatView, render};

/// Options of `cm stat`.
#[derive(Debug, clap::Args)]
pub struct StatArgs {
    #[command(flatten)]
    pub daemon: SocketArg,
    /// Print JSON: `{"macroflows": [{..., "flows": [...]}], "unattached_flows": []}`;
    /// no estimate is `null`, a macroflow shared by all users has `"uid": null`.
    #[arg(long)]
    pub json: bool,
}

/// Run `cm stat`.
pub fn run(args: &StatArgs) -> Result<()> {
    let mut cm = args.daemon.connect()?;
    let view = StatView::new(&cm.stat()?);
    if args.json {
        println!("{}", serde_json::to_string_pretty(&view)?);
    } else {
        print!("{}", render(&view, false));
        if let Some(line) = cm.daemon_pid().and_then(daemon_line) {
            println!("\n{line}");
        }
    }
    Ok(())
}

/// The daemon's own resource use, from /proc (its descriptors only where
/// this user may list them).
fn daemon_line(pid: u32) -> Option<String> {
    let rss = crate::procfs::rss(pid)?;
    let mut line = format!(
        "cmd (pid {pid}): resident {:.1} MiB",
        rss as f64 / f64::from(1u32 << 20)
    );
    if let Some(n) = crate::procfs::fds(pid) {
        line.push_str(&format!(", {n} descriptors"));
    }
    Some(line)
}
