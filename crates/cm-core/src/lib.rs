//! # cm-core: the Congestion Manager, sans-IO
//!
//! The host-wide congestion state of the Congestion Manager
//! (Balakrishnan, Rahul, Seshan, SIGCOMM 1999; Andersen et al., the Linux
//! implementation; RFC 3124): flows to the same destination share one
//! [`macroflow`](MacroflowId) with one controller, one RTT estimate, one
//! shaper and one scheduler.
//!
//! The core never reads a clock, opens a socket or draws randomness: time is
//! passed in as an [`Instant`] (integer microseconds), outputs are polled as
//! [`Event`]s. The same code runs under the simulator, in the daemon and in
//! tests.
//!
//! | paper / RFC 3124 | here |
//! |---|---|
//! | `cm_open(src, dst)` | [`CongestionManager::open`] |
//! | `cm_mtu(id)` | [`CongestionManager::mtu`] |
//! | `cm_request(id)` | [`CongestionManager::request`], [`CongestionManager::request_mtus`] |
//! | `cmapp_send(id)` | [`Event::Grant`] |
//! | `cm_notify(id, nsent)` | [`CongestionManager::notify`] |
//! | `cm_update(id, nsent, nrecd, lossmode, rtt)` | [`CongestionManager::update`] with [`Feedback`] |
//! | `cm_query(id, &rate, &srtt, &rttvar)` | [`CongestionManager::query`] |
//! | `cm_register_update`, `cm_thresh` | [`CongestionManager::set_rate_updates`], [`CongestionManager::set_thresholds`] |
//! | `cmapp_update(id, rate, srtt, rttvar)` | [`Event::RateUpdate`] |
//! | `cm_getmacroflow`, `cm_setmacroflow` | [`CongestionManager::macroflow_of`], [`CongestionManager::set_macroflow`] |
//! | `cm_close(id)` | [`CongestionManager::close`] |
//!
//! See [`CongestionManager`] for an example.
#![warn(missing_docs)]

pub mod config;
pub mod controller;
mod error;
mod event;
mod flow;
mod id;
pub mod idhash;
mod macroflow;
mod manager;
pub mod rtt;
pub mod scheduler;
pub mod shaper;
mod slab;
pub mod time;
pub mod units;

pub use config::{Aging, Config};
pub use error::{ConfigError, Error};
pub use event::Event;
pub use flow::{
    Feedback, FlowCounters, LossMode, MacroflowKey, OpenParams, PathEstimate, Thresholds,
};
pub use id::{ClientId, FlowId, MacroflowId};
pub use manager::{CongestionManager, FlowInfo, MacroflowInfo};
pub use time::{Duration, Instant};
pub use units::{Bytes, Rate};
