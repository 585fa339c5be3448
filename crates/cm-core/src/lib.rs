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
//! ## Where it sits
//!
//! ```text
//! cm-core  <-  cm-transport  <-  libcm, cm-ttcp, cm-experiments
//! cm-core  <-  cm-ipc        <-  cm-daemon, libcm
//! cm-core  <-  cm-sim        <-  cm-experiments
//! ```
//!
//! This crate is the bottom layer and depends on no other crate of the
//! project. Transports (`cm-transport`) and the simulator (`cm-sim`) drive
//! it; the control protocol (`cm-ipc`), the daemon and the client library
//! (`libcm`) carry its calls between processes; the `cm` command line sits
//! on top of all of them.
//!
//! ## One round trip
//!
//! A client opens a flow, asks to send, is granted one MTU, says what it
//! sent, reports the receiver's feedback one RTT later, and asks what the
//! CM now knows about the path:
//!
//! ```
//! use cm_core::{Config, CongestionManager, Duration, Event, Feedback, Instant, OpenParams};
//!
//! let mut cm = CongestionManager::new(Config::default())?;
//! let t0 = Instant::ZERO;
//! let client = cm.register_client(t0)?;
//! // cm_open
//! let flow = cm.open(t0, client, OpenParams::to("192.0.2.1:80".parse()?))?;
//! // Nothing is known about the path yet: "no estimate" is None, not 0.
//! assert_eq!(cm.query(flow)?.srtt, None);
//! // cm_request, then cmapp_send arrives as a grant event.
//! cm.request(t0, flow)?;
//! let Some(Event::Grant { flow: granted, bytes }) = cm.poll_event() else {
//!     panic!("a fresh flow is granted at once");
//! };
//! assert_eq!((granted, bytes), (flow, cm.mtu(flow)?));
//! // cm_notify: the application sent what it was granted.
//! cm.notify(t0, flow, bytes)?;
//! // cm_update: 40 ms later the receiver reports every byte arrived.
//! let t1 = t0 + Duration::from_millis(40);
//! cm.update(t1, flow, Feedback::acked(bytes.get(), Duration::from_millis(40)))?;
//! // cm_query: the path now has an RTT estimate.
//! assert_eq!(cm.query(flow)?.srtt, Some(Duration::from_millis(40)));
//! cm.close(t1, flow)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! ## The calls by their papers' names
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
#![warn(missing_docs)]

pub mod bandwidth;
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

pub use bandwidth::{BunchSampler, BurstSchedule, CapacityFilter};
pub use config::{Aging, Config};
pub use error::{ConfigError, Error};
pub use event::Event;
pub use flow::{
    CongestionCounters, Feedback, FlowCounters, LossMode, MacroflowKey, OpenParams, PathEstimate,
    Thresholds,
};
pub use id::{ClientId, FlowId, MacroflowId};
pub use manager::{CongestionManager, FlowInfo, MacroflowInfo};
pub use time::{Duration, Instant};
pub use units::{Bytes, Rate};
