//! The [`Cm`] handle: one application's (or thread's) way to the
//! congestion manager, embedded or the daemon.
//!
//! Its `impl` is split by API group, as `cm-core`'s `manager/` is: this
//! file holds the handle, its constructors and what it says about itself;
//! `calls.rs` how a call reaches the CM (at once, batched, or waiting for
//! a reply) and the batching and spinning knobs; `flows.rs` opening and
//! closing flows, the MTU, macroflows and weights; `controller.rs` the
//! controller and capacity estimate of a flow's macroflow; `sending.rs` requests,
//! notifications and the send callback; `feedback.rs` updates and
//! queries; `rate_updates.rs` rate callbacks and thresholds; `dispatch.rs`
//! events, callbacks, waiting, the pollable descriptor and SIGIO;
//! `stat.rs` what `cm stat` sees; `buffered.rs` buffered sends
//! (`cm_send`).

mod args;
mod buffered;
mod calls;
mod controller;
mod dispatch;
mod failover;
mod feedback;
mod flows;
mod peer;
mod rate_updates;
mod sending;
pub(crate) mod stat;

use std::collections::VecDeque;
use std::path::Path;

use cm_core::idhash::IdMap;
use cm_core::{Bytes, Config, FlowId, PathEstimate};

use crate::backend::Backend;
use crate::backend::daemon::{DaemonConn, IpcCounters, Transport};
use crate::backend::embedded::Embedded;
use crate::error::CmError;
use crate::event::CmEvent;
use crate::send_queue::SendQueue;

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

/// A handle on the Congestion Manager: one per application (or thread).
pub struct Cm {
    pub(crate) backend: Backend,
    /// Events ready for the application (or a buffered flow).
    pub(crate) events: VecDeque<CmEvent>,
    on_send: Option<SendCallback>,
    on_update: Option<UpdateCallback>,
    /// The send queues of buffered flows.
    buffered: IdMap<FlowId, SendQueue>,
    /// Inside `dispatch`: calls made by callbacks are batched.
    dispatching: bool,
    autoflush: bool,
    /// Calls gathered before a batch is sent (autoflush off).
    batch_limit: usize,
    /// MTUs already asked for, per flow.
    mtus: IdMap<FlowId, u32>,
    /// The CM protocol's peer state per flow (embedded mode's `stat`; the
    /// daemon keeps its own).
    peers: IdMap<FlowId, cm_ipc::PeerStat>,
    /// Daemon mode: the flows open on this handle, by application id
    /// (see `args` and `failover`).
    own: IdMap<FlowId, failover::FlowRecord>,
    /// Moving to an embedded CM and back (see `failover`).
    fo: failover::Failover,
    /// The application's descriptor: an epoll set watching the CM in use,
    /// stable across moves (see [`Cm::pollable_fd`]).
    outer: Option<std::os::fd::OwnedFd>,
}

impl std::fmt::Debug for Cm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cm")
            .field("mode", &self.mode())
            .field("events", &self.events.len())
            .finish()
    }
}

impl Cm {
    /// The daemon at [`crate::default_socket_path`] if one is listening,
    /// else an embedded CM with the default configuration. A socket file
    /// with no daemon behind it (a daemon that crashed or is restarting)
    /// gives an embedded CM in [`crate::Status::Fallback`]: it joins the
    /// daemon once one listens there (see [`Cm::status`]).
    pub fn new() -> Result<Cm, CmError> {
        let path = cm_ipc::default_socket_path();
        if path.exists() {
            return Cm::connect_or_stand_in(path);
        }
        Cm::embedded(Config::default())
    }

    /// The daemon listening at `path`, or, if none listens there yet, an
    /// embedded CM in [`crate::Status::Fallback`] that joins the daemon
    /// once one does.
    pub fn connect_or_stand_in(path: impl AsRef<Path>) -> Result<Cm, CmError> {
        match Cm::connect(path.as_ref()) {
            Ok(cm) => Ok(cm),
            Err(CmError::NoDaemon { .. }) => Cm::standing_in(path.as_ref().to_path_buf()),
            Err(e) => Err(e),
        }
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
        let mut cm = Cm::with_backend(Backend::Daemon(Box::new(DaemonConn::connect(
            path.as_ref(),
            transport,
        )?)));
        cm.fo = failover::Failover::new(Some((path.as_ref().to_path_buf(), transport)));
        Ok(cm)
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
            peers: IdMap::default(),
            own: IdMap::default(),
            fo: failover::Failover::new(None),
            outer: None,
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
            Backend::Daemon(d) => Some(d.counters()),
        }
    }

    /// Daemon mode: the daemon's process id, as the kernel reports the
    /// peer of the control socket (`SO_PEERCRED`); `None` otherwise.
    pub fn daemon_pid(&self) -> Option<u32> {
        match &self.backend {
            Backend::Daemon(d) => rustix::net::sockopt::socket_peercred(d.socket())
                .ok()
                .map(|c| c.pid.as_raw_nonzero().get().unsigned_abs()),
            Backend::Embedded(_) => None,
        }
    }

    /// The uid the daemon identified this process as (embedded: its own uid).
    pub fn uid(&self) -> u32 {
        match &self.backend {
            Backend::Embedded(_) => rustix::process::getuid().as_raw(),
            Backend::Daemon(d) => d.uid,
        }
    }
}
