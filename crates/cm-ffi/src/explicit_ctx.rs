//! Explicit contexts (`cm_ctx_*`): the same calls on a handle the program
//! owns, for libraries and programs that want more than one CM connection
//! or no hidden global state. Callbacks get the context and a user pointer.
//! Each call's body is shared with its `cm_*` twin in `calls.rs`.

use std::ffi::{c_char, c_double, c_int, c_void};
use std::sync::Arc;

use libcm::Cm;

use crate::calls::{self, bulk_notify, bulk_query, bulk_request, bulk_update};
use crate::convert::flow_id;
use crate::ctx::{CtxSend, CtxUpdate, SendCb, UpdateCb};
use crate::guard::{self, Code, EFAULT};
use crate::{
    addr, cm_ctx, cm_estimate, cm_feedback, cm_flowid, cm_mflowid, ctx_arc, ctx_ref, mode_out,
};

fn publish(
    out: *mut *mut cm_ctx,
    make: impl FnOnce() -> Result<Cm, libcm::CmError>,
) -> Result<c_int, Code> {
    if out.is_null() {
        return Err(EFAULT);
    }
    let c = cm_ctx::new(make()?);
    // SAFETY: `out` is non-NULL and writable by the caller's contract; the
    // pointer written is an owned Arc released by cm_ctx_free.
    unsafe { out.write_unaligned(Arc::into_raw(c).cast_mut()) };
    Ok(0)
}

/// A new context: the daemon if its socket exists, else embedded.
///
/// # Safety
/// `out` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cm_ctx_new(out: *mut *mut cm_ctx) -> c_int {
    guard::int(|| publish(out, Cm::new))
}

/// A new context with an embedded CM.
///
/// # Safety
/// `out` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cm_ctx_new_embedded(out: *mut *mut cm_ctx) -> c_int {
    guard::int(|| publish(out, || Cm::embedded(libcm::Config::default())))
}

/// A new context on the daemon at `path` (NULL: the default path).
///
/// # Safety
/// `path` is NULL or NUL-terminated; `out` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cm_ctx_connect(path: *const c_char, out: *mut *mut cm_ctx) -> c_int {
    guard::int(|| {
        // SAFETY: the caller's contract.
        let p = unsafe { crate::convert::socket_path(path) };
        publish(out, || Cm::connect(&p))
    })
}

/// Free a context (closing its flows). NULL is ignored.
///
/// # Safety
/// `c` is NULL or a live handle; it must not be used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cm_ctx_free(c: *mut cm_ctx) {
    guard::void(|| {
        // SAFETY: the caller's contract.
        if unsafe { ctx_ref(c) }.is_ok() {
            // SAFETY: releases the count published by cm_ctx_new*; a
            // dispatch in progress holds its own count.
            drop(unsafe { Arc::from_raw(c.cast_const()) });
        }
    });
}

/// Declare a `cm_ctx_*` function taking the context and returning `int`.
macro_rules! ctx_int {
    ($(#[$m:meta])* fn $name:ident($($a:ident: $t:ty),*) $body:expr) => {
        $(#[$m])*
        ///
        /// # Safety
        /// `c` is NULL or a live context handle.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name(c: *mut cm_ctx $(, $a: $t)*) -> c_int {
            guard::int(|| {
                // SAFETY: the caller's contract.
                let c: &cm_ctx = unsafe { ctx_ref(c) }?;
                let f: &dyn Fn(&cm_ctx) -> Result<c_int, Code> = &$body;
                f(c)
            })
        }
    };
}

ctx_int!(
    /// `CM_MODE_EMBEDDED` or `CM_MODE_DAEMON`.
    fn cm_ctx_mode() |c| Ok(mode_out(c.ctx.mode()))
);
ctx_int!(
    /// `cm_status` on a context.
    fn cm_ctx_status() |c| Ok(crate::status_out(c.ctx.status()))
);
ctx_int!(
    /// `cm_set_failover` on a context.
    fn cm_ctx_set_failover(on: c_int) |c| {
        c.ctx.set_failover(on != 0);
        Ok(0)
    }
);
ctx_int!(
    /// `cm_mtu` on a context.
    fn cm_ctx_mtu(flow: cm_flowid) |c| calls::mtu(c, flow)
);
ctx_int!(
    /// `cm_request` on a context.
    fn cm_ctx_request(flow: cm_flowid) |c| calls::request(c, flow, 1)
);
ctx_int!(
    /// `cm_request_mtus` on a context.
    fn cm_ctx_request_mtus(flow: cm_flowid, k: c_int) |c| calls::request(c, flow, k)
);
ctx_int!(
    /// `cm_notify` on a context.
    fn cm_ctx_notify(flow: cm_flowid, nsent: i64) |c| calls::notify(c, flow, nsent)
);
ctx_int!(
    /// `cm_update` on a context.
    fn cm_ctx_update(flow: cm_flowid, nsent: i64, nrecd: i64, lossmode: c_int, rtt: c_double) |c| {
        calls::update(c, flow, nsent, nrecd, lossmode, rtt)
    }
);
ctx_int!(
    /// `cm_close` on a context.
    fn cm_ctx_close(flow: cm_flowid) |c| calls::close(c, flow)
);
ctx_int!(
    /// `cm_thresh(down, up)` on a context (context-wide).
    fn cm_ctx_thresh(down: c_double, up: c_double) |c| calls::thresh(c, down, up)
);
ctx_int!(
    /// `cm_thresh_flow` on a context.
    fn cm_ctx_thresh_flow(flow: cm_flowid, rate_down: c_double, rate_up: c_double, rtt_down: c_double, rtt_up: c_double) |c| {
        calls::thresh_flow(c, flow, rate_down, rate_up, rtt_down, rtt_up)
    }
);
ctx_int!(
    /// `cm_set_weight` on a context.
    fn cm_ctx_set_weight(flow: cm_flowid, weight: c_int) |c| calls::set_weight(c, flow, weight)
);
ctx_int!(
    /// `cm_set_capacity` on a context.
    fn cm_ctx_set_capacity(flow: cm_flowid, bits_per_sec: u64) |c| {
        calls::set_capacity(c, flow, bits_per_sec)
    }
);

/// `cm_set_controller` on a context.
///
/// # Safety
/// `c` is NULL or live; `spec` is NULL or a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cm_ctx_set_controller(
    c: *mut cm_ctx,
    flow: cm_flowid,
    spec: *const c_char,
) -> c_int {
    guard::int(|| {
        // SAFETY: the caller's contract.
        unsafe { calls::set_controller(ctx_ref(c)?, flow, spec) }
    })
}
ctx_int!(
    /// `cm_register_send` on a context: `fn(ctx, flow, bytes, arg)`.
    fn cm_ctx_register_send(cmapp_send: Option<CtxSend>, arg: *mut c_void) |c| {
        c.ctx.register_send(cmapp_send.map(|f| SendCb::Ctx(f, arg as usize)));
        Ok(0)
    }
);
ctx_int!(
    /// `cm_register_update` on a context: `fn(ctx, flow, estimate, arg)`.
    fn cm_ctx_register_update(cmapp_update: Option<CtxUpdate>, arg: *mut c_void) |c| {
        c.ctx.register_update(cmapp_update.map(|f| UpdateCb::Ctx(f, arg as usize))).map(|()| 0)
    }
);
ctx_int!(
    /// `cm_wait` on a context.
    fn cm_ctx_wait(timeout_ms: c_int) |c| c.ctx.wait(timeout_ms).map(|()| 0)
);
ctx_int!(
    /// `cm_fd` on a context.
    fn cm_ctx_fd() |c| c.ctx.fd()
);
ctx_int!(
    /// `cm_set_reply_timeout` on a context.
    fn cm_ctx_set_reply_timeout(ms: c_int) |c| c.ctx.set_reply_timeout(ms).map(|()| 0)
);
ctx_int!(
    /// `cm_enable_sigio` on a context.
    fn cm_ctx_enable_sigio() |c| c.ctx.enable_sigio().map(|()| 0)
);

/// `cm_dispatch` on a context.
///
/// # Safety
/// `c` is NULL or a live context handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cm_ctx_dispatch(c: *mut cm_ctx) -> c_int {
    guard::int(|| {
        // SAFETY: the caller's contract; the Arc keeps the context alive
        // even if a callback frees the handle.
        let a = unsafe { ctx_arc(c) }?;
        a.ctx.dispatch(c).map(guard::count)
    })
}

/// `cm_open` on a context, with explicit address lengths.
///
/// # Safety
/// `src` is NULL or `srclen` readable bytes; `dst` likewise.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cm_ctx_open(
    c: *mut cm_ctx,
    src: *const libc::sockaddr,
    srclen: libc::socklen_t,
    dst: *const libc::sockaddr,
    dstlen: libc::socklen_t,
) -> cm_flowid {
    guard::long(|| {
        // SAFETY: the caller's contract.
        let c = unsafe { ctx_ref(c) }?;
        // SAFETY: the caller's contract; lengths are checked by `read`.
        let dst = unsafe { addr::read(dst, Some(dstlen as usize)) }?;
        let src = if src.is_null() {
            None
        } else {
            // SAFETY: as above.
            Some(unsafe { addr::read(src, Some(srclen as usize)) }?)
        };
        c.ctx.open(src, dst)
    })
}

/// `cm_open_buffered` on a context.
///
/// # Safety
/// `c` is NULL or live; `dst` is NULL or `dstlen` readable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cm_ctx_open_buffered(
    c: *mut cm_ctx,
    udp_fd: c_int,
    dst: *const libc::sockaddr,
    dstlen: libc::socklen_t,
) -> cm_flowid {
    guard::long(|| {
        // SAFETY: the caller's contract.
        let c = unsafe { ctx_ref(c) }?;
        // SAFETY: the caller's contract; the length is checked by `read`.
        let dst = unsafe { addr::read(dst, Some(dstlen as usize)) }?;
        calls::open_buffered(c, udp_fd, dst)
    })
}

/// `cm_send` on a context.
///
/// # Safety
/// `c` is NULL or live; `buf` points to `len` bytes (NULL if len is 0).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cm_ctx_send(
    c: *mut cm_ctx,
    flow: cm_flowid,
    buf: *const c_void,
    len: usize,
) -> c_int {
    guard::int(|| {
        // SAFETY: the caller's contract.
        unsafe { calls::send(ctx_ref(c)?, flow, buf, len) }
    })
}

/// `cm_query` on a context, into one structure.
///
/// # Safety
/// `c` is NULL or live; `out` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cm_ctx_query(
    c: *mut cm_ctx,
    flow: cm_flowid,
    out: *mut cm_estimate,
) -> c_int {
    guard::int(|| {
        // SAFETY: the caller's contract.
        let c = unsafe { ctx_ref(c) }?;
        if out.is_null() {
            return Err(EFAULT);
        }
        let e = c.ctx.query(flow_id(flow)?)?;
        // SAFETY: non-NULL and writable by the caller's contract.
        unsafe { out.write_unaligned(e) };
        Ok(0)
    })
}

/// `cm_getmacroflow` on a context.
///
/// # Safety
/// `c` is NULL or a live context handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cm_ctx_getmacroflow(c: *mut cm_ctx, flow: cm_flowid) -> cm_mflowid {
    guard::long(|| {
        // SAFETY: the caller's contract.
        calls::getmacroflow(unsafe { ctx_ref(c) }?, flow)
    })
}

/// `cm_setmacroflow` on a context.
///
/// # Safety
/// `c` is NULL or a live context handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cm_ctx_setmacroflow(
    c: *mut cm_ctx,
    mflow: cm_mflowid,
    flow: cm_flowid,
) -> cm_mflowid {
    guard::long(|| {
        // SAFETY: the caller's contract.
        calls::setmacroflow(unsafe { ctx_ref(c) }?, mflow, flow)
    })
}

/// `cm_bulk_request` on a context.
///
/// # Safety
/// `c` is NULL or live; `flows` points to `n` ids.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cm_ctx_bulk_request(
    c: *mut cm_ctx,
    flows: *const cm_flowid,
    n: usize,
) -> c_int {
    // SAFETY: the caller's contract.
    guard::int(|| unsafe { bulk_request(ctx_ref(c)?, flows, n) })
}

/// `cm_bulk_notify` on a context.
///
/// # Safety
/// `c` is NULL or live; `flows`, `nsent` point to `n` elements.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cm_ctx_bulk_notify(
    c: *mut cm_ctx,
    flows: *const cm_flowid,
    nsent: *const i64,
    n: usize,
) -> c_int {
    // SAFETY: the caller's contract.
    guard::int(|| unsafe { bulk_notify(ctx_ref(c)?, flows, nsent, n) })
}

/// `cm_bulk_update` on a context.
///
/// # Safety
/// `c` is NULL or live; `fb` points to `n` reports.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cm_ctx_bulk_update(
    c: *mut cm_ctx,
    fb: *const cm_feedback,
    n: usize,
) -> c_int {
    // SAFETY: the caller's contract.
    guard::int(|| unsafe { bulk_update(ctx_ref(c)?, fb, n) })
}

/// `cm_bulk_query` on a context.
///
/// # Safety
/// `c` is NULL or live; `flows` points to `n` ids, `out` to room for `n`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cm_ctx_bulk_query(
    c: *mut cm_ctx,
    flows: *const cm_flowid,
    n: usize,
    out: *mut cm_estimate,
) -> c_int {
    // SAFETY: the caller's contract.
    guard::int(|| unsafe { bulk_query(ctx_ref(c)?, flows, n, out) })
}
