//! Probe-driven CM experiments (sigcomm1999 §4.2–4.4): the CM protocol
//! (`cm-proto`) between a sender CM and a receiver CM on the simulator,
//! for applications that give the CM no feedback ([`crate::probe`]).
//!
//! - [`frequency`]: `probe-frequency`, loss-estimate accuracy and
//!   TCP-friendliness against probes per RTT (§4.2.1);
//! - [`reordering`]: `reordering`, reordering and duplication with the CM
//!   header (§4.3) and without it (§4.2.2's undo vs a naive count);
//! - [`simulation`]: one run, shared with `aging-probes`.

pub mod frequency;
pub mod reordering;
pub mod simulation;
