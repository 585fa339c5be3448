//! The receiving end of CC-UDP on a plain UDP socket (for `cm demo`'s and
//! `cm flow`'s receivers): one `cm_transport::ccudp` ack state per sending
//! connection, acks every second datagram and when the socket is drained
//! (cm-implementation-linux §3.3: application-level feedback).

use std::collections::HashMap;
use std::net::{SocketAddr, UdpSocket};

use anyhow::{Context, Result};
use cm_core::Instant;
use cm_transport::ccudp::receiver::{AckState, Arrival};
use cm_transport::ccudp::wire::{self, Ack, DataHeader, Packet};

/// Ack state per sender (address and session).
#[derive(Debug, Default)]
pub struct Acks {
    peers: HashMap<(SocketAddr, u16), AckState>,
    /// New data datagrams received.
    pub received: u64,
}

impl Acks {
    /// A datagram of `bytes` from `from` arrived at `now`. Returns the ack
    /// to send at once, if one is due; anything else (not CC-UDP data) is
    /// ignored.
    pub fn on_datagram(
        &mut self,
        bytes: &[u8],
        from: SocketAddr,
        now: Instant,
    ) -> Option<(SocketAddr, Ack)> {
        let Ok(Packet::Data { header, .. }) = wire::decode(bytes) else {
            return None;
        };
        self.on_data(&header, bytes.len(), from, now)
    }

    /// A data datagram with header `h`, `len` bytes long, from `from`
    /// arrived at `now` (already decoded). Returns the ack due, if any.
    pub fn on_data(
        &mut self,
        h: &DataHeader,
        len: usize,
        from: SocketAddr,
        now: Instant,
    ) -> Option<(SocketAddr, Ack)> {
        let st = self.peers.entry((from, h.session)).or_default();
        if st.on_data(h, len, now) == Arrival::New {
            self.received += 1;
        }
        if st.ack_due() {
            return st.take_ack(now).map(|a| (from, a));
        }
        None
    }

    /// Nothing more to read now: the acks for whatever is unacknowledged.
    pub fn drained(&mut self, now: Instant) -> Vec<(SocketAddr, Ack)> {
        self.peers
            .iter_mut()
            .filter_map(|(&(from, _), st)| st.take_ack(now).map(|a| (from, a)))
            .collect()
    }
}

/// Send `ack` to `to`; a full socket buffer loses it, as a network would
/// (acks are cumulative: the next one covers it).
pub fn send_ack(sock: &UdpSocket, to: SocketAddr, ack: &Ack) -> Result<()> {
    match sock.send_to(&ack.encode(), to) {
        Ok(_) => Ok(()),
        Err(e) if is_transient(&e) => Ok(()),
        Err(e) => Err(e).context("sending an ack"),
    }
}

/// A send or receive that may succeed later (full buffer, interrupted).
pub fn is_transient(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted
    ) || e.raw_os_error() == Some(105) // ENOBUFS
}
