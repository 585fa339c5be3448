//! Why a requirement set has no answer.

/// A requirement set that is invalid, contradictory, or asks for what no
/// transport here offers. Selection never guesses past one of these.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SelectError {
    /// A value that makes no sense on its own (a zero delay, a minimum rate
    /// above the target, steps out of order, ...).
    #[error("invalid requirements: {0}")]
    Invalid(String),
    /// Every property prohibited.
    #[error(
        "reliability, preserveOrder, preserveMsgBoundaries and congestionControl are all \
         Prohibited: that is an unreliable, unordered byte stream without congestion control, \
         and no transport offers one (raw UDP keeps message boundaries)"
    )]
    EverythingProhibited,
    /// Reliability required with congestion control prohibited.
    #[error(
        "reliability is Required but congestionControl is Prohibited: every reliable transport \
         here (Linux TCP, TCP/CM) is congestion controlled; raw UDP is not reliable"
    )]
    ReliableWithoutCongestionControl,
    /// Something only SCTP (RFC 9260) offers.
    #[error("{0} needs SCTP (RFC 9260), which this project does not offer")]
    NeedsSctp(String),
    /// Ordering required without reliability.
    #[error(
        "preserveOrder is Required without reliability: no transport here orders without \
         retransmitting (CC-UDP and UDP deliver in arrival order); set preserveOrder to prefer \
         or no-preference"
    )]
    OrderWithoutReliability,
    /// An unreliable byte stream (message boundaries prohibited without
    /// reliability).
    #[error(
        "preserveMsgBoundaries is Prohibited without reliability: every unreliable transport \
         here (CC-UDP, UDP) is message-oriented"
    )]
    UnreliableStream,
    /// The delay target is too short for the rate to fill a packet.
    #[error(
        "a one-way delay target of {delay_ms} ms at {rate_bps} bit/s leaves room for {payload} \
         payload bytes per packet, below the {min}-byte floor: raise the delay target or the rate"
    )]
    DelayUnreachable {
        /// The target, milliseconds.
        delay_ms: u64,
        /// The rate planned for, bit/s.
        rate_bps: u64,
        /// The payload the budget allows.
        payload: u64,
        /// The floor ([`crate::tuning::MIN_PAYLOAD`]).
        min: usize,
    },
}
