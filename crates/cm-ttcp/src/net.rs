//! Socket helpers: big buffers, the UDP sockets of TCP/CM, waiting.

use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsFd;
use std::time::Duration;

use rustix::event::{PollFd, PollFlags, Timespec, poll};

use crate::error::{Result, TtcpError};

/// Socket buffer size asked for (SO_RCVBUF / SO_SNDBUF), bytes.
pub const SOCKET_BUFFER: usize = 8 << 20;

/// Set both socket buffers to `bytes`: `SO_*BUFFORCE` first (root may
/// exceed `net.core.rmem_max`/`wmem_max`), else the capped plain option.
/// Best effort: a refusal leaves the default.
pub(crate) fn big_buffers(fd: impl AsFd, bytes: usize) {
    let fd = fd.as_fd();
    if rustix::net::sockopt::set_socket_recv_buffer_size_force(fd, bytes).is_err() {
        let _ = rustix::net::sockopt::set_socket_recv_buffer_size(fd, bytes);
    }
    if rustix::net::sockopt::set_socket_send_buffer_size_force(fd, bytes).is_err() {
        let _ = rustix::net::sockopt::set_socket_send_buffer_size(fd, bytes);
    }
}

/// A non-blocking UDP socket bound to `bind` (or the unspecified address
/// of `dst`'s family) and connected to `dst`, with big buffers.
pub(crate) fn connected_udp(dst: SocketAddr, bind: Option<SocketAddr>) -> Result<UdpSocket> {
    let local = bind.unwrap_or(match dst {
        SocketAddr::V4(_) => SocketAddr::from(([0, 0, 0, 0], 0)),
        SocketAddr::V6(_) => SocketAddr::from(([0u16; 8], 0)),
    });
    let sock = UdpSocket::bind(local).map_err(|e| TtcpError::io(format!("bind {local}"), e))?;
    sock.connect(dst)
        .map_err(|e| TtcpError::io(format!("connect UDP socket to {dst}"), e))?;
    sock.set_nonblocking(true)
        .map_err(|e| TtcpError::io("set non-blocking", e))?;
    big_buffers(&sock, SOCKET_BUFFER);
    Ok(sock)
}

/// `d` as a poll timeout (ppoll: nanosecond precision).
pub(crate) fn timespec(d: Duration) -> Timespec {
    Timespec {
        tv_sec: i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        tv_nsec: i64::from(d.subsec_nanos()),
    }
}

/// Wait until `fd` is ready for `events` or `timeout` passes.
pub(crate) fn wait_fd(fd: impl AsFd, events: PollFlags, timeout: Duration) -> Result<bool> {
    let mut fds = [PollFd::from_borrowed_fd(fd.as_fd(), events)];
    match poll(&mut fds, Some(&timespec(timeout))) {
        Ok(n) => Ok(n > 0),
        Err(rustix::io::Errno::INTR) => Ok(false),
        Err(e) => Err(TtcpError::errno("poll", e)),
    }
}

/// Send one datagram on an unconnected non-blocking socket, waiting
/// (briefly, repeatedly) while the send buffer is full.
pub(crate) fn send_datagram_to(sock: &UdpSocket, buf: &[u8], to: SocketAddr) -> Result<()> {
    loop {
        match sock.send_to(buf, to) {
            Ok(_) => return Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                wait_fd(sock, PollFlags::OUT, Duration::from_millis(10))?;
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            // An ICMP error from an earlier datagram to some peer: not ours
            // to act on here.
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => return Ok(()),
            Err(e) => return Err(TtcpError::io(format!("send to {to}"), e)),
        }
    }
}
