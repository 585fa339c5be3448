//! The daemon handle: one [`CongestionManager`], the control socket, the
//! connected clients, and the loop that serves them.
//!
//! The handle's `impl` is split by what it does, as `cm-core`'s `manager/`
//! is: this file holds the state and setting up (bind, signals, stop);
//! `event_loop.rs` the loop (waiting, accepting, reading frames, timers,
//! routing the core's events, output, hang-ups); `calls.rs` the checks
//! every call goes through and the table that sends each message to its
//! group; `flows.rs` opening, closing and macroflow membership;
//! `sending.rs` requests, notifications, feedback, queries, thresholds and
//! weights; `stat.rs` what `cm stat` and `cm query` see; `rings.rs` the
//! clients' shared-memory rings (attaching, reading, doorbells, following
//! the busiest client's CPU).

mod admission;
mod calls;
mod event_loop;
mod flows;
mod harness;
mod kernel;
mod memory;
mod rings;
mod sending;
mod stat;

use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use cm_core::idhash::IdMap;
use cm_core::{ClientId, CongestionManager, Instant};
use rustix::event::epoll;
use rustix::net::{
    AddressFamily, SocketAddrUnix, SocketFlags, SocketType, bind, listen, socket_with,
};
use rustix::time::{TimerfdClockId, TimerfdFlags, timerfd_create};

use crate::config::DaemonConfig;
use crate::error::DaemonError;
use crate::log;
use crate::session::Session;

pub use harness::Harness;

/// Epoll token of the control socket.
const LISTENER: u64 = 0;
/// Epoll token of the timerfd armed at the core's next deadline.
const TIMER: u64 = 1;
/// Epoll token of the signal pipe.
const SIGNALS: u64 = 2;
/// Epoll token of the `cm` congestion control's ring buffer.
const KERNEL: u64 = 3;
/// The first session token (clients' sockets).
const FIRST_CLIENT: u64 = 16;
/// Set in the epoll token of a session's shared-ring doorbell.
const RING_BIT: u64 = 1 << 63;

/// The running daemon.
pub struct Daemon {
    core: CongestionManager,
    cfg: DaemonConfig,
    listener: OwnedFd,
    epoll: OwnedFd,
    timer: OwnedFd,
    /// The deadline the timerfd is armed for.
    armed: Option<Instant>,
    /// The core's next deadline is within `event_loop::DUE_SOON_US`: poll,
    /// don't block.
    due_soon: bool,
    signals: Option<UnixStream>,
    sessions: IdMap<u64, Session>,
    /// Which session owns each flow.
    owner: IdMap<u64, u64>,
    /// Session of each core client.
    by_client: IdMap<ClientId, u64>,
    /// Owner uid of macroflows made by `setmacroflow` (no destination key).
    mf_owner: IdMap<u64, u32>,
    /// The CM protocol's peer state per flow, as its sender reports it
    /// (`SetPeer`), for `cm stat`.
    peers: IdMap<u64, cm_ipc::PeerStat>,
    next_token: u64,
    /// A frame read from a client's socket.
    rbuf: Vec<u8>,
    /// A frame copied out of a shared ring.
    ring_buf: Vec<u8>,
    /// Scratch: sessions whose rings have frames.
    ring_tokens: Vec<u64>,
    stop: Arc<AtomicBool>,
    path: PathBuf,
    /// Running beside the busiest client (`follow.rs`), set up by `run` on
    /// the loop's own thread.
    follow: Option<crate::follow::Follow>,
    /// The memory budget (`memory.rs`).
    budget: memory::Budget,
    /// Kernel TCP connections in macroflows (`--kernel-tcp`, `kernel.rs`).
    kernel: Option<kernel::Kernel>,
}

/// A handle that stops a running daemon from another thread.
#[derive(Clone, Debug)]
pub struct StopHandle(Arc<AtomicBool>);

impl StopHandle {
    /// Ask the daemon to exit at its next loop turn (within 100 ms).
    pub fn stop(&self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

impl Daemon {
    /// Bind the control socket (replacing a stale one) and set up the loop.
    pub fn bind(cfg: DaemonConfig, path: &Path) -> Result<Daemon, DaemonError> {
        let mut core =
            CongestionManager::new(cfg.core_config()?).map_err(crate::error::ConfigError::from)?;
        // `cm` is registered and allowed before the socket appears: a
        // client that sees the socket finds the daemon ready, and a failed
        // load leaves no socket behind.
        let kernel = if cfg.kernel_tcp {
            Some(kernel::Kernel::load(&mut core)?)
        } else {
            None
        };
        remove_stale_socket(path)?;
        if let Some(dir) = path.parent() {
            if !dir.as_os_str().is_empty() && !dir.exists() {
                std::fs::create_dir_all(dir)?;
            }
        }
        let listener = socket_with(
            AddressFamily::UNIX,
            SocketType::SEQPACKET,
            SocketFlags::CLOEXEC | SocketFlags::NONBLOCK,
            None,
        )?;
        bind(&listener, &SocketAddrUnix::new(path)?).map_err(|e| DaemonError::Bind {
            path: path.to_path_buf(),
            source: e.into(),
        })?;
        let ready = (|| -> Result<Daemon, DaemonError> {
            // Any user may connect; the daemon checks each call against
            // the caller's uid (SO_PEERCRED).
            std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(0o666))?;
            listen(&listener, 128)?;
            let mut d = Daemon::with_listener(cfg, core, listener, path)?;
            if let Some(k) = kernel {
                d.watch_kernel_tcp(k)?;
            }
            Ok(d)
        })();
        if ready.is_err() {
            let _ = std::fs::remove_file(path);
        }
        ready
    }

    /// Watch the loaded `cm` TCP congestion control's reports.
    fn watch_kernel_tcp(&mut self, k: kernel::Kernel) -> Result<(), DaemonError> {
        epoll::add(
            &self.epoll,
            k.fd(),
            epoll::EventData::new_u64(KERNEL),
            epoll::EventFlags::IN,
        )?;
        log!(
            info,
            "msg=\"kernel TCP congestion control registered\" name={}",
            cm_kernel::NAME
        );
        self.kernel = Some(k);
        Ok(())
    }

    /// The loop's state around a listening socket (or, for [`Harness`], an
    /// unbound one): the epoll set and the core's timer.
    fn with_listener(
        cfg: DaemonConfig,
        core: CongestionManager,
        listener: OwnedFd,
        path: &Path,
    ) -> Result<Daemon, DaemonError> {
        let epoll = epoll::create(epoll::CreateFlags::CLOEXEC)?;
        epoll::add(
            &epoll,
            &listener,
            epoll::EventData::new_u64(LISTENER),
            epoll::EventFlags::IN,
        )?;
        let timer = timerfd_create(
            TimerfdClockId::Monotonic,
            TimerfdFlags::CLOEXEC | TimerfdFlags::NONBLOCK,
        )?;
        epoll::add(
            &epoll,
            &timer,
            epoll::EventData::new_u64(TIMER),
            epoll::EventFlags::IN,
        )?;
        Ok(Daemon {
            core,
            cfg,
            listener,
            epoll,
            timer,
            armed: None,
            due_soon: false,
            signals: None,
            sessions: IdMap::default(),
            owner: IdMap::default(),
            by_client: IdMap::default(),
            mf_owner: IdMap::default(),
            peers: IdMap::default(),
            next_token: FIRST_CLIENT,
            rbuf: vec![0; cm_ipc::MAX_FRAME],
            ring_buf: Vec::with_capacity(cm_ipc::MAX_FRAME),
            ring_tokens: Vec::new(),
            stop: Arc::new(AtomicBool::new(false)),
            path: path.to_path_buf(),
            follow: None,
            budget: memory::Budget::new(),
            kernel: None,
        })
    }

    /// Exit cleanly on SIGTERM and SIGINT.
    pub fn handle_signals(&mut self) -> Result<(), DaemonError> {
        let (rx, tx) = UnixStream::pair()?;
        rx.set_nonblocking(true)?;
        for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
            signal_hook::low_level::pipe::register(sig, tx.try_clone()?)?;
        }
        epoll::add(
            &self.epoll,
            &rx,
            epoll::EventData::new_u64(SIGNALS),
            epoll::EventFlags::IN,
        )?;
        self.signals = Some(rx);
        Ok(())
    }

    /// A handle to stop the loop from elsewhere (tests, embedding).
    pub fn stop_handle(&self) -> StopHandle {
        StopHandle(self.stop.clone())
    }

    /// The control socket path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Refuse to replace a socket a live daemon listens on; remove a stale one.
fn remove_stale_socket(path: &Path) -> Result<(), DaemonError> {
    if !path.exists() {
        return Ok(());
    }
    let probe = socket_with(
        AddressFamily::UNIX,
        SocketType::SEQPACKET,
        SocketFlags::CLOEXEC,
        None,
    )?;
    match rustix::net::connect(&probe, &SocketAddrUnix::new(path)?) {
        Ok(()) => Err(DaemonError::AlreadyRunning(path.to_path_buf())),
        Err(_) => {
            log!(
                info,
                "msg=\"removing stale socket\" socket={}",
                path.display()
            );
            std::fs::remove_file(path)?;
            Ok(())
        }
    }
}

impl AsFd for Daemon {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.epoll.as_fd()
    }
}
