//! Kernel receive timestamps (`SO_TIMESTAMPNS`), for receivers that time
//! arrivals, such as a packet-bunch capacity sampler (iscc §VI-B): the
//! kernel stamps each datagram when it reaches the socket, so the spacing
//! of a bunch does not include the receiver's wake-up latency, which on a
//! busy host is of the order of the spacing itself. One datagram per call
//! and no GRO: a GRO buffer carries one stamp for all its segments.

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;

use crate::sys;

/// Ask the kernel to stamp every datagram `sock` receives.
pub fn enable_timestamps(sock: &UdpSocket) -> io::Result<()> {
    sys::enable_timestamps(sock.as_raw_fd())
}

/// One datagram received by [`recv_stamped`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stamped {
    /// Its length (truncated to the buffer when longer).
    pub len: usize,
    /// Its sender.
    pub from: Option<SocketAddr>,
    /// When it reached the socket, ns since the Unix epoch (`None` when
    /// the socket is not stamping).
    pub arrived_ns: Option<u64>,
}

/// Receive one datagram into `buf` without blocking, with its kernel
/// timestamp if [`enable_timestamps`] is on.
pub fn recv_stamped(sock: &UdpSocket, buf: &mut [u8]) -> io::Result<Stamped> {
    let (len, from, arrived_ns) = sys::recvmsg_stamped(sock.as_raw_fd(), buf)?;
    Ok(Stamped {
        len: len.min(buf.len()),
        from,
        arrived_ns,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn datagrams_come_with_the_kernels_arrival_time() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let mut buf = [0u8; 64];
        // Not stamping: no time, and nothing waiting is WouldBlock.
        let e = recv_stamped(&rx, &mut buf).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
        tx.send_to(b"one", rx.local_addr().unwrap()).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        let d = recv_stamped(&rx, &mut buf).unwrap();
        assert_eq!(
            (d.len, d.from, d.arrived_ns),
            (3, tx.local_addr().ok(), None)
        );
        enable_timestamps(&rx).unwrap();
        // The kernel turns stamping on for its receive path a moment later
        // (a static key switched from a work queue); until then a datagram
        // is stamped when it is read.
        std::thread::sleep(std::time::Duration::from_millis(100));
        let sent = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64;
        tx.send_to(b"two", rx.local_addr().unwrap()).unwrap();
        tx.send_to(b"three", rx.local_addr().unwrap()).unwrap();
        // Read late: the stamps are when they arrived, not when read.
        std::thread::sleep(std::time::Duration::from_millis(50));
        let a = recv_stamped(&rx, &mut buf).unwrap();
        let b = recv_stamped(&rx, &mut buf).unwrap();
        assert_eq!((a.len, b.len), (3, 5));
        let (ta, tb) = (a.arrived_ns.unwrap(), b.arrived_ns.unwrap());
        assert!(
            ta >= sent.saturating_sub(1_000_000) && ta < sent + 20_000_000,
            "{ta} {sent}"
        );
        assert!(tb >= ta && tb - ta < 20_000_000, "{ta} {tb}");
    }
}
