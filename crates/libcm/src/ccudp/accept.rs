//! A listening end that learns its peer from the first datagram: a
//! receiver binds a plain [`UdpSocket`], waits for the first CC-UDP (or CM
//! protocol) datagram, and connects a [`CcUdpSocket`] to whoever sent it
//! ([`Accepting`], built on [`first_datagram`]). Garbage in front of it is
//! read and discarded, so a stray datagram can never become the peer.

use std::io;
use std::net::{SocketAddr, ToSocketAddrs, UdpSocket};
use std::os::fd::{AsFd, BorrowedFd};

use super::{CcUdpSocket, SharedCm, wire};

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

/// A receiving end that takes the sender of the first CC-UDP datagram as
/// its peer: listening until then, a connected, non-blocking
/// [`CcUdpSocket`] after.
pub enum Accepting {
    /// No CC-UDP datagram yet.
    Listening(UdpSocket),
    /// Connected to the peer.
    Connected(Box<CcUdpSocket>),
    /// Connecting failed (the error was returned by [`Accepting::poll`]).
    Failed,
}

impl Accepting {
    /// Listen on `addr` (non-blocking).
    pub fn bind(addr: impl ToSocketAddrs) -> io::Result<Accepting> {
        let s = UdpSocket::bind(addr)?;
        s.set_nonblocking(true)?;
        Ok(Accepting::Listening(s))
    }

    /// Connect to the first peer once its datagram waits (a flow on
    /// `cm`). Returns whether a datagram that was not CC-UDP was read and
    /// discarded. Never blocks.
    pub fn poll(&mut self, cm: &SharedCm) -> io::Result<bool> {
        let Accepting::Listening(l) = self else {
            return Ok(false);
        };
        let from = match first_datagram(l)? {
            FirstDatagram::Peer(from) => from,
            FirstDatagram::Garbage => return Ok(true),
            FirstDatagram::Nothing => return Ok(false),
        };
        let Accepting::Listening(l) = std::mem::replace(self, Accepting::Failed) else {
            return Ok(false);
        };
        let mut cc = CcUdpSocket::from_std(cm, l)?;
        cc.connect(from)?;
        cc.set_nonblocking(true)?;
        *self = Accepting::Connected(Box::new(cc));
        Ok(false)
    }

    /// The connected socket, once there is one.
    pub fn socket(&mut self) -> Option<&mut CcUdpSocket> {
        match self {
            Accepting::Connected(c) => Some(c),
            _ => None,
        }
    }

    /// The connected socket, read-only.
    pub fn socket_ref(&self) -> Option<&CcUdpSocket> {
        match self {
            Accepting::Connected(c) => Some(c),
            _ => None,
        }
    }

    /// The local address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        match self {
            Accepting::Listening(s) => s.local_addr(),
            Accepting::Connected(c) => c.local_addr(),
            Accepting::Failed => Err(io::Error::other("no socket: connecting failed")),
        }
    }

    /// The descriptor to poll (none after a failure).
    pub fn fd(&self) -> Option<BorrowedFd<'_>> {
        match self {
            Accepting::Listening(s) => Some(s.as_fd()),
            Accepting::Connected(c) => Some(c.as_fd()),
            Accepting::Failed => None,
        }
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

    #[test]
    fn accepting_connects_to_the_first_cc_udp_sender() {
        use std::cell::RefCell;
        use std::rc::Rc;
        let cm: SharedCm = Rc::new(RefCell::new(
            crate::Cm::embedded(crate::Config::default()).unwrap(),
        ));
        let mut a = Accepting::bind("127.0.0.1:0").unwrap();
        let to = a.local_addr().unwrap();
        assert!(!a.poll(&cm).unwrap() && a.socket().is_none());
        let junk = UdpSocket::bind("127.0.0.1:0").unwrap();
        junk.send_to(b"junk", to).unwrap();
        let mut tx = CcUdpSocket::bind(&cm, "127.0.0.1:0").unwrap();
        tx.connect(to).unwrap();
        tx.send(b"hello").unwrap();
        tx.flush(Some(std::time::Duration::from_secs(2))).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert!(a.poll(&cm).unwrap(), "the junk is read first");
        assert!(!a.poll(&cm).unwrap());
        let rx = a.socket().unwrap();
        assert_eq!(rx.peer_addr().unwrap(), tx.local_addr().unwrap());
        rx.set_read_timeout(Some(std::time::Duration::from_secs(2)))
            .unwrap();
        rx.set_nonblocking(false).unwrap();
        let mut buf = [0u8; 64];
        let n = rx.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"hello");
        assert!(a.fd().is_some() && a.socket_ref().is_some());
    }
}
