//! CC-UDP, sans-IO: the datagram feedback loop of congestion-controlled
//! UDP (cm-implementation-linux §3.3: the application supplies the feedback
//! the kernel's UDP does not).
//!
//! One loop, used by every datagram sender over the CM: libcm's
//! `CcUdpSocket`, `cm demo`, `cm flow` and the simulator's ALF hosts.
//!
//! ```text
//! sender                                   receiver
//! Accounting::on_queued / on_departed
//!   DataHeader { session, seq, ts } ──────> AckState::on_data
//!                                           AckState::take_ack (every
//!                                           ACK_EVERY datagrams, when
//!                                           drained, or every period)
//! Accounting::on_ack ─> cm_update  <─────── Ack { highest, mask, counts, echo }
//! Accounting::handle_timeout ─> cm_update (persistent loss)
//! ```
//!
//! - [`wire`]: the 16-byte data header and the 52-byte ack, and their
//!   byte encoding;
//! - [`receiver`]: [`receiver::AckState`], which datagrams arrived and the
//!   acks that say so;
//! - [`feedback`]: [`feedback::Accounting`], the sender's record of every
//!   datagram, turning acks into [`cm_core::Feedback`] for `cm_update`
//!   (received, transient loss after three later arrivals, persistent loss
//!   after a retransmission timeout) with an RTT sample per ack.
//!
//! Time comes in as [`cm_core::Instant`]; the driver owns the clock and the
//! sockets (or the simulated network).
//!
//! ```
//! use cm_core::{Instant, LossMode};
//! use cm_transport::ccudp::{feedback::Accounting, receiver::AckState, wire::DataHeader};
//!
//! let (mut tx, mut rx) = (Accounting::new(), AckState::default());
//! let t0 = Instant::from_micros(1_000);
//! for _ in 0..2 {
//!     let seq = tx.on_queued(1_000);
//!     tx.on_departed(t0);
//!     let header = DataHeader { session: 7, seq, ts: 1_000 };
//!     rx.on_data(&header, 1_000, Instant::from_micros(21_000));
//! }
//! let ack = rx.take_ack(Instant::from_micros(21_000)).unwrap();
//! let now = Instant::from_micros(41_000);
//! let fb = tx.on_ack(now, &ack).unwrap();
//! assert_eq!((fb.nsent.get(), fb.nrecd.get(), fb.loss), (2_000, 2_000, LossMode::None));
//! assert_eq!(fb.rtt, Some(cm_core::Duration::from_millis(40)));
//! ```

pub mod feedback;
pub mod receiver;
pub mod wire;

#[cfg(test)]
mod feedback_tests;
