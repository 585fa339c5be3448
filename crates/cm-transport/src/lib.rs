//! # cm-transport: sans-IO transports over the Congestion Manager
//!
//! State machines with no clock, no sockets and no randomness: time comes
//! in as [`cm_core::Instant`], packets come in and go out as values (with a
//! byte encoding for real sockets). The same code runs under the simulator
//! and over UDP. Shape like quinn-proto: `handle_*(now, input)`,
//! `poll_transmit(now)`, `poll_timeout()`, `handle_timeout(now)`.
//!
//! | module | what |
//! |---|---|
//! | [`segment`] | [`TcpSegment`] and its wire encoding |
//! | [`tcp`] | [`TcpSender`] (NewReno or TCP/CM, optionally with SACK) and [`TcpReceiver`] |
//! | [`cbr`] | constant-bit-rate UDP source and sink |
//! | [`audio`] | the layered audio server of sigcomm1999 §3.2.2 and its receiver |
//! | [`ccudp`] | CC-UDP's datagram feedback loop: wire format, the receiver's acks, the sender's ack → `cm_update` accounting |
//! | [`datagram`] | [`Datagram`], everything a driver carries |
//! | [`maxq`] | the MAXQ-packet queue with drop-from-head or drop-tail of a congestion-forcing proxy |
//!
//! ## Talking to the CM
//!
//! Transports never hold a [`cm_core::CongestionManager`]. A CM-controlled
//! transport queues [`CmCall`]s; the driver drains `poll_cm()` after every
//! call into the transport and forwards each call, in order, to the CM for
//! that transport's flow:
//!
//! - [`CmCall::Request`] -> `cm.request(now, flow)`
//! - [`CmCall::Notify`]`(n)` -> `cm.notify(now, flow, n)`
//! - [`CmCall::Update`]`(fb)` -> `cm.update(now, flow, fb)`
//!
//! When the CM emits `Event::Grant { flow, bytes }`, the driver calls
//! [`TcpSender::on_grant`]`(now, bytes)`, transmits the returned segment (if
//! any) and drains `poll_cm()` again: **`on_grant` itself queues the
//! `Notify`** (with the segment's payload length, or 0 to decline), so the
//! driver never calls `notify` on its own. All byte counts given to the CM
//! are payload bytes (the CM's MTU is the TCP MSS). When the CM emits
//! `Event::RateUpdate { estimate, .. }` for an audio flow, the driver calls
//! [`AudioSender::on_rate_update`]; the driver subscribes the audio flow with
//! `cm.set_thresholds`/`cm.set_rate_updates` when it opens it.
//!
//! ```
//! use cm_core::{Config, CongestionManager, Event, Instant, OpenParams};
//! use cm_transport::{CcMode, CmCall, TcpConfig, TcpSender};
//!
//! let mut cm = CongestionManager::new(Config::default()).unwrap();
//! let now = Instant::ZERO;
//! let client = cm.register_client(now).unwrap();
//! let flow = cm.open(now, client, OpenParams::to("192.0.2.1:80".parse().unwrap())).unwrap();
//! let cfg = TcpConfig { cc: CcMode::Cm, total: Some(10_000), ..TcpConfig::default() };
//! let mut tcp = TcpSender::new(cfg, now).unwrap();
//! let syn = tcp.poll_transmit(now).unwrap(); // control segments bypass the CM
//! # let _ = syn;
//! // ... after the SYN-ACK, drain calls and grants:
//! fn forward(cm: &mut CongestionManager, flow: cm_core::FlowId, now: Instant, tcp: &mut TcpSender) {
//!     while let Some(call) = tcp.poll_cm() {
//!         match call {
//!             CmCall::Request => cm.request(now, flow).unwrap(),
//!             CmCall::RequestMtus(k) => cm.request_mtus(now, flow, k).unwrap(),
//!             CmCall::Notify(n) => cm.notify(now, flow, n).unwrap(),
//!             CmCall::Update(fb) => cm.update(now, flow, fb).unwrap(),
//!         }
//!     }
//! }
//! forward(&mut cm, flow, now, &mut tcp);
//! while let Some(ev) = cm.poll_event() {
//!     if let Event::Grant { bytes, .. } = ev {
//!         let _segment = tcp.on_grant(now, bytes); // send it, then:
//!         forward(&mut cm, flow, now, &mut tcp);
//!     }
//! }
//! ```
#![warn(missing_docs)]

pub mod audio;
pub mod cbr;
pub mod ccudp;
pub mod datagram;
pub mod maxq;
pub mod segment;
pub mod tcp;
mod wire;

pub use audio::{
    AudioConfig, AudioConfigError, AudioFeedback, AudioPacket, AudioReceiver, AudioReceiverConfig,
    AudioSender,
};
pub use cbr::{CbrError, CbrPacket, CbrSink, CbrSource};
pub use datagram::Datagram;
pub use segment::{Flags, SackBlocks, TcpSegment};
pub use tcp::{
    CcMode, Growth, TcpConfig, TcpConfigError, TcpReceiver, TcpReceiverConfig, TcpReceiverStats,
    TcpSender, TcpStats, WriteError,
};
pub use wire::{DecodeError, MAX_PAYLOAD};

use cm_core::{Bytes, Feedback};

/// What a CM-controlled transport asks its driver to tell the CM about its
/// flow (see the crate docs for the protocol).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum CmCall {
    /// `cm_request`: ask for a grant of one MTU.
    Request,
    /// The k-MTU `cm_request` ([`TcpConfig::grant_mtus`] > 1): one grant
    /// may cover up to this many MTUs.
    RequestMtus(u32),
    /// `cm_notify`: this many payload bytes were sent (0 declines a grant).
    Notify(Bytes),
    /// `cm_update`: feedback about earlier transmissions.
    Update(Feedback),
}
