//! CC-UDP transfers: datagrams through libcm's
//! [`libcm::ccudp::CcUdpSocket`] (cm-implementation-linux §3.3), the
//! receiving application sending nothing back; the sender learns loss and
//! RTT from the CM protocol's probes (sigcomm1999 §4.2–4.3), answered by
//! the receiving socket's receiver CM, or from CC-UDP's own acks when the
//! receiver runs none.
//!
//! **Setting up.** A receiving `CcUdpSocket` is connected to one peer, so
//! the receiver listens on a plain UDP port for control messages
//! ([`control`]): the sender binds its data socket, sends HELLO with that
//! socket's port, and the receiver answers READY with the port of a fresh
//! receiving socket connected to it. The data then flows between those two
//! sockets; the listening port carries only control messages.
//!
//! **Sending.** The sender writes `bytes` of payload as datagrams of
//! `max_payload()` (the last one shorter) with blocking sends (a short
//! write timeout lets it sample and honour its limits between them). Then
//! it drives the socket until every datagram that left is resolved —
//! reported received or lost, by probe responses or acks, so the flow has
//! nothing in flight at the CM — or [`DRAIN_LIMIT`] passes, and sends DONE;
//! the receiver answers REPORT with the payload bytes and datagrams it got.
//!
//! **Throughput.** CC-UDP does not retransmit, so a transfer "ends" when the
//! sender knows what became of its last datagram: `seconds` runs from the
//! first datagram queued until then (the sender's view, as TCP's runs until
//! its last byte is acknowledged; the setup round trip is not counted), and
//! `bytes` is the payload the receiver reported (the sender's estimate,
//! acknowledged datagrams × payload, if its report never arrives). The
//! receiver's own summary counts from its first arrival to its last.
//!
//! **The CM.** A lone transfer uses the caller's [`libcm::Cm`] if it is
//! given one (a daemon's, say), lending it to its `CcUdpSocket` (which
//! shares its CM as `Rc<RefCell<Cm>>`) and handing it back afterwards;
//! otherwise, and for CC-UDP transfers started among several (each on a
//! thread of its own, and a `Cm` is not `Send`), it makes an embedded CM
//! with [`ccudp_config`] (MTU 1472: a datagram with its 16-byte header
//! fills one 1500-byte IP packet). [`crate::SendSpec::payload`] makes
//! datagrams smaller.

pub(crate) mod control;
pub(crate) mod receiver;
pub(crate) mod sender;

use std::time::Duration;

/// After its last datagram the sender waits at most this long for every
/// datagram to be resolved.
pub const DRAIN_LIMIT: Duration = Duration::from_secs(3);

/// The CM configuration of a CC-UDP transfer: the default with an MTU of
/// [`crate::UDP_PAYLOAD_MAX`] (1472), so a full datagram (payload and
/// header) fills one 1500-byte IP packet.
pub fn ccudp_config() -> libcm::Config {
    libcm::Config {
        mtu: libcm::Bytes(crate::UDP_PAYLOAD_MAX as u64),
        ..libcm::Config::default()
    }
}

/// A 64-bit number nobody can predict across runs (std's hasher keys are
/// random per `RandomState`).
pub(crate) fn random_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(cm_clock::unix_now().to_bits().into());
    h.finish()
}
