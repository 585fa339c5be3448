//! # cm-daemon: the Congestion Manager daemon (the `cmd` command)
//!
//! One host-wide [`cm_core::CongestionManager`] behind a Unix
//! `SOCK_SEQPACKET` control socket speaking the [`cm_ipc`] protocol, so
//! that every CM application on the machine shares one view of each path.
//! Clients (libcm) are identified by `SO_PEERCRED`; each may act only on
//! its own flows, flows of different users do not share a macroflow unless
//! configured, a client that disconnects (or crashes) has its flows
//! reclaimed at once, and a malformed or over-rate message is answered
//! with an error while everyone else is served (cm-implementation-linux
//! §5, RFC 3124 §6).
//!
//! ## Where it sits
//!
//! ```text
//! applications -> libcm (daemon backend) -> cm-ipc frames -> cm-daemon -> cm-core
//! C programs -> cm-ffi (libcm.so) -----^
//! ```
//!
//! libcm's embedded backend runs the same `cm-core` inside one program;
//! the daemon runs it once for the host.
//!
//! ## Running `cmd`
//!
//! ```text
//! cargo build --release -p cm-daemon           # builds target/release/cmd
//! cmd --socket /tmp/cm.sock                    # default: $CM_SOCKET, $XDG_RUNTIME_DIR/cm.sock, /run/cm.sock
//! cmd --config contrib/cmd.toml --quiet        # a TOML file; flags override it (cmd --help)
//! ```
//!
//! It exits cleanly on SIGTERM and SIGINT, removing its socket;
//! `contrib/systemd/cmd.service` runs it host-wide.
//!
//! ## How it works
//!
//! The handle [`Daemon`] keeps its `impl` in `daemon/`, one file per
//! group: the event loop, the checks every call goes through, flows and
//! macroflows, sending and feedback, `stat`, and the shared rings.
//! A connected client is a `session.rs`, its rings a `client_rings.rs`.
//!
//! Once a client attaches, its frames travel through shared-memory rings
//! instead of the socket (`cm_ipc::shm`, `daemon/rings.rs`): the loop reads
//! them by looking at ring memory after every wait, and a client rings the
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
//! ## Example
//!
//! The daemon embedded in a program, on a thread, stopped from another
//! (what [`TempDaemon`] does for tests):
//!
//! ```
//! use cm_daemon::{Daemon, DaemonConfig};
//!
//! cm_daemon::log::set_quiet(true);
//! let dir = std::env::temp_dir().join(format!("cm-daemon-doc-{}", std::process::id()));
//! let path = dir.join("cm.sock");
//! let mut daemon = Daemon::bind(DaemonConfig::default(), &path)?;
//! let stop = daemon.stop_handle();
//! let serving = std::thread::spawn(move || daemon.run());
//! // Clients connect to `path` here (libcm: `Cm::connect(&path)`).
//! assert!(path.exists());
//! stop.stop();
//! serving.join().expect("the loop's thread")?;
//! assert!(!path.exists(), "the socket is removed on the way out");
//! std::fs::remove_dir_all(&dir)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
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
#[doc(hidden)]
pub use daemon::Harness;
pub use daemon::{Daemon, StopHandle};
pub use error::{ConfigError, DaemonError, KernelStartError};
pub use temp::TempDaemon;
