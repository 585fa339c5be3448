//! Simulated hosts that run the CM and its transports, scenarios as data, and the papers experiments.
#![warn(missing_docs)]

pub mod alf;
pub mod experiments;
pub mod hosts;
pub mod plot;
pub mod progress;
pub mod scenario;
pub mod seeded;
pub mod simulate;
