//! `struct sockaddr *` from C to [`SocketAddr`]: AF_INET and AF_INET6 only.

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::ptr;

use libc::{sa_family_t, sockaddr, sockaddr_in, sockaddr_in6};

use crate::guard::{Code, EAFNOSUPPORT, EFAULT, EINVAL};

/// Read a socket address. Without `len` (the papers' `cm_open(src, dst)`)
/// the family decides how many bytes are read: a whole `sockaddr_in` for
/// AF_INET, a whole `sockaddr_in6` for AF_INET6. With `len`, it must cover
/// that structure, else `-EINVAL`.
///
/// # Safety
/// `p` is NULL or points to at least `len` readable bytes (without `len`:
/// to a whole structure of the family it names).
pub(crate) unsafe fn read(p: *const sockaddr, len: Option<usize>) -> Result<SocketAddr, Code> {
    if p.is_null() {
        return Err(EFAULT);
    }
    if len.is_some_and(|l| l < size_of::<sa_family_t>()) {
        return Err(EINVAL);
    }
    // SAFETY: p is non-NULL and covers at least the family field (the
    // caller's contract, and the length check above when a length is
    // given); read_unaligned because C need not align a byte buffer.
    let family = unsafe { ptr::read_unaligned(ptr::addr_of!((*p).sa_family)) };
    match i32::from(family) {
        libc::AF_INET => {
            if len.is_some_and(|l| l < size_of::<sockaddr_in>()) {
                return Err(EINVAL);
            }
            // SAFETY: the family says the caller passed a sockaddr_in, and
            // the length (when given) covers it.
            let sin = unsafe { ptr::read_unaligned(p.cast::<sockaddr_in>()) };
            let ip = Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr));
            Ok(SocketAddr::V4(SocketAddrV4::new(
                ip,
                u16::from_be(sin.sin_port),
            )))
        }
        libc::AF_INET6 => {
            if len.is_some_and(|l| l < size_of::<sockaddr_in6>()) {
                return Err(EINVAL);
            }
            // SAFETY: as above, for sockaddr_in6.
            let sin6 = unsafe { ptr::read_unaligned(p.cast::<sockaddr_in6>()) };
            Ok(SocketAddr::V6(SocketAddrV6::new(
                Ipv6Addr::from(sin6.sin6_addr.s6_addr),
                u16::from_be(sin6.sin6_port),
                u32::from_be(sin6.sin6_flowinfo),
                sin6.sin6_scope_id,
            )))
        }
        _ => Err(EAFNOSUPPORT),
    }
}
