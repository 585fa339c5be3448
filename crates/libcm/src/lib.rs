//! # libcm: the Congestion Manager API for applications
//!
//! The papers' API (cm-implementation-linux §2.1, RFC 3124 §4) for a
//! program, against either the host's CM daemon (`cmd`) or a CM embedded in
//! the program. [`Cm::new`] uses the daemon when one listens at
//! [`default_socket_path`] and embeds one otherwise; the calls and their
//! meaning are the same in both modes.
//!
//! | paper | libcm |
//! |---|---|
//! | `cm_open(src, dst)` | [`Cm::open`] |
//! | `cm_mtu(fid)` | [`Cm::mtu`] |
//! | `cm_request(fid)` | [`Cm::request`] ([`Cm::request_mtus`] for k MTUs) |
//! | `cm_register_send(fn)` / `cmapp_send(fid)` | [`Cm::register_send`] / [`CmEvent::Send`] |
//! | `cm_notify(fid, nsent)` | [`Cm::notify`] |
//! | `cm_update(fid, nsent, nrecd, lossmode, rtt)` | [`Cm::update`] |
//! | `cm_query(fid)` | [`Cm::query`] |
//! | `cm_register_update(fn)` / `cmapp_update` | [`Cm::register_update`] + [`Cm::set_rate_updates`] / [`CmEvent::Update`] |
//! | `cm_thresh(down, up)` | [`Cm::thresh`] |
//! | `cm_getmacroflow` / `cm_setmacroflow` | [`Cm::macroflow_of`] / [`Cm::set_macroflow`] |
//! | `cm_bulk_request` / `_notify` / `_update` / `_query` | [`Cm::bulk_request`], [`Cm::bulk_notify`], [`Cm::bulk_update`], [`Cm::bulk_query`] |
//! | `cm_send` (buffered, CC-UDP) | [`Cm::open_buffered`] + [`Cm::send`] |
//! | `cm_close(fid)` | [`Cm::close`] |
//!
//! ## Living with libcm (cm-implementation-linux §3.1)
//!
//! 1. **libcm's own loop**: register callbacks, then [`Cm::run_until`].
//! 2. **Your select/poll/epoll loop**: add [`Cm::pollable_fd`] to your set
//!    and call [`Cm::dispatch`] when it is readable.
//! 3. **SIGIO**: [`Cm::enable_sigio`] (daemon mode).
//! 4. **Polling on your own schedule**: call [`Cm::dispatch`] or
//!    [`Cm::poll_event`] whenever you like.
//! 5. **async**: `tokio_adapter::AsyncCm` (feature `tokio`).
//!
//! In daemon mode the frames of calls and grants travel through two
//! shared-memory rings (`cm_ipc::shm`) once connected, with an `eventfd`
//! doorbell rung only for a side that sleeps; [`Cm::pollable_fd`] is then an
//! epoll set of that doorbell and the control socket. [`Cm::connect_with`]
//! and [`Transport::Socket`] (or `CM_TRANSPORT=socket`) keep them on the
//! socket.
//!
//! In daemon mode, [`Cm::next_timeout`] and [`Cm::wait`] first poll the
//! control socket for up to [`Cm::set_spin`] (adaptive, at most 500 µs by
//! default) when calls the
//! daemon answers (requests, calls with a reply) were just sent, so a busy
//! sender is not put to sleep and woken for each batch of grants.
//!
//! ```
//! use libcm::{Cm, CmEvent};
//! use cm_core::{Config, Feedback, Duration};
//!
//! let mut cm = Cm::embedded(Config::default()).unwrap();
//! let flow = cm.open(None, "192.0.2.7:9000".parse().unwrap()).unwrap();
//! cm.request(flow).unwrap();
//! while let Some(ev) = cm.poll_event().unwrap() {
//!     if let CmEvent::Send { flow, bytes } = ev {
//!         // send up to `bytes` on the socket, then:
//!         cm.notify(flow, bytes.get()).unwrap();
//!     }
//! }
//! cm.update(flow, Feedback::acked(1460, Duration::from_millis(30))).unwrap();
//! assert!(cm.query(flow).unwrap().srtt.is_some());
//! ```
#![warn(missing_docs)]

mod api;
mod backend;
mod buffered;
pub mod ccudp;
mod clock;
mod dispatch;
mod error;
mod stat;
#[cfg(feature = "tokio")]
pub mod tokio_adapter;

use std::collections::VecDeque;
use std::path::Path;

use cm_core::idhash::IdMap;

pub use buffered::DEFAULT_QUEUE_BYTES;
pub use ccudp::CcUdpSocket;
pub use cm_core::{
    Bytes, Config, Duration, Feedback, FlowId, LossMode, MacroflowId, PathEstimate, Rate,
    Thresholds,
};
pub use cm_ipc::ErrorCode;
pub use error::CmError;
pub use stat::{FlowStat, MacroflowStat, Stat};

use backend::daemon::DaemonConn;
pub use backend::daemon::Transport;
use backend::embedded::Embedded;

/// Something the application is told (the papers' callbacks).
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub enum CmEvent {
    /// `cmapp_send`: the flow may send up to `bytes` now; answer with
    /// [`Cm::notify`] (0 declines).
    Send {
        /// The flow.
        flow: FlowId,
        /// Bytes granted (one MTU, or up to k for a k-MTU request).
        bytes: Bytes,
    },
    /// `cmapp_update`: the flow's rate or RTT crossed its thresholds.
    Update {
        /// The flow.
        flow: FlowId,
        /// The new estimate.
        estimate: PathEstimate,
    },
    /// A grant was not answered in time and was withdrawn.
    GrantExpired {
        /// The flow.
        flow: FlowId,
        /// Bytes withdrawn.
        bytes: Bytes,
    },
    /// The flow was closed by the CM.
    FlowReclaimed {
        /// The flow.
        flow: FlowId,
    },
    /// The daemon refused an earlier fire-and-forget call on this flow.
    Error {
        /// The flow (or id 0).
        flow: FlowId,
        /// Why.
        code: ErrorCode,
    },
}

/// Traffic on the daemon connection (see [`Cm::ipc_counters`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IpcCounters {
    /// Frames sent to the daemon.
    pub frames_out: u64,
    /// Frames received from the daemon.
    pub frames_in: u64,
    /// Calls sent (messages in the frames out).
    pub calls_out: u64,
    /// Reads of the socket (or the ring) that found nothing.
    pub empty_reads: u64,
    /// Doorbells rung to wake the daemon (shared-memory rings only).
    pub doorbells_out: u64,
}

/// Which CM a [`Cm`] talks to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// A CM inside this process.
    Embedded,
    /// The host's CM daemon.
    Daemon,
}

/// `cmapp_send` as a Rust callback: the flow and the bytes granted.
pub type SendCallback = Box<dyn FnMut(&mut Cm, FlowId, Bytes)>;
/// `cmapp_update` as a Rust callback: the flow and its new estimate.
pub type UpdateCallback = Box<dyn FnMut(&mut Cm, FlowId, PathEstimate)>;

pub(crate) enum Backend {
    Embedded(Box<Embedded>),
    Daemon(Box<DaemonConn>),
}

/// A handle on the Congestion Manager: one per application (or thread).
pub struct Cm {
    pub(crate) backend: Backend,
    pub(crate) events: VecDeque<CmEvent>,
    pub(crate) on_send: Option<SendCallback>,
    pub(crate) on_update: Option<UpdateCallback>,
    pub(crate) buffered: IdMap<FlowId, buffered::SendQueue>,
    /// Inside `dispatch`: calls made by callbacks are batched.
    pub(crate) dispatching: bool,
    pub(crate) autoflush: bool,
    /// Calls gathered before a batch is sent (autoflush off).
    pub(crate) batch_limit: usize,
    pub(crate) mtus: IdMap<FlowId, u32>,
}

impl std::fmt::Debug for Cm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cm")
            .field("mode", &self.mode())
            .field("events", &self.events.len())
            .finish()
    }
}

pub use cm_ipc::default_socket_path;

impl Cm {
    /// The daemon at [`default_socket_path`] if one is listening, else an
    /// embedded CM with the default configuration.
    pub fn new() -> Result<Cm, CmError> {
        let path = default_socket_path();
        if path.exists() {
            match Cm::connect(&path) {
                Ok(cm) => return Ok(cm),
                Err(CmError::NoDaemon { .. }) => {} // stale socket file
                Err(e) => return Err(e),
            }
        }
        Cm::embedded(Config::default())
    }

    /// A CM inside this process.
    pub fn embedded(cfg: Config) -> Result<Cm, CmError> {
        Ok(Cm::with_backend(Backend::Embedded(Box::new(
            Embedded::new(cfg)?,
        ))))
    }

    /// The daemon listening at `path`, over shared-memory rings when the
    /// daemon offers them (cm_ipc::shm), else over its control socket.
    /// `CM_TRANSPORT=socket` in the environment keeps the frames on the
    /// socket (for comparison and debugging).
    pub fn connect(path: impl AsRef<Path>) -> Result<Cm, CmError> {
        let t = match std::env::var("CM_TRANSPORT").as_deref() {
            Ok("socket") => Transport::Socket,
            _ => Transport::SharedMemory,
        };
        Cm::connect_with(path, t)
    }

    /// The daemon listening at `path`, with the frames carried as asked.
    pub fn connect_with(path: impl AsRef<Path>, transport: Transport) -> Result<Cm, CmError> {
        Ok(Cm::with_backend(Backend::Daemon(Box::new(
            DaemonConn::connect(path.as_ref(), transport)?,
        ))))
    }

    /// Daemon mode: how frames travel (shared memory unless the daemon
    /// refused it or [`Transport::Socket`] was asked for). Embedded: `None`.
    pub fn transport(&self) -> Option<Transport> {
        match &self.backend {
            Backend::Embedded(_) => None,
            Backend::Daemon(d) => Some(d.transport()),
        }
    }

    fn with_backend(backend: Backend) -> Cm {
        Cm {
            backend,
            events: VecDeque::new(),
            on_send: None,
            on_update: None,
            buffered: IdMap::default(),
            dispatching: false,
            autoflush: true,
            batch_limit: 32,
            mtus: IdMap::default(),
        }
    }

    /// Which CM this handle talks to.
    pub fn mode(&self) -> Mode {
        match self.backend {
            Backend::Embedded(_) => Mode::Embedded,
            Backend::Daemon(_) => Mode::Daemon,
        }
    }

    /// Daemon mode: how well calls are batched so far. Embedded: `None`.
    pub fn ipc_counters(&self) -> Option<IpcCounters> {
        match &self.backend {
            Backend::Embedded(_) => None,
            Backend::Daemon(d) => {
                let mut c = d.counters;
                c.doorbells_out = d.link.as_ref().map_or(0, |l| l.rang);
                Some(c)
            }
        }
    }

    /// The uid the daemon identified us as (embedded: our own uid).
    pub fn uid(&self) -> u32 {
        match &self.backend {
            Backend::Embedded(_) => rustix::process::getuid().as_raw(),
            Backend::Daemon(d) => d.uid,
        }
    }
}
