//! Waiting for a datagram with microsecond precision.
//!
//! `SO_RCVTIMEO` is rounded up to scheduler ticks (4 ms at HZ=250), far
//! coarser than the CM's pacing gaps; `ppoll` sleeps on a high-resolution
//! timer, so a grant due in 300 µs is served in about 300 µs.

use std::net::UdpSocket;
use std::time::Duration;

use rustix::event::{PollFd, PollFlags, Timespec, poll};

/// Block until `sock` is readable or `timeout` passes; `true` if readable.
/// The socket should be non-blocking so a spurious wake-up cannot hang a read.
pub fn readable(sock: &UdpSocket, timeout: Duration) -> std::io::Result<bool> {
    let mut fds = [PollFd::new(sock, PollFlags::IN)];
    let ts = Timespec {
        tv_sec: i64::try_from(timeout.as_secs()).unwrap_or(i64::MAX),
        tv_nsec: i64::from(timeout.subsec_nanos()),
    };
    match poll(&mut fds, Some(&ts)) {
        Ok(n) => Ok(n > 0),
        Err(rustix::io::Errno::INTR) => Ok(false),
        Err(e) => Err(e.into()),
    }
}
