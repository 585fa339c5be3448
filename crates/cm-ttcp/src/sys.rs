//! The two socket queries neither std nor rustix wraps: `TCP_INFO` and
//! `SIOCOUTQ` (bytes not yet acknowledged).
#![allow(unsafe_code)]

use std::os::fd::{AsFd, AsRawFd};

/// The fields of a TCP socket's `struct tcp_info` that the tools here use.
#[derive(Clone, Copy, Debug)]
pub struct TcpInfo {
    /// Smoothed RTT, microseconds.
    pub rtt_us: u32,
    /// Congestion window, segments.
    pub cwnd: u32,
    /// Sender MSS, bytes.
    pub mss: u32,
    /// Segments retransmitted over the connection's life.
    pub total_retrans: u32,
    /// Segments sent over the connection's life.
    pub segs_out: u32,
}

/// `TCP_INFO` of a TCP socket.
pub fn tcp_info(fd: impl AsFd) -> std::io::Result<TcpInfo> {
    let fd = fd.as_fd().as_raw_fd();
    // SAFETY: `tcp_info` is plain old data, so all-zero bytes are a valid
    // value.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = libc::socklen_t::try_from(std::mem::size_of::<libc::tcp_info>())
        .unwrap_or(libc::socklen_t::MAX);
    // SAFETY: `fd` is a descriptor borrowed for the call; the kernel writes
    // at most `len` bytes into `info`, which is exactly that large, and
    // updates `len`.
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&raw mut info).cast::<libc::c_void>(),
            &raw mut len,
        )
    };
    if r < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(TcpInfo {
        rtt_us: info.tcpi_rtt,
        cwnd: info.tcpi_snd_cwnd,
        mss: info.tcpi_snd_mss,
        total_retrans: info.tcpi_total_retrans,
        segs_out: info.tcpi_segs_out,
    })
}

/// Bytes in a TCP socket's send queue not yet acknowledged (`SIOCOUTQ`).
pub(crate) fn tcp_outq(fd: impl AsFd) -> std::io::Result<u64> {
    let fd = fd.as_fd().as_raw_fd();
    let mut n: libc::c_int = 0;
    // SAFETY: SIOCOUTQ (== TIOCOUTQ) writes one int through the pointer,
    // which points to a live `c_int`; `fd` is borrowed for the call.
    let r = unsafe { libc::ioctl(fd, libc::TIOCOUTQ, &raw mut n) };
    if r < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(u64::try_from(n).unwrap_or(0))
}
