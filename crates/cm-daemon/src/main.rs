//! `cmd`: run the Congestion Manager daemon.

use std::path::PathBuf;

use anyhow::Context;
use clap::Parser;

/// The Congestion Manager daemon: one host-wide congestion manager that
/// every CM application on this machine (libcm, the C library, `cm`) talks
/// to over a Unix control socket.
#[derive(Parser, Debug)]
#[command(version, about, long_about = None)]
struct Args {
    /// Control socket path [default: $CM_SOCKET, else $XDG_RUNTIME_DIR/cm.sock, else /run/cm.sock].
    #[arg(long, short)]
    socket: Option<PathBuf>,
    /// TOML configuration file (flags override it).
    #[arg(long, short)]
    config: Option<PathBuf>,
    /// Controller of new macroflows, e.g. aimd, iiad:mode=window, iscc:l=2
    /// (cm_core::controller::spec; default aimd).
    #[arg(long)]
    controller: Option<String>,
    /// Initial window in segments, for aimd (RFC 6928 default: 10).
    #[arg(long)]
    initial_window: Option<u64>,
    /// Scheduler: weighted or round-robin.
    #[arg(long)]
    scheduler: Option<String>,
    /// Exponential aging half-life: min-rtt, srtt or off.
    #[arg(long)]
    aging: Option<String>,
    /// Pacing slack in microseconds: grants due within it of a wake-up go
    /// in that wake-up (default 50; 0: each at its own due time).
    #[arg(long)]
    pacing_slack_us: Option<u64>,
    /// Let flows of different users share a macroflow.
    #[arg(long)]
    share_across_users: bool,
    /// Most flows per client.
    #[arg(long)]
    max_flows_per_client: Option<usize>,
    /// Most messages per second per client.
    #[arg(long)]
    max_messages_per_sec: Option<u64>,
    /// Most clients of one user (uid) at once.
    #[arg(long)]
    max_clients_per_user: Option<usize>,
    /// Memory budget in MiB: above it (resident set), new flows are refused
    #[arg(long)]
    max_memory_mib: Option<u64>,
    /// Microseconds the loop keeps polling after a busy turn before it
    /// blocks (0: never; an idle daemon always blocks).
    #[arg(long)]
    spin_us: Option<u64>,
    /// Keep every client on the control socket (no shared-memory rings).
    #[arg(long)]
    no_shared_memory: bool,
    /// Stay where the kernel places the daemon instead of running on the
    /// CPU where the busiest shared-memory client waits for it.
    #[arg(long)]
    no_follow_client_cpu: bool,
    /// Load `cm`, a Linux TCP congestion control backed by this daemon:
    /// connections that select it (`sysctl net.ipv4.tcp_congestion_control=cm`,
    /// or `setsockopt(TCP_CONGESTION, "cm")`) share their destination's
    /// macroflow with every other CM flow. Needs root, BTF and BPF struct_ops.
    #[arg(long)]
    kernel_tcp: bool,
    /// Log only warnings and errors.
    #[arg(long, short)]
    quiet: bool,
}

/// Overwrite `slot` with a value given on the command line.
fn set<T>(slot: &mut T, flag: Option<T>) {
    if let Some(v) = flag {
        *slot = v;
    }
}

fn main() -> anyhow::Result<()> {
    let a = Args::parse();
    cm_daemon::log::set_quiet(a.quiet);
    let mut cfg = match &a.config {
        Some(p) => cm_daemon::DaemonConfig::from_file(p)?,
        None => cm_daemon::DaemonConfig::default(),
    };
    // Flags override the file.
    set(&mut cfg.controller, a.controller);
    set(&mut cfg.initial_window, a.initial_window);
    set(&mut cfg.scheduler, a.scheduler);
    set(&mut cfg.aging, a.aging);
    set(&mut cfg.pacing_slack_us, a.pacing_slack_us);
    set(&mut cfg.max_flows_per_client, a.max_flows_per_client);
    set(&mut cfg.max_messages_per_sec, a.max_messages_per_sec);
    set(&mut cfg.max_clients_per_user, a.max_clients_per_user);
    set(&mut cfg.max_memory_mib, a.max_memory_mib);
    set(&mut cfg.spin_us, a.spin_us);
    cfg.share_across_users |= a.share_across_users;
    cfg.shared_memory &= !a.no_shared_memory;
    cfg.follow_client_cpu &= !a.no_follow_client_cpu;
    cfg.kernel_tcp |= a.kernel_tcp;
    let path = a
        .socket
        .or_else(|| cfg.socket.clone())
        .unwrap_or_else(cm_ipc::default_socket_path);
    let mut d = cm_daemon::Daemon::bind(cfg, &path).context("starting the daemon")?;
    d.handle_signals()?;
    d.run()?;
    Ok(())
}
