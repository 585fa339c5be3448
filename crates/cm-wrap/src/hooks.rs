//! The interposed C library functions. Each one decides whether the call
//! is a wrapped UDP send; if not (or on the engine's own thread) it calls
//! the next definition (`dlsym(RTLD_NEXT, ...)`), the C library's.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::atomic::{AtomicUsize, Ordering};

use libc::{c_int, c_uint, c_void, iovec, mmsghdr, msghdr, size_t, sockaddr, socklen_t, ssize_t};

use crate::shared::{self, IN_ENGINE, UDP, UDP_KNOWN};

/// The next definition of `name`, looked up once. `None` if there is none.
fn next(slot: &AtomicUsize, name: &std::ffi::CStr) -> Option<usize> {
    let p = slot.load(Ordering::Relaxed);
    if p != 0 {
        return Some(p);
    }
    // SAFETY: dlsym with RTLD_NEXT and a NUL-terminated name is always
    // safe to call; the result is checked for null.
    let p = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) } as usize;
    if p == 0 {
        return None;
    }
    slot.store(p, Ordering::Relaxed);
    Some(p)
}

macro_rules! real {
    ($name:ident, $cname:expr, fn($($t:ty),*) -> $r:ty) => {
        fn $name() -> Option<unsafe extern "C" fn($($t),*) -> $r> {
            static SLOT: AtomicUsize = AtomicUsize::new(0);
            // SAFETY: the symbol of that name in the C library has this
            // C signature (POSIX); a null result was refused by `next`.
            next(&SLOT, $cname).map(|p| unsafe { std::mem::transmute::<usize, unsafe extern "C" fn($($t),*) -> $r>(p) })
        }
    };
}

real!(
    real_sendto,
    c"sendto",
    fn(c_int, *const c_void, size_t, c_int, *const sockaddr, socklen_t) -> ssize_t
);
real!(
    real_send,
    c"send",
    fn(c_int, *const c_void, size_t, c_int) -> ssize_t
);
real!(
    real_sendmsg,
    c"sendmsg",
    fn(c_int, *const msghdr, c_int) -> ssize_t
);
real!(
    real_sendmmsg,
    c"sendmmsg",
    fn(c_int, *mut mmsghdr, c_uint, c_int) -> c_int
);
real!(
    real_write,
    c"write",
    fn(c_int, *const c_void, size_t) -> ssize_t
);
real!(real_close, c"close", fn(c_int) -> c_int);
real!(real_dup2, c"dup2", fn(c_int, c_int) -> c_int);
real!(real_dup3, c"dup3", fn(c_int, c_int, c_int) -> c_int);

fn enosys() -> c_int {
    // SAFETY: errno is thread-local; writing it is always allowed.
    unsafe { *libc::__errno_location() = libc::ENOSYS };
    -1
}

/// Whether this call may be wrapped at all: not on the engine's thread,
/// and on an IPv4 UDP socket.
fn candidate(fd: c_int) -> bool {
    if IN_ENGINE.with(|c| c.get()) {
        return false;
    }
    matches!(shared::class(fd), UDP | UDP_KNOWN)
}

/// The destination of a send: the address given, else the socket's peer.
/// `None` for anything but IPv4 (or an unconnected socket without one).
///
/// # Safety
/// `addr` is null or points to `len` readable bytes.
unsafe fn destination(fd: c_int, addr: *const sockaddr, len: socklen_t) -> Option<SocketAddrV4> {
    if addr.is_null() {
        // SAFETY: borrowed for one getpeername.
        let b = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
        return match rustix::net::getpeername(b)
            .ok()?
            .and_then(|a| std::net::SocketAddr::try_from(a).ok())?
        {
            std::net::SocketAddr::V4(v4) => Some(v4),
            std::net::SocketAddr::V6(_) => None,
        };
    }
    if (len as usize) < std::mem::size_of::<libc::sockaddr_in>() {
        return None;
    }
    // SAFETY: the caller gave `len` bytes, at least a sockaddr_in; read
    // unaligned since C callers need not align it.
    let sin = unsafe { std::ptr::read_unaligned(addr.cast::<libc::sockaddr_in>()) };
    if c_int::from(sin.sin_family) != libc::AF_INET {
        return None;
    }
    Some(SocketAddrV4::new(
        Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr)),
        u16::from_be(sin.sin_port),
    ))
}

/// Hand the datagram to the engine if the settings wrap `dst`. True if
/// it was taken (the caller reports it sent).
fn wrap(fd: c_int, dst: Option<SocketAddrV4>, gather: impl FnOnce() -> Vec<u8>) -> bool {
    let Some(dst) = dst else { return false };
    let Some(s) = shared::shared() else {
        return false;
    };
    if !s.cfg.wraps(dst) {
        return false;
    }
    shared::offer(s, fd, dst, gather());
    true
}

/// # Safety
/// As `sendto(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sendto(
    fd: c_int,
    buf: *const c_void,
    len: size_t,
    flags: c_int,
    addr: *const sockaddr,
    alen: socklen_t,
) -> ssize_t {
    if candidate(fd) && !buf.is_null() && len <= 65_507 {
        // SAFETY: the caller's contract: `addr` has `alen` bytes.
        let dst = unsafe { destination(fd, addr, alen) };
        // SAFETY: the caller's contract: `buf` has `len` readable bytes.
        if wrap(fd, dst, || {
            unsafe { std::slice::from_raw_parts(buf.cast::<u8>(), len) }.to_vec()
        }) {
            return len as ssize_t;
        }
    }
    match real_sendto() {
        // SAFETY: the C library's sendto with the caller's arguments.
        Some(f) => unsafe { f(fd, buf, len, flags, addr, alen) },
        None => enosys() as ssize_t,
    }
}

/// # Safety
/// As `send(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn send(fd: c_int, buf: *const c_void, len: size_t, flags: c_int) -> ssize_t {
    if candidate(fd) && !buf.is_null() && len <= 65_507 {
        // SAFETY: null address: the socket's peer.
        let dst = unsafe { destination(fd, std::ptr::null(), 0) };
        // SAFETY: the caller's contract: `buf` has `len` readable bytes.
        if wrap(fd, dst, || {
            unsafe { std::slice::from_raw_parts(buf.cast::<u8>(), len) }.to_vec()
        }) {
            return len as ssize_t;
        }
    }
    match real_send() {
        // SAFETY: the C library's send with the caller's arguments.
        Some(f) => unsafe { f(fd, buf, len, flags) },
        None => enosys() as ssize_t,
    }
}

/// # Safety
/// As `write(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn write(fd: c_int, buf: *const c_void, len: size_t) -> ssize_t {
    if candidate(fd) && !buf.is_null() && len <= 65_507 {
        // SAFETY: null address: the socket's peer.
        let dst = unsafe { destination(fd, std::ptr::null(), 0) };
        // SAFETY: the caller's contract: `buf` has `len` readable bytes.
        if wrap(fd, dst, || {
            unsafe { std::slice::from_raw_parts(buf.cast::<u8>(), len) }.to_vec()
        }) {
            return len as ssize_t;
        }
    }
    match real_write() {
        // SAFETY: the C library's write with the caller's arguments.
        Some(f) => unsafe { f(fd, buf, len) },
        None => enosys() as ssize_t,
    }
}

/// The bytes of a message without ancillary data, and its length; `None`
/// if it has ancillary data or is too long for one datagram.
///
/// # Safety
/// `msg` points to a valid `msghdr` whose iovecs are readable.
unsafe fn gather(msg: &msghdr) -> Option<(Vec<u8>, usize)> {
    if msg.msg_controllen != 0 || (msg.msg_iovlen > 0 && msg.msg_iov.is_null()) {
        return None;
    }
    let iovs: &[iovec] = if msg.msg_iovlen == 0 {
        &[]
    } else {
        // SAFETY: the caller's contract: `msg_iovlen` iovecs at `msg_iov`.
        unsafe { std::slice::from_raw_parts(msg.msg_iov, msg.msg_iovlen) }
    };
    let total: usize = iovs.iter().map(|v| v.iov_len).sum();
    if total > 65_507 {
        return None;
    }
    let mut out = Vec::with_capacity(total);
    for v in iovs {
        if v.iov_len > 0 {
            if v.iov_base.is_null() {
                return None;
            }
            // SAFETY: the caller's contract: each iovec is readable.
            out.extend_from_slice(unsafe {
                std::slice::from_raw_parts(v.iov_base.cast::<u8>(), v.iov_len)
            });
        }
    }
    Some((out, total))
}

/// Wrap one message if it can be; its length if it was taken.
///
/// # Safety
/// As `gather` and `destination`.
unsafe fn wrap_msg(fd: c_int, msg: &msghdr) -> Option<usize> {
    // SAFETY: forwarded contract.
    let (bytes, len) = unsafe { gather(msg) }?;
    // SAFETY: forwarded contract: msg_name has msg_namelen bytes.
    let dst = unsafe { destination(fd, msg.msg_name.cast::<sockaddr>(), msg.msg_namelen) };
    wrap(fd, dst, || bytes).then_some(len)
}

/// # Safety
/// As `sendmsg(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sendmsg(fd: c_int, msg: *const msghdr, flags: c_int) -> ssize_t {
    if candidate(fd) && !msg.is_null() {
        // SAFETY: the caller's contract: `msg` is a valid msghdr.
        if let Some(n) = unsafe { wrap_msg(fd, &*msg) } {
            return n as ssize_t;
        }
    }
    match real_sendmsg() {
        // SAFETY: the C library's sendmsg with the caller's arguments.
        Some(f) => unsafe { f(fd, msg, flags) },
        None => enosys() as ssize_t,
    }
}

/// # Safety
/// As `sendmmsg(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sendmmsg(
    fd: c_int,
    msgs: *mut mmsghdr,
    vlen: c_uint,
    flags: c_int,
) -> c_int {
    if candidate(fd) && !msgs.is_null() && vlen > 0 {
        let n = vlen.min(1024) as usize;
        // SAFETY: the caller's contract: `vlen` mmsghdrs at `msgs`.
        let all = unsafe { std::slice::from_raw_parts_mut(msgs, n) };
        let mut taken = 0;
        for m in all.iter_mut() {
            // SAFETY: each entry is a valid msghdr (caller's contract).
            match unsafe { wrap_msg(fd, &m.msg_hdr) } {
                Some(len) => {
                    m.msg_len = len as c_uint;
                    taken += 1;
                }
                None => break,
            }
        }
        if taken == n {
            return n as c_int;
        }
        if taken > 0 {
            // The rest go on the next call, as a partial sendmmsg allows.
            return taken as c_int;
        }
    }
    match real_sendmmsg() {
        // SAFETY: the C library's sendmmsg with the caller's arguments.
        Some(f) => unsafe { f(fd, msgs, vlen, flags) },
        None => enosys(),
    }
}

/// # Safety
/// As `close(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn close(fd: c_int) -> c_int {
    if !IN_ENGINE.with(|c| c.get()) {
        shared::forget(fd);
    }
    match real_close() {
        // SAFETY: the C library's close.
        Some(f) => unsafe { f(fd) },
        None => enosys(),
    }
}

/// # Safety
/// As `dup2(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dup2(old: c_int, new: c_int) -> c_int {
    if !IN_ENGINE.with(|c| c.get()) && old != new {
        shared::forget(new);
    }
    match real_dup2() {
        // SAFETY: the C library's dup2.
        Some(f) => unsafe { f(old, new) },
        None => enosys(),
    }
}

/// # Safety
/// As `dup3(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dup3(old: c_int, new: c_int, flags: c_int) -> c_int {
    if !IN_ENGINE.with(|c| c.get()) && old != new {
        shared::forget(new);
    }
    match real_dup3() {
        // SAFETY: the C library's dup3.
        Some(f) => unsafe { f(old, new, flags) },
        None => enosys(),
    }
}
