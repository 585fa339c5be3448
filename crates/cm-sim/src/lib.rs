//! A deterministic discrete-event network simulator.
#![warn(missing_docs)]
