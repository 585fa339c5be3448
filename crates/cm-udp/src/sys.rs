//! The system calls std does not wrap: `sendmsg` with a `UDP_SEGMENT`
//! control message, `sendmmsg`, `recvmmsg` with `UDP_GRO` control
//! messages, `recvmsg` with `SO_TIMESTAMPNS` stamps, and the socket
//! options. Everything unsafe in the crate is here.
#![allow(unsafe_code)]

use std::io;
use std::mem::{MaybeUninit, size_of, zeroed};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::RawFd;

/// A socket address in the kernel's layout.
#[derive(Clone, Copy)]
pub(crate) struct RawAddr {
    storage: libc::sockaddr_storage,
    len: libc::socklen_t,
}

impl RawAddr {
    pub(crate) fn new(addr: SocketAddr) -> RawAddr {
        // SAFETY: sockaddr_storage is plain old data; all zeroes is valid.
        let mut storage: libc::sockaddr_storage = unsafe { zeroed() };
        let len = match addr {
            SocketAddr::V4(a) => {
                let sin = libc::sockaddr_in {
                    sin_family: libc::AF_INET as libc::sa_family_t,
                    sin_port: a.port().to_be(),
                    sin_addr: libc::in_addr {
                        s_addr: u32::from_ne_bytes(a.ip().octets()),
                    },
                    sin_zero: [0; 8],
                };
                // SAFETY: sockaddr_storage is larger than and aligned for
                // every sockaddr type.
                unsafe { std::ptr::write((&raw mut storage).cast::<libc::sockaddr_in>(), sin) };
                size_of::<libc::sockaddr_in>()
            }
            SocketAddr::V6(a) => {
                let sin6 = libc::sockaddr_in6 {
                    sin6_family: libc::AF_INET6 as libc::sa_family_t,
                    sin6_port: a.port().to_be(),
                    sin6_flowinfo: a.flowinfo(),
                    sin6_addr: libc::in6_addr {
                        s6_addr: a.ip().octets(),
                    },
                    sin6_scope_id: a.scope_id(),
                };
                // SAFETY: as above.
                unsafe { std::ptr::write((&raw mut storage).cast::<libc::sockaddr_in6>(), sin6) };
                size_of::<libc::sockaddr_in6>()
            }
        };
        RawAddr {
            storage,
            len: len as libc::socklen_t,
        }
    }

    fn empty() -> RawAddr {
        RawAddr {
            // SAFETY: plain old data.
            storage: unsafe { zeroed() },
            len: size_of::<libc::sockaddr_storage>() as libc::socklen_t,
        }
    }

    pub(crate) fn to_std(self) -> Option<SocketAddr> {
        match i32::from(self.storage.ss_family) {
            libc::AF_INET => {
                // SAFETY: the family says the storage holds a sockaddr_in.
                let sin: libc::sockaddr_in = unsafe {
                    std::ptr::read((&raw const self.storage).cast::<libc::sockaddr_in>())
                };
                Some(SocketAddr::V4(SocketAddrV4::new(
                    Ipv4Addr::from(sin.sin_addr.s_addr.to_ne_bytes()),
                    u16::from_be(sin.sin_port),
                )))
            }
            libc::AF_INET6 => {
                // SAFETY: the family says the storage holds a sockaddr_in6.
                let sin6: libc::sockaddr_in6 = unsafe {
                    std::ptr::read((&raw const self.storage).cast::<libc::sockaddr_in6>())
                };
                Some(SocketAddr::V6(SocketAddrV6::new(
                    Ipv6Addr::from(sin6.sin6_addr.s6_addr),
                    u16::from_be(sin6.sin6_port),
                    sin6.sin6_flowinfo,
                    sin6.sin6_scope_id,
                )))
            }
            _ => None,
        }
    }
}

fn cvt(r: isize) -> io::Result<usize> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r as usize)
    }
}

/// Whether the kernel knows `UDP_SEGMENT` on this socket (Linux 4.18+).
pub(crate) fn gso_known(fd: RawFd) -> bool {
    let mut v: libc::c_int = 0;
    let mut len = size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: the kernel writes at most `len` bytes into `v`.
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_UDP,
            libc::UDP_SEGMENT,
            (&raw mut v).cast(),
            &raw mut len,
        )
    };
    r == 0
}

/// Ask for GRO on receive (Linux 5.0+); whether the kernel accepted.
pub(crate) fn enable_gro(fd: RawFd) -> bool {
    set_gro(fd, true)
}

/// Turn GRO on or off; whether the kernel accepted.
pub(crate) fn set_gro(fd: RawFd, on: bool) -> bool {
    let on: libc::c_int = on.into();
    // SAFETY: the kernel reads `size_of::<c_int>()` bytes from `on`.
    let r = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_UDP,
            libc::UDP_GRO,
            (&raw const on).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    r == 0
}

/// Control-message space for one `u16` (UDP_SEGMENT) or `c_int` (UDP_GRO),
/// aligned for `cmsghdr`.
#[repr(C, align(8))]
#[derive(Clone, Copy)]
struct Cmsg([u8; 32]);

/// One `sendmsg` of the buffers of `bufs` (at most 64) laid end to end
/// and cut by the kernel into datagrams of `segment` bytes (UDP GSO);
/// `dst` for an unconnected socket.
pub(crate) fn send_gso(
    fd: RawFd,
    dst: Option<&RawAddr>,
    bufs: &[&[u8]],
    segment: u16,
) -> io::Result<usize> {
    const MAX: usize = 64;
    // SAFETY: iovec is plain old data.
    let mut iovs: [libc::iovec; MAX] = unsafe { zeroed() };
    let n = bufs.len().min(MAX);
    for (iov, b) in iovs.iter_mut().zip(bufs.iter().take(n)) {
        *iov = libc::iovec {
            iov_base: b.as_ptr().cast_mut().cast(),
            iov_len: b.len(),
        };
    }
    let mut cmsg = Cmsg([0; 32]);
    // SAFETY: msghdr is plain old data.
    let mut msg: libc::msghdr = unsafe { zeroed() };
    if let Some(a) = dst {
        msg.msg_name = (&raw const a.storage).cast_mut().cast();
        msg.msg_namelen = a.len;
    }
    msg.msg_iov = iovs.as_mut_ptr();
    msg.msg_iovlen = n;
    msg.msg_control = (&raw mut cmsg).cast();
    // SAFETY: CMSG_SPACE only computes a size.
    msg.msg_controllen = unsafe { libc::CMSG_SPACE(size_of::<u16>() as u32) } as usize;
    // SAFETY: the control buffer is 32 bytes, aligned, and larger than
    // CMSG_SPACE(2); CMSG_FIRSTHDR points into it.
    unsafe {
        let c = libc::CMSG_FIRSTHDR(&raw const msg);
        (*c).cmsg_level = libc::SOL_UDP;
        (*c).cmsg_type = libc::UDP_SEGMENT;
        (*c).cmsg_len = libc::CMSG_LEN(size_of::<u16>() as u32) as usize;
        std::ptr::write_unaligned(libc::CMSG_DATA(c).cast::<u16>(), segment);
    }
    // SAFETY: every pointer in `msg` refers to memory live for the call:
    // the first `n` buffers of `bufs`, `iovs`, `cmsg` and `dst`.
    cvt(unsafe { libc::sendmsg(fd, &raw const msg, 0) })
}

/// `sendmmsg` of `msgs` (each a datagram and its destination, `None` for
/// a connected socket): how many the kernel took.
pub(crate) fn sendmmsg(fd: RawFd, msgs: &[(Option<&RawAddr>, &[u8])]) -> io::Result<usize> {
    const MAX: usize = 64;
    let n = msgs.len().min(MAX);
    // SAFETY: iovec and mmsghdr are plain old data.
    let mut iovs: [libc::iovec; MAX] = unsafe { zeroed() };
    // SAFETY: as above.
    let mut hdrs: [libc::mmsghdr; MAX] = unsafe { zeroed() };
    for (i, (dst, data)) in msgs.iter().take(n).enumerate() {
        iovs[i] = libc::iovec {
            iov_base: data.as_ptr().cast_mut().cast(),
            iov_len: data.len(),
        };
        let h = &mut hdrs[i].msg_hdr;
        if let Some(a) = dst {
            h.msg_name = (&raw const a.storage).cast_mut().cast();
            h.msg_namelen = a.len;
        }
        h.msg_iov = &raw mut iovs[i];
        h.msg_iovlen = 1;
    }
    // SAFETY: the first `n` headers point at live iovecs, datagrams and
    // addresses for the duration of the call.
    let r = unsafe { libc::sendmmsg(fd, hdrs.as_mut_ptr(), n as libc::c_uint, 0) };
    cvt(r as isize)
}

/// One datagram received by [`recvmmsg`].
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Received {
    pub len: usize,
    /// The GRO segment size, if the kernel coalesced datagrams.
    pub segment: Option<usize>,
    pub from: Option<SocketAddr>,
    pub truncated: bool,
}

/// `recvmmsg` into the first `n` of `bufs` (non-blocking); results in
/// `out`.
pub(crate) fn recvmmsg(
    fd: RawFd,
    bufs: &mut [Vec<u8>],
    n: usize,
    out: &mut [Received],
) -> io::Result<usize> {
    const MAX: usize = 64;
    let n = n.min(bufs.len()).min(out.len()).min(MAX);
    // Only the first `n` entries are written, and only what the kernel
    // reads: most calls of a sender reading its ACKs find nothing, and
    // zeroing all 64 headers, addresses and control buffers (16 KB) cost
    // more than the call itself.
    let mut iovs = [const { MaybeUninit::<libc::iovec>::uninit() }; MAX];
    let mut hdrs = [const { MaybeUninit::<libc::mmsghdr>::uninit() }; MAX];
    let mut names = [const { MaybeUninit::<libc::sockaddr_storage>::uninit() }; MAX];
    let mut cmsgs = [const { MaybeUninit::<Cmsg>::uninit() }; MAX];
    for (i, b) in bufs.iter_mut().take(n).enumerate() {
        let iov = iovs[i].write(libc::iovec {
            iov_base: b.as_mut_ptr().cast(),
            iov_len: b.len(),
        });
        // SAFETY: plain old data; all zeroes is a valid header.
        let mut m: libc::mmsghdr = unsafe { zeroed() };
        m.msg_hdr.msg_name = names[i].as_mut_ptr().cast();
        m.msg_hdr.msg_namelen = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
        m.msg_hdr.msg_iov = iov;
        m.msg_hdr.msg_iovlen = 1;
        m.msg_hdr.msg_control = cmsgs[i].as_mut_ptr().cast();
        m.msg_hdr.msg_controllen = size_of::<Cmsg>();
        hdrs[i].write(m);
    }
    // SAFETY: the first `n` headers are initialised and point at live
    // buffers, name and control space; MSG_DONTWAIT makes the call
    // non-blocking and no timeout is passed.
    let r = unsafe {
        libc::recvmmsg(
            fd,
            hdrs.as_mut_ptr().cast::<libc::mmsghdr>(),
            n as libc::c_uint,
            libc::MSG_DONTWAIT,
            std::ptr::null_mut(),
        )
    };
    let got = cvt(r as isize)?;
    for i in 0..got.min(n) {
        // SAFETY: initialised above (i < n).
        let m = unsafe { hdrs[i].assume_init_ref() };
        let h = &m.msg_hdr;
        let mut segment = None;
        // SAFETY: the kernel filled `msg_controllen` bytes of the control
        // buffer with well-formed cmsghdrs; the CMSG_* macros walk them
        // (and read nothing when it wrote none).
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(h);
            while !c.is_null() {
                if (*c).cmsg_level == libc::SOL_UDP && (*c).cmsg_type == libc::UDP_GRO {
                    let v = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast::<libc::c_int>());
                    segment = usize::try_from(v).ok().filter(|&s| s > 0);
                }
                c = libc::CMSG_NXTHDR(h, c);
            }
        }
        let from = if h.msg_namelen > 0 {
            let mut a = RawAddr::empty();
            let len = (h.msg_namelen as usize).min(size_of::<libc::sockaddr_storage>());
            // SAFETY: the kernel wrote `msg_namelen` bytes of the name;
            // only those are copied, into zeroed storage.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    names[i].as_ptr().cast::<u8>(),
                    (&raw mut a.storage).cast::<u8>(),
                    len,
                );
            }
            a.len = h.msg_namelen;
            a.to_std()
        } else {
            None
        };
        out[i] = Received {
            len: m.msg_len as usize,
            segment,
            from,
            truncated: h.msg_flags & libc::MSG_TRUNC != 0,
        };
    }
    Ok(got)
}

/// Turn `SO_TIMESTAMPNS` on for `fd`.
pub(crate) fn enable_timestamps(fd: RawFd) -> io::Result<()> {
    let on: libc::c_int = 1;
    // SAFETY: a valid fd and an int option value of the right size.
    let r = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_TIMESTAMPNS,
            (&raw const on).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    cvt(r as isize).map(|_| ())
}

#[repr(C, align(8))]
struct StampCmsg([u8; 64]);

/// `recvmsg` of one datagram into `buf`, non-blocking: its length, its
/// sender and its `SCM_TIMESTAMPNS` stamp (ns since the Unix epoch), if
/// the socket stamps.
pub(crate) fn recvmsg_stamped(
    fd: RawFd,
    buf: &mut [u8],
) -> io::Result<(usize, Option<SocketAddr>, Option<u64>)> {
    let mut name = RawAddr::empty();
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    let mut control = StampCmsg([0; 64]);
    // SAFETY: plain old data; all zeroes is a valid msghdr.
    let mut msg: libc::msghdr = unsafe { zeroed() };
    msg.msg_name = (&raw mut name.storage).cast();
    msg.msg_namelen = name.len;
    msg.msg_iov = &raw mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = (&raw mut control).cast();
    msg.msg_controllen = size_of::<StampCmsg>();
    // SAFETY: the header points at live buffers of the sizes given.
    let r = unsafe { libc::recvmsg(fd, &raw mut msg, libc::MSG_DONTWAIT) };
    let len = cvt(r)?;
    let mut stamp = None;
    // SAFETY: the kernel filled `msg_controllen` bytes of the control
    // buffer with well-formed cmsghdrs; the CMSG_* macros walk them.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&raw const msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_TIMESTAMPNS {
                let t = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast::<libc::timespec>());
                stamp = u64::try_from(t.tv_sec)
                    .ok()
                    .zip(u64::try_from(t.tv_nsec).ok())
                    .map(|(s, n)| s.saturating_mul(1_000_000_000).saturating_add(n));
            }
            c = libc::CMSG_NXTHDR(&raw const msg, c);
        }
    }
    name.len = msg.msg_namelen;
    Ok((len, name.to_std(), stamp))
}
