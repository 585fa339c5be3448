//! # cm-select: transport selection middleware
//!
//! The middleware of the transport-selection paper (Hessler & Welzl,
//! "Seamless Transport Service Selection by Deploying a Middleware", §4),
//! on top of the Congestion Manager. The application states its
//! **requirements** with the IETF TAPS selection properties and preference
//! levels (RFC 9622 §6.2) and its **behaviour** (§4.1: greedy or
//! application-limited, rate steps or bounds, on/off pattern);
//! [`select`] picks and tunes a transport among those this project offers,
//! and [`Preconnection`] turns the choice into a usable [`Connection`] with
//! QoS feedback against the requirements (§4.2).
//!
//! ```
//! use cm_select::{Requirements, Transport, Controller, select};
//! use cm_core::{Duration, Rate};
//!
//! let voice = Requirements::media(Rate::from_bits_per_sec(64_000), Duration::from_millis(150));
//! let c = select(&voice).unwrap();
//! assert_eq!((c.transport, c.controller), (Transport::CcUdp, Some(Controller::Tfrc)));
//! assert_eq!(c.packet_size, Some(160));
//! println!("{c}");
//! // CC-UDP with TFRC, 160-byte packets, queue 1: unreliable, delay-sensitive
//! // (target 150 ms) media needs a smooth TCP-friendly rate (RFC 5348); raw UDP
//! // refused because congestion control is not prohibited
//! ```
//!
//! ## Transports offered
//!
//! | transport | what | used for |
//! |---|---|---|
//! | [`Transport::LinuxTcp`] | the kernel's TCP, `std::net::TcpStream` | reliable ordered streams |
//! | [`Transport::CcUdp`] | `libcm::ccudp::CcUdpSocket`, controller set with `Cm::set_controller` | unreliable messages |
//! | [`Transport::Udp`] | `std::net::UdpSocket` | only with `congestionControl` = Prohibit |
//!
//! TCP/CM (cm-ttcp's TCP over UDP with the CM's congestion control) is not
//! offered: it is a ttcp-style bulk-transfer driver (its connection types
//! are private to cm-ttcp and one-way), not a reusable bidirectional
//! connection, so reliable streams get Linux TCP.
//!
//! ## Rule table
//!
//! Selection checks the values ([`SelectError::Invalid`]), then the first
//! matching row decides. "Unreliable" means reliability Avoid or Prohibit,
//! Prefer with a delay target, or No Preference with ordering not wanted or
//! a delay target.
//!
//! | # | requirements | choice | source |
//! |---|---|---|---|
//! | 1 | all four TAPS properties Prohibit | error [`SelectError::EverythingProhibited`] | RFC 9622 §6.2 (Prohibit: fail if not possible) |
//! | 2 | congestionControl Prohibit, reliability Require | error [`SelectError::ReliableWithoutCongestionControl`] | RFC 9622 §6.2.9; paper §2.1 |
//! | 3 | congestionControl Prohibit, preserveOrder Require | error [`SelectError::OrderWithoutReliability`] | RFC 9622 §6.2.4 |
//! | 4 | congestionControl Prohibit | raw UDP | RFC 9622 §6.2.9; paper §3 and RFC 8085 §3.1 on why not otherwise |
//! | 5 | reliable, preserveMsgBoundaries Require | error [`SelectError::NeedsSctp`] | paper §2.1.2 (SCTP), RFC 9260 |
//! | 6 | reliable, preserveOrder Prohibit | error [`SelectError::NeedsSctp`] | paper §2.1.2 (unordered reliable delivery) |
//! | 7 | reliable | Linux TCP (`TCP_NODELAY` with a delay target; on/off send buffer) | RFC 9293, paper §2.1; RFC 2861 |
//! | 8 | unreliable, preserveOrder Require | error [`SelectError::OrderWithoutReliability`] | RFC 9622 §6.2.4 |
//! | 9 | unreliable, preserveMsgBoundaries Prohibit | error [`SelectError::UnreliableStream`] | RFC 9622 §6.2.2 |
//! | 10 | unreliable, feedback NACK | CC-UDP with ISCC(l=2) | iscc §V-D: loss that grows little with the number of flows |
//! | 11 | unreliable, delay target | CC-UDP with TFRC, one-packet queue | RFC 5348 §1 (smooth rate for telephony, streaming); paper §4.3.1 (MAXQ 1) |
//! | 12 | unreliable, rate steps (layered) | CC-UDP with binomial SQRT | Bansal & Balakrishnan 2001 (paper ref. \[7\]); paper §4.1 |
//! | 13 | unreliable, rate bounds | CC-UDP with binomial IIAD | Bansal & Balakrishnan 2001; paper §4.1 |
//! | 14 | unreliable, application-limited with a target rate | CC-UDP with TFRC | RFC 5348 §1 |
//! | 15 | unreliable, greedy | CC-UDP with AIMD | sigcomm1999 §4.1, RFC 5681; paper §2.1 |
//!
//! congestionControl Avoid is noted in the reason and not honoured (rows
//! 5–15 apply): raw UDP is used only when Prohibited. Every datagram
//! choice is tuned by [`tuning`]: the packet size from the delay target and
//! rate (§4.2), a one-packet queue for delay-critical traffic (§4.3.1) and
//! an on/off buffer for senders with pauses when delay does not matter
//! (§4.1, RFC 2861). A delay target the rate cannot fill one
//! [`tuning::MIN_PAYLOAD`]-byte packet within is an error
//! ([`SelectError::DelayUnreachable`]).
//!
//! ## Modules
//!
//! | module | what |
//! |---|---|
//! | `props` | [`Requirements`], [`Preference`], [`Behaviour`], [`RateShape`], [`OnOff`], [`Feedback`] |
//! | `text` | the `key=value` text form shared by `cm select` and `cm_select` |
//! | `rules` | [`select`] |
//! | [`tuning`] | packet size and buffering formulas |
//! | `choice` | [`Choice`], [`Transport`], [`Controller`], [`Buffering`] |
//! | `error` | [`SelectError`] |
//! | `conn` | [`Preconnection`], [`Listener`], [`Connection`], [`Qos`] |
#![warn(missing_docs)]

mod choice;
mod conn;
mod error;
mod props;
mod rules;
mod text;
pub mod tuning;

pub use choice::{Buffering, Choice, Controller, Transport};
pub use conn::{Connection, Listener, Preconnection, Qos, Status, Verdict};
pub use error::SelectError;
pub use props::{Behaviour, Feedback, OnOff, Preference, RateShape, Requirements};
pub use rules::select;
pub use text::{parse_duration, parse_rate};
