//! # cm-ffi: the Congestion Manager's C ABI (`libcm.so`, `libcm.a`, `cm.h`)
//!
//! The papers' calls with the papers' names and argument order
//! (cm-implementation-linux §2.1, cm-implementation-slides "The CM API"),
//! on one implicit per-process context that is created on first use with
//! [`libcm::Cm::new`] (the daemon if its socket exists, else embedded), plus
//! modern additions on top: explicit contexts (`cm_ctx_*`), negative
//! errno-style error codes and `cm_strerror`. The header
//! `include/cm.h` documents every call and every deviation from the papers;
//! `tests/header.rs` fails when it drifts from the functions exported here.
//!
//! Layout: `implicit_ctx.rs` exports the `cm_*` calls on the per-process
//! context, `explicit_ctx.rs` the `cm_ctx_*` calls on handles; both run
//! the one body of each call in `calls.rs`, which checks and converts the
//! C arguments (`convert.rs`, `addr.rs`) and applies them to a context
//! (`ctx`: a [`libcm::Cm`] behind a mutex, and the C callbacks).
//!
//! Boundary rules: every entry point runs inside `catch_unwind` (a panic
//! returns `-ENOTRECOVERABLE` instead of unwinding into C); every pointer
//! is checked for NULL (`-EFAULT`); no lock is held while a C callback runs,
//! so callbacks may call any `cm_*` function (see the `ctx` module).
#![warn(missing_docs)]
// Unsafe code is this crate's purpose: a C ABI reads C pointers, calls C
// function pointers and hands out raw handles. The workspace denies unsafe
// code; this crate allows it, keeps every unsafe block to a few lines and
// states why each is sound in a SAFETY comment.
#![allow(unsafe_code)]
// C names (`cm_flowid`, `cm_ctx`, ...) are part of the ABI.
#![allow(non_camel_case_types)]

mod addr;
mod calls;
mod convert;
mod ctx;
mod explicit_ctx;
mod guard;
mod implicit_ctx;
mod poll;
mod select;

use std::ffi::c_int;
use std::net::UdpSocket;
use std::os::fd::FromRawFd;
use std::sync::Arc;

use guard::{Code, EBADF, EFAULT, EINVAL, ENOTSOCK};

/// A flow id (`cm_flowid`): >= 0; functions returning one return a negative
/// error code on failure.
pub type cm_flowid = i64;
/// A macroflow id: >= 0, or a negative error code.
pub type cm_mflowid = i64;

/// What the CM knows about a flow's path; -1 in a field means "no estimate
/// yet" (never a fake zero, unlike RFC 3124's unsigned `cm_query`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct cm_estimate {
    /// The flow's share of its macroflow's rate, bytes per second.
    pub rate: f64,
    /// Smoothed round-trip time, seconds.
    pub srtt: f64,
    /// Round-trip time variation, seconds.
    pub rttvar: f64,
    /// Recent fraction of bytes lost, 0..1.
    pub loss: f64,
}

/// One `cm_update` report for `cm_bulk_update`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct cm_feedback {
    /// The flow.
    pub flow: cm_flowid,
    /// Bytes whose fate is reported.
    pub nsent: i64,
    /// Bytes of those received.
    pub nrecd: i64,
    /// A `CM_*` loss mode.
    pub lossmode: c_int,
    /// An RTT sample in seconds; <= 0 for none.
    pub rtt: f64,
}

/// An explicit CM context (opaque to C).
pub struct cm_ctx {
    magic: u64,
    ctx: ctx::Ctx,
}

const MAGIC: u64 = 0x434d_5f43_5458_2121; // "CM_CTX!!"

impl cm_ctx {
    fn new(cm: libcm::Cm) -> Arc<cm_ctx> {
        Arc::new(cm_ctx {
            magic: MAGIC,
            ctx: ctx::Ctx::new(cm),
        })
    }
}

/// No loss in this report.
pub const CM_LOSS_NONE: c_int = 0;
/// Transient congestion, e.g. TCP duplicate ACKs (RFC 3124 name).
pub const CM_LOSS_FEEDBACK: c_int = 1;
/// Persistent congestion, e.g. a TCP timeout (RFC 3124 name).
pub const CM_NO_FEEDBACK: c_int = 2;
/// An ECN congestion mark (RFC 3124 name).
pub const CM_EXPLICIT_CONGESTION: c_int = 3;
/// Losses not caused by congestion (RFC 3124 name).
pub const CM_NO_CONGESTION: c_int = 4;

/// The most MTUs one `cm_request_mtus` may ask for (the core's
/// `max_request_mtus`, which the daemon runs too).
pub const CM_MAX_REQUEST_MTUS: c_int = 64;
/// The longest RTT sample `cm_update` accepts, in seconds (the core's
/// `max_rtt_sample`).
pub const CM_MAX_RTT_SAMPLE: f64 = 60.0;

/// `cm_mode`: the CM runs inside this process.
pub const CM_MODE_EMBEDDED: c_int = 1;
/// `cm_mode`: the CM is the host's daemon.
pub const CM_MODE_DAEMON: c_int = 2;

/// `cm_status`: an embedded CM, by choice.
pub const CM_STATUS_EMBEDDED: c_int = 1;
/// `cm_status`: the host's daemon.
pub const CM_STATUS_DAEMON: c_int = 2;
/// `cm_status`: an embedded CM standing in for a daemon that went away.
pub const CM_STATUS_FALLBACK: c_int = 3;

fn status_out(s: libcm::Status) -> c_int {
    match s {
        libcm::Status::Embedded => CM_STATUS_EMBEDDED,
        libcm::Status::Daemon => CM_STATUS_DAEMON,
        libcm::Status::Fallback => CM_STATUS_FALLBACK,
    }
}

fn mode_out(m: libcm::Mode) -> c_int {
    match m {
        libcm::Mode::Embedded => CM_MODE_EMBEDDED,
        libcm::Mode::Daemon => CM_MODE_DAEMON,
    }
}

/// Borrow a context handle.
///
/// # Safety
/// `p` is NULL or a handle from `cm_ctx_new*` not yet freed.
unsafe fn ctx_ref<'a>(p: *const cm_ctx) -> Result<&'a cm_ctx, Code> {
    if p.is_null() {
        return Err(EFAULT);
    }
    // SAFETY: non-NULL, and by the caller's contract a live Arc<cm_ctx>.
    let c = unsafe { &*p };
    if c.magic != MAGIC {
        return Err(EINVAL);
    }
    Ok(c)
}

/// A counted reference to a context handle (kept across callbacks, so a
/// callback that frees the context cannot free it under a dispatch).
///
/// # Safety
/// As [`ctx_ref`].
unsafe fn ctx_arc(p: *const cm_ctx) -> Result<Arc<cm_ctx>, Code> {
    // SAFETY: the caller's contract.
    unsafe { ctx_ref(p) }?;
    // SAFETY: p came from Arc::into_raw (cm_ctx_new*) and is still live, so
    // adding a count and taking it back as an Arc is balanced.
    unsafe {
        Arc::increment_strong_count(p);
        Ok(Arc::from_raw(p))
    }
}

/// A C array as a slice (`n == 0` allows NULL).
///
/// # Safety
/// `p` is NULL or points to `n` initialised `T`.
unsafe fn slice<'a, T>(p: *const T, n: usize) -> Result<&'a [T], Code> {
    if n == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return Err(EFAULT);
    }
    if n > isize::MAX as usize / size_of::<T>().max(1) {
        return Err(EINVAL);
    }
    // SAFETY: non-NULL, n elements by the caller's contract, size checked.
    Ok(unsafe { std::slice::from_raw_parts(p, n) })
}

/// Write through an optional C out-pointer.
///
/// # Safety
/// `p` is NULL or valid for a write of `T`.
unsafe fn put<T>(p: *mut T, v: T) {
    if !p.is_null() {
        // SAFETY: non-NULL and writable by the caller's contract.
        unsafe { p.write_unaligned(v) };
    }
}

/// The application's UDP socket, duplicated: libcm sends on the copy and
/// the application keeps (and closes) its own descriptor.
fn udp_socket(fd: c_int) -> Result<UdpSocket, Code> {
    if fd < 0 {
        return Err(EBADF);
    }
    let opt = |name: c_int| -> Result<c_int, Code> {
        let mut v: c_int = 0;
        let mut len = size_of::<c_int>() as libc::socklen_t;
        // SAFETY: getsockopt writes at most `len` bytes into `v`.
        let r = unsafe {
            libc::getsockopt(
                fd,
                libc::SOL_SOCKET,
                name,
                (&raw mut v).cast(),
                &raw mut len,
            )
        };
        if r < 0 {
            let e = std::io::Error::last_os_error().raw_os_error();
            return Err(Code(-e.unwrap_or(libc::ENOTSOCK)));
        }
        Ok(v)
    };
    if opt(libc::SO_TYPE)? != libc::SOCK_DGRAM
        || !matches!(opt(libc::SO_DOMAIN)?, libc::AF_INET | libc::AF_INET6)
    {
        return Err(ENOTSOCK);
    }
    // SAFETY: fcntl(F_DUPFD_CLOEXEC) on a descriptor the caller owns.
    let d = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0) };
    if d < 0 {
        let e = std::io::Error::last_os_error().raw_os_error();
        return Err(Code(-e.unwrap_or(libc::EBADF)));
    }
    // SAFETY: `d` is a fresh duplicate that nothing else owns.
    Ok(unsafe { UdpSocket::from_raw_fd(d) })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// cm.h's limits are the core's defaults, which both modes enforce.
    #[test]
    fn limits_are_the_cores() {
        let cfg = cm_core::Config::default();
        assert_eq!(u32::try_from(CM_MAX_REQUEST_MTUS), Ok(cfg.max_request_mtus));
        assert_eq!(cfg.max_rtt_sample.as_secs_f64(), CM_MAX_RTT_SAMPLE);
    }
}
