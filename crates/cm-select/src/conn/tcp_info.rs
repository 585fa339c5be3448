//! Kernel TCP socket options std does not wrap: `TCP_INFO` (QoS
//! feedback) and `SO_SNDBUF` (on/off buffering).
#![allow(unsafe_code)]

use std::os::fd::{AsFd, AsRawFd};

/// The fields of `struct tcp_info` the QoS report uses.
#[derive(Clone, Copy, Debug)]
pub(crate) struct TcpInfo {
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

pub(crate) fn tcp_info(fd: impl AsFd) -> std::io::Result<TcpInfo> {
    let fd = fd.as_fd().as_raw_fd();
    // SAFETY: `tcp_info` is plain old data, so all-zero bytes are valid.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = libc::socklen_t::try_from(std::mem::size_of::<libc::tcp_info>())
        .unwrap_or(libc::socklen_t::MAX);
    // SAFETY: `fd` is borrowed for the call; the kernel writes at most
    // `len` bytes into `info`, which is that large, and updates `len`.
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

/// Set `SO_SNDBUF` (the kernel doubles it for its bookkeeping and caps it
/// at `net.core.wmem_max`).
pub(crate) fn set_sndbuf(fd: impl AsFd, bytes: usize) -> std::io::Result<()> {
    let fd = fd.as_fd().as_raw_fd();
    let v = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
    // SAFETY: `fd` is borrowed for the call; the kernel reads one int from
    // a live `c_int` of the size passed.
    let r = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_SNDBUF,
            (&raw const v).cast::<libc::c_void>(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}
