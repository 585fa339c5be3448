//! # cm-force: congestion control for programs that have none
//!
//! The transport-selection middleware paper (Hessler and Welzl, §3–§4.3)
//! shows that unresponsive UDP flows cause congestion collapse, and that
//! forcing them through a congestion-controlled channel with a small
//! queue that drops early prevents it. This crate does that on Linux with
//! the Congestion Manager, for programs that are never modified:
//!
//! - [`engine`]: the sender side of `cm wrap` (the `cm-wrap` `LD_PRELOAD`
//!   library runs it on a thread of the wrapped program): each flow's
//!   datagrams wait in a MAXQ queue ([`cm_transport::maxq`]) and leave
//!   from the program's own socket when the CM grants; the program's
//!   flows join the host's macroflows (through the daemon when it runs).
//! - [`receiver`]: the receiver CM for such flows: it counts what arrives
//!   and answers the sender's probes ([`cm_proto::counted`],
//!   sigcomm1999 §4.2.2), so neither program carries a CM header.
//! - [`proxy`]: `cm proxy`, the paper's VoIP proxy as a relay pair: the
//!   ingress queues (MAXQ) and sends through CC-UDP as the CM allows, the
//!   egress delivers to the real destination and acknowledges.
//! - [`inbox`] and [`run`]: the hand-over from the program's threads to
//!   the engine's, and the engine's loop.
//! - [`config`]: the settings, from the environment `cm wrap` sets.
//! - [`report`]: per-flow offered, sent and dropped counts and queueing
//!   delay.
#![warn(missing_docs)]

pub mod config;
pub mod engine;
pub mod inbox;
pub mod proxy;
pub mod receiver;
pub mod report;
pub mod run;

pub use config::WrapConfig;
pub use engine::{Engine, Offer};
pub use inbox::{Inbox, Msg};
pub use receiver::Receiver;
pub use report::{FlowReport, Report};
