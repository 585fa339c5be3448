//! # cm-daemon: the Congestion Manager daemon (the `cmd` command)
//!
//! One host-wide [`cm_core::CongestionManager`] behind a Unix
//! `SOCK_SEQPACKET` control socket speaking the [`cm_ipc`] protocol.
//! Clients (libcm) are identified by `SO_PEERCRED`; each may act only on
//! its own flows, flows of different users do not share a macroflow unless
//! configured, a client that disconnects (or crashes) has its flows
//! reclaimed at once, and a malformed or over-rate message is answered
//! with an error while everyone else is served (cm-implementation-linux
//! §5, RFC 3124 §6).
//!
//! Once a client attaches, its frames travel through shared-memory rings
//! instead of the socket (`cm_ipc::shm`, `link.rs`): the loop reads them
//! by looking at ring memory after every wait, and a client rings the
//! daemon's `eventfd` doorbell only when the daemon has said it sleeps.
//!
//! The loop spins, then blocks: after a turn that did work it keeps polling
//! (yielding the CPU between polls) for `spin_us` (default 50) before it
//! sleeps in `epoll_wait`, so a busy client's next frame needs no ~50 µs
//! cross-CPU wake-up; an idle daemon blocks and uses no CPU. Core deadlines
//! under 20 µs away are polled for rather than armed on the timerfd.
//!
//! The loop's thread runs on the CPU where its busiest shared-memory client
//! waits for it by polling and yielding (`follow.rs`, `follow_client_cpu`),
//! within the affinity it started with: that client hands its CPU to the
//! daemon instead of waking it on another.
//!
//! ```no_run
//! let cfg = cm_daemon::DaemonConfig::default();
//! let mut d = cm_daemon::Daemon::bind(cfg, "/tmp/cm.sock".as_ref()).unwrap();
//! d.handle_signals().unwrap();
//! d.run().unwrap();
//! ```
#![warn(missing_docs)]

mod client_rings;
pub mod config;
mod daemon;
mod error;
mod follow;
pub mod log;
mod session;
mod spin;
mod temp;

pub use config::DaemonConfig;
pub use daemon::{Daemon, StopHandle};
pub use error::{ConfigError, DaemonError};
pub use temp::TempDaemon;
