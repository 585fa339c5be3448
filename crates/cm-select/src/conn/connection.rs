//! An established connection over the chosen transport.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::os::fd::AsFd;
use std::time::Duration as StdDuration;

use cm_core::{Duration, Rate};
use libcm::ccudp::CcUdpSocket;

use super::Preconnection;
use super::qos::{Qos, judge};
use crate::choice::{Buffering, Choice};
use crate::props::Requirements;
use crate::tuning;
use cm_ttcp::tcp_info;

#[derive(Debug)]
enum Inner {
    Tcp(TcpStream),
    CcUdp(Box<CcUdpSocket>),
    Udp(UdpSocket),
}

/// A connection over the selected transport (TAPS Connection): messages
/// on the datagram transports, bytes on TCP, and [`Connection::qos`].
#[derive(Debug)]
pub struct Connection {
    inner: Inner,
    req: Requirements,
    choice: Choice,
}

fn os_err(e: impl std::fmt::Display) -> io::Error {
    io::Error::other(e.to_string())
}

impl Connection {
    pub(super) fn tcp(pre: &Preconnection, s: TcpStream) -> io::Result<Connection> {
        s.set_nodelay(pre.choice.nodelay)?;
        if let Buffering::Bytes(b) = pre.choice.buffering {
            let b = usize::try_from(b).unwrap_or(usize::MAX).max(4096);
            rustix::net::sockopt::set_socket_send_buffer_size(&s, b)?;
        }
        Ok(Connection::new(pre, Inner::Tcp(s)))
    }

    pub(super) fn cc_udp(pre: &Preconnection, mut s: CcUdpSocket) -> io::Result<Connection> {
        let c = &pre.choice;
        if let (Some(ctl), Some(flow)) = (c.controller, s.flow()) {
            let cfg = ctl
                .config(c.packet_size.unwrap_or(tuning::MTU_PAYLOAD))
                .map_err(os_err)?;
            s.cm()
                .try_borrow_mut()
                .map_err(os_err)?
                .set_controller(flow, &cfg)
                .map_err(os_err)?;
        }
        let per_packet = c.packet_size.unwrap_or(tuning::MTU_PAYLOAD) + tuning::CCUDP_HEADER;
        match c.buffering {
            Buffering::Default => {}
            Buffering::Packets(n) => s.set_send_queue_limit(per_packet * n as usize)?,
            Buffering::Bytes(b) => {
                s.set_send_queue_limit(usize::try_from(b).unwrap_or(usize::MAX).max(per_packet))?;
            }
        }
        Ok(Connection::new(pre, Inner::CcUdp(Box::new(s))))
    }

    pub(super) fn udp(pre: &Preconnection, s: UdpSocket) -> io::Result<Connection> {
        Ok(Connection::new(pre, Inner::Udp(s)))
    }

    fn new(pre: &Preconnection, inner: Inner) -> Connection {
        Connection {
            inner,
            req: pre.req.clone(),
            choice: pre.choice.clone(),
        }
    }

    /// What selection chose for this connection.
    pub fn choice(&self) -> &Choice {
        &self.choice
    }

    /// The CC-UDP socket, for what this API does not wrap (stats, poll
    /// descriptors); `None` on other transports.
    pub fn cc_udp_socket(&mut self) -> Option<&mut CcUdpSocket> {
        match &mut self.inner {
            Inner::CcUdp(s) => Some(s),
            _ => None,
        }
    }

    /// Send one message (datagram transports) or these bytes (TCP). A
    /// CC-UDP send queues the message in the CM; it waits while the queue
    /// is full (a one-packet queue for delay-critical choices).
    pub fn send(&mut self, data: &[u8]) -> io::Result<()> {
        match &mut self.inner {
            Inner::Tcp(s) => s.write_all(data),
            Inner::CcUdp(s) => s.send(data).map(drop),
            Inner::Udp(s) => s.send(data).map(drop),
        }
    }

    /// Receive one message, or some bytes on TCP (0: the peer closed).
    /// Waits up to the read timeout.
    pub fn receive(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match &mut self.inner {
            Inner::Tcp(s) => s.read(buf),
            Inner::CcUdp(s) => s.recv(buf),
            Inner::Udp(s) => s.recv(buf),
        }
    }

    /// How long `receive` waits (`None`: forever).
    pub fn set_read_timeout(&mut self, t: Option<StdDuration>) -> io::Result<()> {
        match &mut self.inner {
            Inner::Tcp(s) => s.set_read_timeout(t),
            Inner::CcUdp(s) => s.set_read_timeout(t),
            Inner::Udp(s) => s.set_read_timeout(t),
        }
    }

    /// Make progress without blocking (CC-UDP: read acks, send what the CM
    /// grants; a no-op elsewhere).
    pub fn drive(&mut self) -> io::Result<()> {
        match &mut self.inner {
            Inner::CcUdp(s) => s.drive(),
            _ => Ok(()),
        }
    }

    /// Wait until what was sent has left (CC-UDP: the CM queue is empty;
    /// TCP: flushed to the kernel). Returns whether it did in time.
    pub fn flush(&mut self, timeout: StdDuration) -> io::Result<bool> {
        match &mut self.inner {
            Inner::Tcp(s) => s.flush().map(|()| true),
            Inner::CcUdp(s) => s.flush(Some(timeout)),
            Inner::Udp(_) => Ok(true),
        }
    }

    /// The local address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        match &self.inner {
            Inner::Tcp(s) => s.local_addr(),
            Inner::CcUdp(s) => s.local_addr(),
            Inner::Udp(s) => s.local_addr(),
        }
    }

    /// The peer's address.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        match &self.inner {
            Inner::Tcp(s) => s.peer_addr(),
            Inner::CcUdp(s) => s.peer_addr(),
            Inner::Udp(s) => s.peer_addr(),
        }
    }

    /// QoS feedback against the stated requirements: the transport's rate,
    /// RTT and loss now (CM `cm_query` for CC-UDP, `TCP_INFO` for kernel
    /// TCP, nothing for raw UDP) and a verdict per rate and delay
    /// requirement.
    pub fn qos(&mut self) -> io::Result<Qos> {
        let mut q = Qos::default();
        match &mut self.inner {
            Inner::CcUdp(s) => {
                s.drive()?;
                let e = s.estimate()?;
                (q.rate, q.srtt, q.loss) = (e.rate, e.srtt, e.loss);
            }
            Inner::Tcp(s) => {
                let i = tcp_info(s.as_fd())?;
                if i.rtt_us > 0 {
                    q.srtt = Some(Duration::from_micros(u64::from(i.rtt_us)));
                    let bytes = u64::from(i.cwnd) * u64::from(i.mss);
                    q.rate = Rate::per(
                        cm_core::Bytes(bytes),
                        Duration::from_micros(u64::from(i.rtt_us)),
                    );
                }
                if i.segs_out > 0 {
                    q.loss = Some(f64::from(i.total_retrans) / f64::from(i.segs_out));
                }
            }
            Inner::Udp(_) => {}
        }
        Ok(judge(&self.req, q, self.tuning_delay()))
    }

    /// What the tuning adds to the network's one-way delay: packetization
    /// plus the sender queue, one packet time each at the expected rate.
    fn tuning_delay(&self) -> Duration {
        let (Some(p), Some(r)) = (self.choice.packet_size, self.req.expected_rate()) else {
            return Duration::ZERO;
        };
        let queued = match self.choice.buffering {
            Buffering::Packets(n) => u64::from(n),
            _ => 0,
        };
        tuning::packet_time(p, r).map_or(Duration::ZERO, |t| t.saturating_mul(1 + queued))
    }
}
