//! Typed errors: bad input is an error value, never a panic.

use crate::id::{ClientId, FlowId, MacroflowId};
use crate::time::Duration;
use crate::units::Bytes;

/// Why an API call was refused. Nothing is changed when an error is returned.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// No open flow has this id (never opened, closed, or reclaimed).
    #[error("unknown flow {0}")]
    UnknownFlow(FlowId),
    /// No macroflow has this id.
    #[error("unknown macroflow {0}")]
    UnknownMacroflow(MacroflowId),
    /// No registered client has this id.
    #[error("unknown client {0}")]
    UnknownClient(ClientId),
    /// An RTT sample of zero or above the configured maximum.
    #[error("invalid RTT sample {0} (must be > 0 and <= the configured maximum)")]
    InvalidRtt(Duration),
    /// `update` reported more bytes received than sent.
    #[error("update reports {nrecd} received of only {nsent} sent")]
    ReceivedMoreThanSent {
        /// Bytes sent, as reported.
        nsent: Bytes,
        /// Bytes received, as reported.
        nrecd: Bytes,
    },
    /// A byte count that would overflow the CM's counters.
    #[error("byte count {0} is too large")]
    TooLarge(Bytes),
    /// A request for zero MTUs, or more than the configured maximum.
    #[error("invalid request size: {0} MTUs")]
    InvalidRequest(u32),
    /// Rate-change thresholds must be finite factors >= 1.
    #[error("invalid threshold factor {0}: must be finite and >= 1")]
    InvalidThreshold(String),
    /// Scheduler weights must be in 1..=65535.
    #[error("invalid weight {0}: must be in 1..=65535")]
    InvalidWeight(u32),
    /// An MTU outside 1..=65535 bytes.
    #[error("invalid MTU {0}")]
    InvalidMtu(Bytes),
    /// A configured limit (flows or clients) was reached.
    #[error("limit reached: {0}")]
    LimitReached(&'static str),
}

/// Why a [`crate::Config`] was rejected.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid configuration: {0}")]
pub struct ConfigError(pub String);
