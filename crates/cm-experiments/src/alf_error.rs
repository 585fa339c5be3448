//! Errors and small helpers shared by the ALF experiments.

use cm_sim::splitmix64;

/// Why an ALF experiment could not run.
#[derive(Debug, thiserror::Error)]
pub enum AlfError {
    /// The topology was rejected.
    #[error(transparent)]
    Topology(#[from] cm_sim::TopologyError),
    /// The CM configuration was rejected.
    #[error(transparent)]
    Config(#[from] cm_core::ConfigError),
}

/// A deterministic offset in `0..range` derived from `seed`.
pub fn jitter(seed: u64, range: u64) -> u64 {
    let mut s = seed;
    splitmix64(&mut s) % range.max(1)
}
