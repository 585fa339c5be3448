//! # libcm: the Congestion Manager API for applications
//!
//! The papers' API (cm-implementation-linux §2.1, RFC 3124 §4) for a
//! program, against either the host's CM daemon (`cmd`, crate cm-daemon)
//! or a CM embedded in the program. [`Cm::new`] uses the daemon when one
//! listens at [`default_socket_path`] and embeds one otherwise; the calls
//! and their meaning are the same in both modes.
//!
//! ## Where it sits
//!
//! ```text
//! applications (cm, cm-ttcp, yours)     C programs (cm.h)
//!            |                                 |
//!            |                 cm-ffi: libcm.so / libcm.a wrap libcm
//!            v                                 v
//! libcm: Cm ─┬─ embedded backend ─────────────────> cm-core, in this process
//!            └─ daemon backend ── cm-ipc frames ──> cm-daemon (`cmd`),
//!                                                  which runs cm-core for the host
//!
//! cm-core: the sans-IO congestion manager (no clock, no sockets)
//! ```
//!
//! The handle's `impl` lives in `cm/`, one file per API group; the two
//! backends in `backend/`; CC-UDP, a congestion-controlled datagram socket
//! on top of the API, in [`ccudp`].
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
//! default) when calls the daemon answers (requests, calls with a reply)
//! were just sent, so a busy sender is not put to sleep and woken for each
//! batch of grants.
//!
//! ## Example
//!
//! Embedded mode, the papers' callback style: open a flow, ask to send,
//! send from the grant callback and say so, report the receiver's
//! feedback, and ask what the CM knows about the path.
//!
//! ```
//! use libcm::{Cm, Config, Duration, Feedback};
//!
//! let mut cm = Cm::embedded(Config::default())?;
//! let flow = cm.open(None, "192.0.2.7:9000".parse()?)?;
//! // cmapp_send: called for each grant during `dispatch`.
//! cm.register_send(|cm, flow, bytes| {
//!     // Send up to `bytes` on the application's socket here, then:
//!     cm.notify(flow, bytes.get()).expect("notify");
//! });
//! cm.request(flow)?;
//! assert_eq!(cm.dispatch()?, 1, "one grant, delivered to the callback");
//! // The receiver acknowledged those bytes after 30 ms.
//! cm.update(flow, Feedback::acked(1460, Duration::from_millis(30)))?;
//! let estimate = cm.query(flow)?;
//! assert_eq!(estimate.srtt, Some(Duration::from_millis(30)));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![warn(missing_docs)]

mod backend;
pub mod ccudp;
mod cm;
mod error;
mod event;
mod send_queue;
#[cfg(feature = "tokio")]
pub mod tokio_adapter;

pub use backend::daemon::{DEFAULT_REPLY_TIMEOUT, IpcCounters, Transport};
pub use ccudp::CcUdpSocket;
pub use cm::stat::{FlowStat, MacroflowStat, PeerMode, PeerStat, Stat};
pub use cm::{Cm, Mode, SendCallback, UpdateCallback};
pub use cm_core::controller::ControllerConfig;
pub use cm_core::{
    Bytes, Config, Duration, Feedback, FlowId, LossMode, MacroflowId, PathEstimate, Rate,
    Thresholds,
};
pub use cm_ipc::ErrorCode;
pub use cm_ipc::default_socket_path;
pub use cm_udp::Offload;
pub use error::CmError;
pub use event::{CmEvent, Status};
pub use send_queue::DEFAULT_QUEUE_BYTES;
