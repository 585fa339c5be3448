//! The vat receiver: takes frames from a CC-UDP peer (acknowledging them,
//! which is the sender CM's feedback) or from plain UDP, and measures them
//! ([`VatReport`]).

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::{AsFd, BorrowedFd};
use std::time::{Duration, Instant};

use cm_force::proxy::{ProxyError, Relay};
use libcm::ccudp::{Accepting, SharedCm};

use super::stats::Tally;
use super::{End, Frame, Transport, VatReport};

/// The receiver's settings.
#[derive(Clone, Debug)]
pub struct ReceiverConfig {
    /// Where to listen.
    pub listen: SocketAddr,
    /// How the frames arrive.
    pub transport: Transport,
    /// Stop when no frame has arrived for this long after the first (the
    /// sender's [`End`] stops it at once). It must outlast the sender's
    /// longest stall: through the CM, backed-off retransmission timeouts
    /// can hold a flow for seconds, and a receiver that stopped then
    /// would never acknowledge again.
    pub idle: Duration,
}

enum Socket {
    /// Through the CM: the first CC-UDP sender is the peer.
    Cm(Accepting),
    Udp(UdpSocket),
}

/// The receiver; drive it with [`cm_force::proxy::run_all`] until
/// [`VatReceiver::idle`] or a deadline.
pub struct VatReceiver {
    cm: SharedCm,
    socket: Socket,
    cfg: ReceiverConfig,
    tally: Tally,
    last_frame: Option<Instant>,
    peer: Option<SocketAddr>,
    buf: Vec<u8>,
}

impl VatReceiver {
    /// Listen on `cfg.listen`.
    pub fn bind(cm: &SharedCm, cfg: ReceiverConfig) -> Result<VatReceiver, ProxyError> {
        let s = UdpSocket::bind(cfg.listen).map_err(|source| ProxyError::Setup {
            what: format!("binding {}", cfg.listen),
            error: source,
        })?;
        s.set_nonblocking(true)?;
        let socket = match cfg.transport {
            Transport::Cm => Socket::Cm(Accepting::Listening(s)),
            Transport::Udp => Socket::Udp(s),
        };
        Ok(VatReceiver {
            cm: SharedCm::clone(cm),
            socket,
            cfg,
            tally: Tally::default(),
            last_frame: None,
            peer: None,
            buf: vec![0u8; 65_536],
        })
    }

    /// Where it listens.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        match &self.socket {
            Socket::Udp(s) => s.local_addr(),
            Socket::Cm(a) => a.local_addr(),
        }
    }

    /// The sender, once a frame has named it.
    pub fn peer(&self) -> Option<SocketAddr> {
        self.peer
    }

    /// Whether frames stopped: none for [`ReceiverConfig::idle`] since the
    /// last one.
    pub fn idle(&self) -> bool {
        self.last_frame
            .is_some_and(|t| t.elapsed() >= self.cfg.idle)
    }

    /// The report so far.
    pub fn report(&self) -> VatReport {
        self.tally.report()
    }

    fn take(&mut self, n: usize, from: Option<SocketAddr>) {
        let b = &self.buf[..n];
        if let Some(f) = Frame::decode(b) {
            self.tally.frame(f, crate::unix_ns());
            self.last_frame = Some(Instant::now());
        } else if let Some(e) = End::decode(b).filter(|_| from == self.peer) {
            self.tally.end(e.made);
        } else {
            self.tally.malformed();
        }
    }

    /// Whether the sender's end message came.
    pub fn ended(&self) -> bool {
        self.tally.ended()
    }
}

impl Relay for VatReceiver {
    fn step(&mut self) -> Result<(), ProxyError> {
        if let Socket::Cm(a) = &mut self.socket {
            if a.poll(&self.cm)? {
                self.tally.malformed();
            }
            if self.peer.is_none() {
                self.peer = a.socket_ref().and_then(|c| c.peer_addr().ok());
            }
        }
        loop {
            // Through the CM only the peer's data arrives; over plain UDP
            // the first frame names the peer.
            let r = match &mut self.socket {
                Socket::Cm(a) => match a.socket() {
                    Some(cc) => cc.recv(&mut self.buf).map(|n| (n, self.peer)),
                    None => return Ok(()),
                },
                Socket::Udp(s) => s.recv_from(&mut self.buf).map(|(n, from)| {
                    if Frame::decode(&self.buf[..n]).is_some() {
                        self.peer.get_or_insert(from);
                    }
                    (n, Some(from))
                }),
            };
            match r {
                Ok((n, from)) => self.take(n, from),
                Err(e) if super::sender::is_transient(&e) => break,
                Err(e) => return Err(e.into()),
            }
        }
        // Garbage the channel refused counts too.
        if let Some(cc) = match &self.socket {
            Socket::Cm(a) => a.socket_ref(),
            Socket::Udp(_) => None,
        } {
            self.tally.set_channel_malformed(cc.stats().malformed);
        }
        Ok(())
    }

    fn wake(&mut self) -> Result<Duration, ProxyError> {
        let cc = match &mut self.socket {
            Socket::Cm(a) => a.socket(),
            Socket::Udp(_) => None,
        };
        Ok(match cc {
            Some(cc) => cc.next_timeout()?.unwrap_or(Duration::from_millis(200)),
            None => Duration::from_millis(200),
        })
    }

    /// The sender ended, or frames stopped ([`VatReceiver::idle`]).
    fn finished(&self) -> bool {
        self.ended() || self.idle()
    }

    fn fds(&self) -> Vec<BorrowedFd<'_>> {
        match &self.socket {
            Socket::Udp(s) => vec![s.as_fd()],
            Socket::Cm(a) => a.fd().into_iter().collect(),
        }
    }
}
