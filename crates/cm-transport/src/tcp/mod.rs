//! TCP: one sender shared by NewReno and TCP/CM, and a receiver.
//!
//! The sender keeps loss recovery (fast retransmit, NewReno partial ACKs,
//! RFC 6298 timeouts with Karn's algorithm or timestamps, go-back-N after a
//! timeout), receiver-window flow control and a SYN handshake in both modes;
//! only congestion control differs ([`CcMode`]). With [`TcpConfig::sack`]
//! the receiver sends SACK blocks (RFC 2018) and the sender recovers with
//! the RFC 6675 scoreboard instead of NewReno's one hole per round trip.
//!
//! Layout:
//! - `sender/`: [`TcpSender`]: its state and what it sends (`mod.rs`), ACK
//!   processing and NewReno recovery (`ack.rs`), SACK recovery (`sack.rs`),
//!   the retransmission timeout (`timeout.rs`), grants and requests in
//!   TCP/CM mode (`cm.rs`);
//! - `newreno.rs`: the congestion window of NewReno mode;
//! - `cm_account.rs`: TCP/CM's byte accounting towards the CM;
//! - `scoreboard.rs`, `ranges.rs`: SACK state and the range set it uses;
//! - `ledger.rs`: what was sent and not yet acknowledged (Karn, accounting);
//! - `rtt.rs`: the retransmission timer's estimator;
//! - `config.rs`, `receiver.rs`: configuration and [`TcpReceiver`].

mod cm_account;
mod config;
mod ledger;
mod newreno;
mod ranges;
mod receiver;
mod rtt;
mod scoreboard;
mod sender;

pub use config::{
    CcMode, Growth, ParseRtoInRecoveryError, ParseSsthreshRuleError, RtoInRecovery, SsthreshRule,
    TcpConfig, TcpConfigError, TcpReceiverConfig,
};
pub use receiver::{TcpReceiver, TcpReceiverStats};
pub use rtt::RttEstimator;
pub use sender::{TcpSender, TcpStats, WriteError};
