//! TAPS's Preconnection → Connection (RFC 9622 §6, §7): the chosen
//! transport over real sockets, tuned, with QoS feedback.
//!
//! A [`Preconnection`] runs [`crate::select`] once; [`Preconnection::initiate`]
//! opens the chosen transport towards the remote endpoint, and
//! [`Preconnection::listen`] waits for one at the local endpoint. Both give
//! a [`Connection`]. For the datagram transports the listener learns its
//! peer from the first datagram that arrives (peeked, so the
//! [`Connection`] still delivers it), so the initiating side must send
//! first.
//!
//! The CC-UDP side uses a [`libcm::Cm`] per preconnection unless one is given
//! with [`Preconnection::with_cm`] (then the connection's flows share
//! macroflows with the caller's other flows to the same host). The chosen
//! controller is set on the flow's macroflow with `Cm::set_controller`, so
//! it applies to every flow of that macroflow.

mod connection;
pub(crate) mod qos;

use std::cell::RefCell;
use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::rc::Rc;
use std::time::{Duration as StdDuration, Instant as StdInstant};

use libcm::ccudp::{CcUdpSocket, SharedCm};
use libcm::{Cm, Config};

pub use connection::Connection;
pub use qos::{Qos, Status, Verdict};

use crate::choice::{Choice, Transport};
use crate::error::SelectError;
use crate::props::Requirements;

/// Requirements, the selected transport and the endpoints, before a
/// connection exists.
#[derive(Debug)]
pub struct Preconnection {
    req: Requirements,
    choice: Choice,
    remote: SocketAddr,
    local: Option<SocketAddr>,
    cm: Option<SharedCm>,
}

impl Preconnection {
    /// Select a transport for `req` towards `remote` (for `listen`, the
    /// remote may be any address; set the local one with
    /// [`Preconnection::with_local`]).
    pub fn new(req: Requirements, remote: SocketAddr) -> Result<Preconnection, SelectError> {
        let choice = crate::select(&req)?;
        Ok(Preconnection {
            req,
            choice,
            remote,
            local: None,
            cm: None,
        })
    }

    /// A listening preconnection at `local`.
    pub fn listener(req: Requirements, local: SocketAddr) -> Result<Preconnection, SelectError> {
        Ok(Preconnection::new(req, local)?.with_local(local))
    }

    /// Bind to `local` (port 0: any).
    pub fn with_local(mut self, local: SocketAddr) -> Preconnection {
        self.local = Some(local);
        self
    }

    /// Use this CM for CC-UDP instead of a new embedded one.
    pub fn with_cm(mut self, cm: SharedCm) -> Preconnection {
        self.cm = Some(cm);
        self
    }

    /// What selection chose.
    pub fn choice(&self) -> &Choice {
        &self.choice
    }

    /// The requirements.
    pub fn requirements(&self) -> &Requirements {
        &self.req
    }

    fn shared_cm(&self) -> io::Result<SharedCm> {
        match &self.cm {
            Some(cm) => Ok(Rc::clone(cm)),
            None => Cm::embedded(Config::default())
                .map(|cm| Rc::new(RefCell::new(cm)))
                .map_err(io::Error::other),
        }
    }

    fn any_local(&self) -> SocketAddr {
        self.local.unwrap_or_else(|| {
            if self.remote.is_ipv4() {
                SocketAddr::from(([0, 0, 0, 0], 0))
            } else {
                SocketAddr::from(([0u16; 8], 0))
            }
        })
    }

    /// Open the chosen transport to the remote endpoint (TAPS `Initiate`).
    pub fn initiate(&self) -> io::Result<Connection> {
        match self.choice.transport {
            Transport::LinuxTcp => {
                let s = TcpStream::connect_timeout(&self.remote, StdDuration::from_secs(10))?;
                Connection::tcp(self, s)
            }
            Transport::CcUdp => {
                let cm = self.shared_cm()?;
                let mut s = CcUdpSocket::bind(&cm, self.any_local())?;
                s.connect(self.remote)?;
                Connection::cc_udp(self, s)
            }
            Transport::Udp => {
                let s = UdpSocket::bind(self.any_local())?;
                s.connect(self.remote)?;
                Connection::udp(self, s)
            }
        }
    }

    /// Bind the local endpoint and wait for peers (TAPS `Listen`).
    pub fn listen(&self) -> io::Result<Listener<'_>> {
        let local = self.local.ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                "listen needs a local endpoint (with_local)",
            )
        })?;
        let sock = match self.choice.transport {
            Transport::LinuxTcp => Bound::Tcp(TcpListener::bind(local)?),
            Transport::CcUdp | Transport::Udp => Bound::Udp(Some(UdpSocket::bind(local)?)),
        };
        Ok(Listener { pre: self, sock })
    }
}

#[derive(Debug)]
enum Bound {
    Tcp(TcpListener),
    /// Taken by the first accept: a datagram listener serves one peer.
    Udp(Option<UdpSocket>),
}

/// A listening endpoint; [`Listener::accept`] gives connections.
#[derive(Debug)]
pub struct Listener<'a> {
    pre: &'a Preconnection,
    sock: Bound,
}

impl Listener<'_> {
    /// The bound address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        match &self.sock {
            Bound::Tcp(l) => l.local_addr(),
            Bound::Udp(Some(s)) => s.local_addr(),
            Bound::Udp(None) => Err(io::Error::new(
                io::ErrorKind::NotConnected,
                "the datagram listener has served its one peer",
            )),
        }
    }

    /// The next connection, waiting up to `timeout` (TCP: a connect; UDP
    /// and CC-UDP: the first datagram, which the connection then delivers;
    /// a datagram listener serves one peer).
    pub fn accept(&mut self, timeout: StdDuration) -> io::Result<Connection> {
        let deadline = StdInstant::now() + timeout;
        match &mut self.sock {
            Bound::Tcp(l) => {
                l.set_nonblocking(true)?;
                loop {
                    match l.accept() {
                        Ok((s, _)) => {
                            s.set_nonblocking(false)?;
                            return Connection::tcp(self.pre, s);
                        }
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                            if StdInstant::now() >= deadline {
                                return Err(timed_out());
                            }
                            std::thread::sleep(StdDuration::from_millis(2));
                        }
                        Err(e) => return Err(e),
                    }
                }
            }
            Bound::Udp(slot) => {
                let s = slot.as_ref().ok_or_else(|| {
                    io::Error::new(
                        io::ErrorKind::NotConnected,
                        "the datagram listener has served its one peer",
                    )
                })?;
                s.set_read_timeout(Some(timeout.max(StdDuration::from_millis(1))))?;
                let mut b = [0u8; 1];
                let peer = match s.peek_from(&mut b) {
                    Ok((_, peer)) => peer,
                    Err(e)
                        if matches!(
                            e.kind(),
                            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                        ) =>
                    {
                        return Err(timed_out());
                    }
                    Err(e) => return Err(e),
                };
                s.set_read_timeout(None)?;
                let s = slot.take().ok_or_else(timed_out)?;
                if self.pre.choice.transport == Transport::Udp {
                    s.connect(peer)?;
                    return Connection::udp(self.pre, s);
                }
                let cm = self.pre.shared_cm()?;
                let mut c = CcUdpSocket::from_std(&cm, s)?;
                c.connect(peer)?;
                Connection::cc_udp(self.pre, c)
            }
        }
    }
}

fn timed_out() -> io::Error {
    io::Error::new(
        io::ErrorKind::TimedOut,
        "no peer arrived before the timeout",
    )
}
