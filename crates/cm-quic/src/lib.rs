//! # cm-quic: QUIC connections in CM macroflows
//!
//! A [quinn] congestion controller backed by libcm: each QUIC connection is
//! a CM flow to its peer, its window is its share of the macroflow's
//! window, and its ACKs, losses and RTTs are `cm_update`s. QUIC connections
//! and every other CM flow to the same host (libcm programs, TCP/CM, kernel
//! TCP on `cm`) share one macroflow when they share a CM: the daemon's
//! (`Cm::connect`), or one embedded CM in this program.
//!
//! ```no_run
//! use std::sync::Arc;
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let cm = cm_quic::CmThread::spawn(libcm::Cm::new)?; // the daemon, else embedded
//! let peer: std::net::SocketAddr = "192.0.2.7:4433".parse()?;
//! let mut transport = quinn::TransportConfig::default();
//! transport.congestion_controller_factory(Arc::new(cm_quic::CmCongestion::new(cm, peer)));
//! // client_config.transport_config(Arc::new(transport)); endpoint.connect_with(client_config, peer, "name")
//! # Ok(()) }
//! ```
//!
//! quinn does not tell a controller factory the peer's address, so a
//! factory is made per connection: a client passes one in the connection's
//! `ClientConfig`, a server in `Incoming::accept_with` (see [`transfer`]).
//! The example `cargo run -p cm-quic --example quic_transfer -- --help`
//! runs a server and a client.
#![warn(missing_docs)]

mod actor;
mod controller;
pub mod transfer;

pub use actor::{CmThread, StartError};
pub use controller::{CmCongestion, CmController};
