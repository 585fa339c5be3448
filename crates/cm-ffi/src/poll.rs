//! Descriptors for the application's event loop: the epoll set `cm_fd`
//! returns and a poll(2) helper for `cm_wait`.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use crate::guard::Code;

/// poll(2) one descriptor for readability.
pub(crate) fn poll_fd(fd: i32, timeout_ms: i32) -> Result<(), Code> {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd on the stack, count 1.
    let r = unsafe { libc::poll(&mut p, 1, timeout_ms.max(-1)) };
    if r < 0 {
        let e = std::io::Error::last_os_error();
        if e.kind() == std::io::ErrorKind::Interrupted {
            return Ok(());
        }
        return Err(Code(-e.raw_os_error().unwrap_or(libc::EIO)));
    }
    Ok(())
}

/// The application's pollable descriptor: an epoll set of libcm's
/// descriptor and an eventfd (readable while events wait in `pending`).
pub(crate) struct PollSet {
    epoll: OwnedFd,
    event: OwnedFd,
}

impl PollSet {
    pub(crate) fn new(inner: i32) -> Result<PollSet, Code> {
        let err = || {
            Code(
                -std::io::Error::last_os_error()
                    .raw_os_error()
                    .unwrap_or(libc::EIO),
            )
        };
        // SAFETY: plain system calls with integer flags.
        let (ep, ev) = unsafe {
            (
                libc::epoll_create1(libc::EPOLL_CLOEXEC),
                libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK),
            )
        };
        if ep < 0 || ev < 0 {
            let e = err();
            for fd in [ep, ev] {
                if fd >= 0 {
                    // SAFETY: a descriptor just created and owned by nobody else.
                    drop(unsafe { OwnedFd::from_raw_fd(fd) });
                }
            }
            return Err(e);
        }
        // SAFETY: both were just created and are owned by nothing else.
        let set = unsafe {
            PollSet {
                epoll: OwnedFd::from_raw_fd(ep),
                event: OwnedFd::from_raw_fd(ev),
            }
        };
        for fd in [inner, ev] {
            let mut e = libc::epoll_event {
                events: libc::EPOLLIN as u32,
                u64: fd as u64,
            };
            // SAFETY: a valid epoll descriptor, a live descriptor to add, and
            // an epoll_event on the stack.
            if unsafe { libc::epoll_ctl(ep, libc::EPOLL_CTL_ADD, fd, &mut e) } < 0 {
                return Err(err());
            }
        }
        Ok(set)
    }

    /// The epoll descriptor (what `cm_fd` returns).
    pub(crate) fn fd(&self) -> i32 {
        self.epoll.as_raw_fd()
    }

    /// Make the eventfd readable (`on`) or not.
    pub(crate) fn set(&self, on: bool) {
        let fd = self.event.as_raw_fd();
        let mut v: u64 = 0;
        // SAFETY: 8-byte read/write of a u64 on the context's own
        // nonblocking eventfd.
        unsafe {
            if on {
                let one: u64 = 1;
                libc::write(fd, (&raw const one).cast(), 8);
            } else {
                libc::read(fd, (&raw mut v).cast(), 8);
            }
        }
    }
}
