//! The CM protocol, sans-IO: how a sender CM learns loss and RTT for a
//! whole macroflow from the receiver CM, host to host, when the
//! applications give no feedback of their own (sigcomm1999 §2 Figs 2–3,
//! §4.2–4.4; RFC 3124 §4).
//!
//! Like `cm-core`, this crate reads no clock, opens no socket and draws no
//! random numbers: time comes in as [`cm_core::Instant`], randomness as a
//! secret the driver supplies, and datagrams go in and out as bytes.
//!
//! - [`wire`]: the CM header (Fig 10) and the response (Fig 11);
//! - [`prober`]: the sender side towards one host: handshake with
//!   fallback, probes twice per RTT, responses turned into `cm_update`
//!   feedback;
//! - [`responder`] and [`loss`]: the receiver side for one sending host:
//!   per-flow byte counts, loss detection from sequence numbers, hints;
//! - [`undo`]: §4.2.2's loss inference for a peer that cannot take the
//!   header, with its undo of false reductions;
//! - [`endpoint`]: one host's probers and responders behind one socket.
//!
//! # Transport: UDP port 3124
//!
//! The paper gives the CM an IP protocol number of its own (IPPROTO_CM,
//! §4.3), which the IETF never assigned; a raw IP protocol would also need
//! root on both ends and would not cross NATs or firewalls. The protocol
//! therefore runs over UDP: control packets (SYN, SYN-ACK, RST, PROBE,
//! RESPONSE) go between the two hosts' CM endpoints on a configurable port,
//! by default **3124** (after RFC 3124, the CM's RFC); data packets carry
//! the CM header in front of their payload on the application's own socket
//! pair, and the receiving side's libcm strips it.
//!
//! # Wire format (version 1)
//!
//! All integers are big-endian. Every datagram starts with the 16-byte
//! common header (Fig 10):
//!
//! ```text
//! byte 0      magic 0xCB
//! byte 1      version (high nibble, 1) | type (low nibble):
//!             1 SYN, 2 SYN-ACK, 3 RST, 4 PROBE, 5 RESPONSE, 6 DATA
//! bytes 2..4  protocol: the transport the receiver hands a DATA payload to
//!             (17: a datagram for the application's socket); 0 otherwise
//! bytes 4..8  flow id (DATA); number of flow entries (RESPONSE); 0 otherwise
//! bytes 8..16 sequence number:
//!             SYN, SYN-ACK  the initial sequence number (echoed)
//!             RST           the probe number that found no association
//!             PROBE         the probe number (ISN+1, ISN+2, …)
//!             RESPONSE      ThisProbe, the probe answered
//!             DATA          bits 63..48: the association's tag (the ISN's
//!                           low 16 bits); bits 47..0: the flow's packet
//!                           number (0, 1, 2, …)
//! ```
//!
//! A RESPONSE (Fig 11) continues:
//!
//! ```text
//! bytes 16..24  LastProbe: the previous probe the responder answered
//! bytes 24..28  µs the probe waited at the responder (subtracted from the RTT)
//! bytes 28..32  reserved, zero
//! then NumFlows entries of 28 bytes (at most 42):
//!   0..4   flow id
//!   4..12  datagram bytes received on the flow since the handshake, CM header
//!          included (cumulative)
//!   12..16 packets declared lost on the flow since the handshake (cumulative)
//!   16..18 hint: scheduler weight (0: none)
//!   18..20 reserved, zero
//!   20..24 hint: preferred rate, bytes/s (0: none)
//!   24..28 packets received on the flow (cumulative, duplicates not counted)
//! ```
//!
//! # Where this differs from the paper, and why
//!
//! - **Cumulative counts.** Fig 11 reports the bytes received between
//!   LastProbe and ThisProbe; here the counts are cumulative and the sender
//!   takes differences, so a lost response loses no information (Fig 8
//!   drops the interval whose response was lost).
//! - **Per-flow sequence numbers.** Fig 10's sequence number counts every
//!   packet to the destination host. On Linux the flows to one host are
//!   sent by different processes; one host-wide counter would put a shared
//!   atomic on every send. Per-flow numbers give the receiver the same gap
//!   detection, flow by flow, and the response reports losses per flow.
//! - **Loss settling.** A gap with three later packets is reported lost
//!   only if it is still missing when the next probe arrives (up to one
//!   probe interval later): the sender hears of it at a response anyway,
//!   and a reordering path does not look lossy ([`loss`]).
//! - **UDP transport**, above.
//!
//! # Example: a handshake, data and a probe between two endpoints
//!
//! ```
//! use cm_core::{Instant, LossMode};
//! use cm_proto::endpoint::{Endpoint, EndpointConfig, Incoming};
//! use cm_proto::prober::PeerState;
//!
//! let (a, b) = ("sender", "receiver");
//! let mut tx = Endpoint::new(EndpointConfig::default(), 1);
//! let mut rx = Endpoint::new(EndpointConfig::default(), 2);
//! let t = |ms: u64| Instant::from_micros(ms * 1000);
//!
//! // SYN → SYN-ACK.
//! assert_eq!(tx.connect(t(0), b), Some(PeerState::Handshaking));
//! let (_, syn) = tx.poll_transmit().unwrap();
//! rx.on_datagram(t(20), t(20), a, &syn);
//! let (_, syn_ack) = rx.poll_transmit().unwrap();
//! tx.on_datagram(t(40), t(40), b, &syn_ack);
//! assert_eq!(tx.state(&b), Some(PeerState::Negotiated));
//!
//! // Two 1000-byte datagrams of flow 7 (16 of them the CM header); the
//! // receiver counts them.
//! for _ in 0..2 {
//!     let header = tx.on_send(t(41), b, 7, 1000).unwrap();
//!     let mut dgram = header.to_vec();
//!     dgram.extend_from_slice(&[0; 984]);
//!     let got = rx.on_datagram(t(61), t(61), a, &dgram);
//!     assert_eq!(got, Incoming::Data { flow: 7, offset: 16 });
//! }
//!
//! // The probe (half an RTT later) and its response: 2000 bytes received.
//! tx.handle_timeout(t(100));
//! let (_, probe) = tx.poll_transmit().unwrap();
//! rx.on_datagram(t(120), t(120), a, &probe);
//! let (_, response) = rx.poll_transmit().unwrap();
//! tx.on_datagram(t(140), t(140), b, &response);
//! let (_, report) = tx.poll_report().unwrap();
//! assert_eq!((report.flow, report.feedback.nsent.get(), report.feedback.nrecd.get()), (7, 2000, 2000));
//! assert_eq!(report.feedback.loss, LossMode::None);
//! ```

pub mod counted;
pub mod endpoint;
pub mod loss;
pub mod prober;
pub mod responder;
pub mod undo;
pub mod wire;

pub use endpoint::{Endpoint, EndpointConfig, Incoming, PeerInfo};
pub use prober::{PeerState, Prober, ProberConfig, Report};
pub use wire::{DEFAULT_PORT, Hint, Packet};
