//! # cm-sim: a deterministic discrete-event network simulator
//!
//! Integer-microsecond virtual time ([`cm_core::Instant`]), an event heap
//! ordered by (time, insertion sequence), a seeded xoshiro256** RNG owned by
//! the simulation, store-and-forward links with DropTail queues and optional
//! random loss, reordering and duplication (netem-like, see [`LinkConfig`]),
//! static shortest-path routing, and user-supplied [`Host`]s
//! generic over the packet [`Payload`]. The dumbbell of sigcomm1999 Fig 7 is
//! built by [`dumbbell`].
//!
//! ## Where it sits
//!
//! ```text
//! cm-core  <-  cm-sim  <-  cm-experiments  <-  cm (CLI: `cm sim`, `cm experiment`)
//! ```
//!
//! The simulator knows nothing of congestion control: it moves packets of
//! any [`Payload`] between [`Host`]s. It depends on `cm-core` only for
//! time. The experiments (`cm-experiments`) supply the hosts that run the
//! CM core and the `cm-transport` state machines, so the simulated code is
//! the code that ships.
//!
//! ## Layout
//!
//! [`Sim`] (the event loop and its read-only views) drives the network
//! (links, queues, routes, event queue, RNG, per-flow counters and the
//! trace) and calls each host through a [`Ctx`] that borrows the network.
//!
//! ```
//! use cm_core::{Duration, Instant, Rate};
//! use cm_sim::{
//!     dumbbell, CbrSource, DumbbellConfig, FlowTag, LinkConfig, QueueLimit, RawPayload, Sim,
//!     Sink,
//! };
//!
//! // One host on each side of a 1 Mbit/s, 20 ms bottleneck with a 10-packet queue.
//! let bottleneck = LinkConfig::new(1_000_000, Duration::from_millis(20), QueueLimit::Packets(10));
//! let d = dumbbell(&DumbbellConfig::symmetric(1, bottleneck))?;
//! let (src, dst) = (d.left_hosts[0], d.right_hosts[0]);
//! let mut sim = Sim::<RawPayload>::new(d.topology, 42)?;
//!
//! // 2 Mbit/s of 1000-byte packets for one second: twice the bottleneck.
//! let cbr = CbrSource::with_rate(
//!     dst,
//!     FlowTag(1),
//!     RawPayload { len: 1000 },
//!     Rate::from_bits_per_sec(2_000_000),
//!     Instant::ZERO,
//!     Instant::from_micros(1_000_000),
//! )
//! .expect("non-zero rate");
//! sim.attach(src, cbr)?;
//! sim.attach(dst, Sink::new())?;
//! sim.run_until_idle();
//!
//! let flow = sim.flow_stats(FlowTag(1)).expect("flow sent packets");
//! assert_eq!(flow.sent_packets, 250);
//! assert_eq!(flow.delivered_packets + flow.dropped(), 250);
//! assert!(flow.loss_rate() > 0.4);
//! assert_eq!(sim.host::<Sink>(dst).map(|s| s.packets), Some(flow.delivered_packets));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![warn(missing_docs)]

mod engine;
mod error;
mod event;
mod host;
mod link;
mod network;
mod packet;
mod rng;
pub mod spec;
mod stats;
mod topology;
mod trace;
mod traffic;

pub use engine::Sim;
pub use error::{SendError, TopologyError};
pub use host::{Ctx, Host};
pub use link::{LinkConfig, LinkStats, QueueLimit};
pub use packet::{FlowTag, LinkId, NodeId, Packet, Payload, RawPayload};
pub use rng::{SimRng, splitmix64};
pub use stats::FlowStats;
pub use topology::{Dumbbell, DumbbellConfig, LinkSpec, NodeKind, Topology, dumbbell};
pub use trace::{
    CSV_HEADER, DropKind, TraceKind, TraceMode, TraceRecord, write_csv, write_csv_record,
};
pub use traffic::{CbrSource, Sink};
