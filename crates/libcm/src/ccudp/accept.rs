//! A listening end that learns its peer from the first datagram: a
//! receiver binds a plain [`UdpSocket`], waits for the first CC-UDP (or CM
//! protocol) datagram, and connects a [`CcUdpSocket`](super::CcUdpSocket)
//! to whoever sent it ([`CcUdpSocket::from_std`](super::CcUdpSocket::from_std)
//! then [`CcUdpSocket::connect`](super::CcUdpSocket::connect)). Garbage in
//! front of it is read and discarded, so a stray datagram can never
//! become the peer.

use std::io;
use std::net::{SocketAddr, UdpSocket};

use super::wire;

/// What waits first on a listening socket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FirstDatagram {
    /// A CC-UDP or CM-protocol datagram from this address, left in the
    /// socket for the `CcUdpSocket` to read.
    Peer(SocketAddr),
    /// A datagram that is neither; it has been read and discarded.
    Garbage,
    /// Nothing yet (non-blocking socket), or an ICMP error was reported.
    Nothing,
}

/// Peek at the first datagram waiting on `listen` (see [`FirstDatagram`]).
pub fn first_datagram(listen: &UdpSocket) -> io::Result<FirstDatagram> {
    let mut b = [0u8; 64];
    match listen.peek_from(&mut b) {
        Ok((n, from)) => {
            let head = &b[..n.min(b.len())];
            if wire::decode(head).is_ok() || cm_proto::wire::is_cm(head) {
                Ok(FirstDatagram::Peer(from))
            } else {
                let _ = listen.recv_from(&mut b);
                Ok(FirstDatagram::Garbage)
            }
        }
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(FirstDatagram::Nothing),
        Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => Ok(FirstDatagram::Nothing),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn garbage_is_discarded_and_a_cc_udp_datagram_names_the_peer() {
        let listen = UdpSocket::bind("127.0.0.1:0").unwrap();
        listen.set_nonblocking(true).unwrap();
        assert_eq!(first_datagram(&listen).unwrap(), FirstDatagram::Nothing);
        let peer = UdpSocket::bind("127.0.0.1:0").unwrap();
        let to = listen.local_addr().unwrap();
        peer.send_to(b"not cc-udp at all", to).unwrap();
        let mut data = Vec::new();
        wire::DataHeader {
            session: 1,
            seq: 7,
            ts: 0,
        }
        .encode(b"payload", &mut data);
        peer.send_to(&data, to).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert_eq!(first_datagram(&listen).unwrap(), FirstDatagram::Garbage);
        let first = first_datagram(&listen).unwrap();
        assert_eq!(first, FirstDatagram::Peer(peer.local_addr().unwrap()));
        // Left in the socket.
        assert_eq!(first_datagram(&listen).unwrap(), first);
    }
}
