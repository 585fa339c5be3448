//! The receiver CM for header-less flows (sigcomm1999 §4.2.2): counts the
//! UDP datagrams that arrive at this host, by sending host and ports, and
//! answers probes with the counts ([`cm_proto::counted::Counter`]).
//!
//! The datagrams are seen through a raw IPv4 socket for UDP, which the
//! kernel hands a copy of every UDP datagram arriving at the host before
//! UDP delivers it: the programs receiving them are not touched. Probes
//! arrive on the same raw socket, in order with the data they follow, so a
//! probe is answered with exactly what arrived before it; a UDP socket
//! bound to the port keeps the kernel from answering probes with ICMP
//! port-unreachable. A raw socket needs `CAP_NET_RAW` (root).

use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddrV4, UdpSocket};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant as StdInstant};

use cm_proto::counted::Counter;
use cm_proto::wire::Packet;
use rustix::event::{PollFd, PollFlags, Timespec, poll};
use rustix::net::{AddressFamily, SocketType, ipproto, socket};

/// The counting receiver CM.
#[derive(Debug)]
pub struct Receiver {
    raw: UdpSocket,
    probe: UdpSocket,
    port: u16,
    counter: Counter,
    /// One IP packet's room, reused by every call.
    buf: Vec<u8>,
    /// Datagrams that were not parseable IPv4/UDP (ignored).
    pub malformed: u64,
}

/// Why the receiver CM cannot start.
#[derive(Debug, thiserror::Error)]
pub enum ReceiverError {
    /// No permission for a raw socket.
    #[error("the receiver CM needs CAP_NET_RAW (run as root) to count datagrams: {0}")]
    NoPermission(io::Error),
    /// The probe port is taken.
    #[error("UDP port {port} is taken (another receiver CM?): {source}")]
    PortTaken {
        /// The port.
        port: u16,
        /// The error.
        source: io::Error,
    },
    /// Anything else.
    #[error(transparent)]
    Io(#[from] io::Error),
}

/// What the receiver CM has done.
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub struct ReceiverStats {
    /// Datagrams counted.
    pub datagrams: u64,
    /// Probes answered.
    pub probes: u64,
    /// Flows counted now.
    pub flows: usize,
    /// Unparseable datagrams.
    pub malformed: u64,
}

impl Receiver {
    /// A receiver CM answering probes on UDP `port` of every address.
    pub fn bind(port: u16) -> Result<Receiver, ReceiverError> {
        let raw = socket(AddressFamily::INET, SocketType::RAW, Some(ipproto::UDP))
            .map_err(|e| ReceiverError::NoPermission(e.into()))?;
        let raw = UdpSocket::from(raw);
        raw.set_nonblocking(true)?;
        let _ = rustix::net::sockopt::set_socket_recv_buffer_size(&raw, 4 << 20);
        let probe = UdpSocket::bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, port))
            .map_err(|source| ReceiverError::PortTaken { port, source })?;
        probe.set_nonblocking(true)?;
        let port = probe.local_addr()?.port();
        Ok(Receiver {
            raw,
            probe,
            port,
            counter: Counter::new(),
            buf: vec![0u8; 65_536],
            malformed: 0,
        })
    }

    /// The probe port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Counts so far.
    pub fn stats(&self) -> ReceiverStats {
        ReceiverStats {
            datagrams: self.counter.datagrams,
            probes: self.counter.probes,
            flows: self.counter.flows(),
            malformed: self.malformed,
        }
    }

    /// Serve until `stop` is set or `until` passes.
    pub fn run(&mut self, stop: &AtomicBool, until: Option<StdInstant>) -> io::Result<()> {
        while !stop.load(Ordering::Relaxed) && until.is_none_or(|u| StdInstant::now() < u) {
            self.serve()?;
            let ts = Timespec {
                tv_sec: 0,
                tv_nsec: 200_000_000,
            };
            let mut fds = [PollFd::from_borrowed_fd(self.raw.as_fd(), PollFlags::IN)];
            match poll(&mut fds, Some(&ts)) {
                Ok(_) | Err(rustix::io::Errno::INTR) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }

    /// Read and count everything waiting; answer probes in order.
    pub fn serve(&mut self) -> io::Result<()> {
        let buf = &mut self.buf;
        loop {
            let n = match self.raw.recv(buf) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            let Some(d) = parse_udp(&buf[..n]) else {
                self.malformed += 1;
                continue;
            };
            if d.dst_port == self.port {
                if let Ok(Packet::Probe { seq }) = Packet::decode(d.payload) {
                    let resp = self.counter.on_probe(IpAddr::V4(d.src), seq).encode();
                    let _ = self
                        .probe
                        .send_to(&resp, SocketAddrV4::new(d.src, d.src_port));
                }
                continue;
            }
            self.counter.on_datagram(
                cm_clock::now(),
                IpAddr::V4(d.src),
                d.src_port,
                d.dst_port,
                d.payload.len() as u32,
            );
        }
        // The bound socket's own copies of the probes: already answered.
        while self.probe.recv(buf).is_ok() {}
        Ok(())
    }

    /// Serve for `d` (tests and short runs).
    pub fn run_for(&mut self, d: Duration) -> io::Result<()> {
        self.run(&AtomicBool::new(false), Some(StdInstant::now() + d))
    }
}

/// An IPv4 UDP datagram's addresses, ports and payload.
#[derive(Debug, PartialEq, Eq)]
pub struct UdpView<'a> {
    /// Source address.
    pub src: Ipv4Addr,
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Payload.
    pub payload: &'a [u8],
}

/// Parse an IPv4 packet carrying UDP (as a raw socket returns it). `None`
/// for anything else or anything truncated.
pub fn parse_udp(p: &[u8]) -> Option<UdpView<'_>> {
    let (&vihl, _) = p.split_first()?;
    if vihl >> 4 != 4 {
        return None;
    }
    let ihl = usize::from(vihl & 0x0f) * 4;
    if ihl < 20 || p.len() < ihl + 8 || *p.get(9)? != 17 {
        return None;
    }
    // Fragments after the first carry no UDP header.
    let frag = u16::from_be_bytes([p[6], p[7]]) & 0x1fff;
    if frag != 0 {
        return None;
    }
    let src = Ipv4Addr::new(p[12], p[13], p[14], p[15]);
    let u = &p[ihl..];
    let src_port = u16::from_be_bytes([u[0], u[1]]);
    let dst_port = u16::from_be_bytes([u[2], u[3]]);
    let len = usize::from(u16::from_be_bytes([u[4], u[5]]));
    if len < 8 {
        return None;
    }
    let payload = u.get(8..len.min(u.len()))?;
    Some(UdpView {
        src,
        src_port,
        dst_port,
        payload,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn parses_udp_and_refuses_the_rest() {
        let mut p = vec![
            0x45, 0, 0, 33, 0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 1, 2, 10, 0, 2, 2,
        ];
        p.extend_from_slice(&[
            0x13, 0x88, 0x14, 0x51, 0, 13, 0, 0, b'h', b'e', b'l', b'l', b'o',
        ]);
        let v = parse_udp(&p).unwrap();
        assert_eq!(
            (v.src, v.src_port, v.dst_port, v.payload),
            (Ipv4Addr::new(10, 0, 1, 2), 5000, 5201, &b"hello"[..])
        );
        assert!(parse_udp(&p[..25]).is_none());
        let mut tcp = p.clone();
        tcp[9] = 6;
        assert!(parse_udp(&tcp).is_none());
        let mut frag = p.clone();
        frag[7] = 1;
        assert!(parse_udp(&frag).is_none());
        assert!(parse_udp(&[]).is_none());
        assert!(parse_udp(&[0x60; 40]).is_none());
        for n in 0..p.len() {
            let _ = parse_udp(&p[..n]);
        }
    }
}
