//! The papers' `cm_*` calls on the implicit per-process context
//! (cm-implementation-linux §2.1; cm-implementation-slides "The CM API"),
//! created on first use. Each call's body is shared with its `cm_ctx_*`
//! twin in `calls.rs`. See `include/cm.h` for the contract of each.

use std::ffi::{c_char, c_double, c_int, c_void};
use std::sync::{Arc, Mutex, PoisonError};

use libcm::Cm;

use crate::calls;
use crate::convert::flow_id;
use crate::ctx::{PaperSend, PaperUpdate, SendCb, UpdateCb};
use crate::guard::{self, Code, EALREADY};
use crate::{cm_ctx, cm_estimate, cm_feedback, cm_flowid, cm_mflowid, mode_out, put};

/// The implicit context: created by the first call (or `cm_init_*`),
/// dropped by `cm_fini`.
static GLOBAL: Mutex<Option<Arc<cm_ctx>>> = Mutex::new(None);

fn global() -> Result<Arc<cm_ctx>, Code> {
    let mut g = GLOBAL.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(c) = &*g {
        return Ok(Arc::clone(c));
    }
    let c = cm_ctx::new(Cm::new()?);
    *g = Some(Arc::clone(&c));
    Ok(c)
}

fn init(make: impl FnOnce() -> Result<Cm, libcm::CmError>) -> Result<c_int, Code> {
    let mut g = GLOBAL.lock().unwrap_or_else(PoisonError::into_inner);
    if g.is_some() {
        return Err(EALREADY);
    }
    *g = Some(cm_ctx::new(make()?));
    Ok(0)
}

/// Use an embedded CM for the implicit context.
#[unsafe(no_mangle)]
pub extern "C" fn cm_init_embedded() -> c_int {
    guard::int(|| init(|| Cm::embedded(libcm::Config::default())))
}

/// Use the daemon at `path` (NULL: the default path) for the implicit context.
///
/// # Safety
/// `path` is NULL or a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cm_init_daemon(path: *const c_char) -> c_int {
    guard::int(|| {
        // SAFETY: the caller's contract.
        let p = unsafe { crate::convert::socket_path(path) };
        init(|| Cm::connect(&p))
    })
}

/// Drop the implicit context (closing its flows); the next call makes a new one.
#[unsafe(no_mangle)]
pub extern "C" fn cm_fini() -> c_int {
    guard::int(|| {
        let old = GLOBAL.lock().unwrap_or_else(PoisonError::into_inner).take();
        drop(old);
        Ok(0)
    })
}

/// `CM_MODE_EMBEDDED` or `CM_MODE_DAEMON` (creates the context if needed).
#[unsafe(no_mangle)]
pub extern "C" fn cm_mode() -> c_int {
    guard::int(|| Ok(mode_out(global()?.ctx.mode())))
}

/// Which CM the implicit context runs on now: `CM_STATUS_DAEMON`,
/// `CM_STATUS_FALLBACK` (the daemon went away) or `CM_STATUS_EMBEDDED`.
#[unsafe(no_mangle)]
pub extern "C" fn cm_status() -> c_int {
    guard::int(|| Ok(crate::status_out(global()?.ctx.status())))
}

/// Whether the implicit context moves to an embedded CM when the daemon
/// goes away (non-zero, the default) or fails every call with `-EPIPE` (0).
#[unsafe(no_mangle)]
pub extern "C" fn cm_set_failover(on: c_int) -> c_int {
    guard::int(|| {
        global()?.ctx.set_failover(on != 0);
        Ok(0)
    })
}

/// `cm_open(src, dst)`: a new flow; src may be NULL.
///
/// # Safety
/// `src` is NULL or a whole `sockaddr_in`/`sockaddr_in6`; likewise `dst`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cm_open(
    src: *const libc::sockaddr,
    dst: *const libc::sockaddr,
) -> cm_flowid {
    guard::long(|| {
        // SAFETY: the caller's contract.
        let dst = unsafe { crate::addr::read(dst, None) }?;
        let src = if src.is_null() {
            None
        } else {
            // SAFETY: the caller's contract.
            Some(unsafe { crate::addr::read(src, None) }?)
        };
        global()?.ctx.open(src, dst)
    })
}

/// `cm_mtu(flow)`.
#[unsafe(no_mangle)]
pub extern "C" fn cm_mtu(flow: cm_flowid) -> c_int {
    guard::int(|| calls::mtu(&*global()?, flow))
}

/// `cm_request(flow)`: one MTU.
#[unsafe(no_mangle)]
pub extern "C" fn cm_request(flow: cm_flowid) -> c_int {
    guard::int(|| calls::request(&*global()?, flow, 1))
}

/// Request `k` MTUs at once (one grant may cover up to `k` MTUs).
#[unsafe(no_mangle)]
pub extern "C" fn cm_request_mtus(flow: cm_flowid, k: c_int) -> c_int {
    guard::int(|| calls::request(&*global()?, flow, k))
}

/// `cm_register_send(cmapp_send)`; NULL unregisters.
#[unsafe(no_mangle)]
pub extern "C" fn cm_register_send(cmapp_send: Option<PaperSend>) -> c_int {
    guard::int(|| {
        global()?.ctx.register_send(cmapp_send.map(SendCb::Paper));
        Ok(0)
    })
}

/// `cm_register_update(cmapp_update)`; NULL unregisters.
#[unsafe(no_mangle)]
pub extern "C" fn cm_register_update(cmapp_update: Option<PaperUpdate>) -> c_int {
    guard::int(|| {
        global()?
            .ctx
            .register_update(cmapp_update.map(UpdateCb::Paper))
            .map(|()| 0)
    })
}

/// `cm_thresh(down, up)`: context-wide rate thresholds.
#[unsafe(no_mangle)]
pub extern "C" fn cm_thresh(down: c_double, up: c_double) -> c_int {
    guard::int(|| calls::thresh(&*global()?, down, up))
}

/// Per-flow thresholds (RFC 3124's four factors); subscribes the flow.
#[unsafe(no_mangle)]
pub extern "C" fn cm_thresh_flow(
    flow: cm_flowid,
    rate_down: c_double,
    rate_up: c_double,
    rtt_down: c_double,
    rtt_up: c_double,
) -> c_int {
    guard::int(|| calls::thresh_flow(&*global()?, flow, rate_down, rate_up, rtt_down, rtt_up))
}

/// `cm_notify(flow, nsent)`.
#[unsafe(no_mangle)]
pub extern "C" fn cm_notify(flow: cm_flowid, nsent: i64) -> c_int {
    guard::int(|| calls::notify(&*global()?, flow, nsent))
}

/// `cm_update(flow, nsent, nrecd, lossmode, rtt)`.
#[unsafe(no_mangle)]
pub extern "C" fn cm_update(
    flow: cm_flowid,
    nsent: i64,
    nrecd: i64,
    lossmode: c_int,
    rtt: c_double,
) -> c_int {
    guard::int(|| calls::update(&*global()?, flow, nsent, nrecd, lossmode, rtt))
}

/// `cm_query(flow, &rate, &srtt, &rttvar, &loss)`; NULL outputs are skipped.
///
/// # Safety
/// Each pointer is NULL or valid for writing a double.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cm_query(
    flow: cm_flowid,
    rate: *mut c_double,
    srtt: *mut c_double,
    rttvar: *mut c_double,
    loss: *mut c_double,
) -> c_int {
    guard::int(|| {
        let e = global()?.ctx.query(flow_id(flow)?)?;
        // SAFETY: the caller's contract (NULL skipped).
        unsafe {
            put(rate, e.rate);
            put(srtt, e.srtt);
            put(rttvar, e.rttvar);
            put(loss, e.loss);
        }
        Ok(0)
    })
}

/// `cm_close(flow)`.
#[unsafe(no_mangle)]
pub extern "C" fn cm_close(flow: cm_flowid) -> c_int {
    guard::int(|| calls::close(&*global()?, flow))
}

/// `cm_getmacroflow(flow)`.
#[unsafe(no_mangle)]
pub extern "C" fn cm_getmacroflow(flow: cm_flowid) -> cm_mflowid {
    guard::long(|| calls::getmacroflow(&*global()?, flow))
}

/// `cm_setmacroflow(mflow, flow)` (RFC 3124 order; mflow < 0: a new one).
#[unsafe(no_mangle)]
pub extern "C" fn cm_setmacroflow(mflow: cm_mflowid, flow: cm_flowid) -> cm_mflowid {
    guard::long(|| calls::setmacroflow(&*global()?, mflow, flow))
}

/// The flow's scheduler weight in its macroflow (1..65535).
#[unsafe(no_mangle)]
pub extern "C" fn cm_set_weight(flow: cm_flowid, weight: c_int) -> c_int {
    guard::int(|| calls::set_weight(&*global()?, flow, weight))
}

/// Run the controller `spec` (e.g. "iscc:l=2") on the flow's macroflow.
///
/// # Safety
/// `spec` is NULL or a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cm_set_controller(flow: cm_flowid, spec: *const c_char) -> c_int {
    // SAFETY: the caller's contract.
    guard::int(|| unsafe { calls::set_controller(&*global()?, flow, spec) })
}

/// The bottleneck capacity of the flow's path in bit/s (0 forgets it).
#[unsafe(no_mangle)]
pub extern "C" fn cm_set_capacity(flow: cm_flowid, bits_per_sec: u64) -> c_int {
    guard::int(|| calls::set_capacity(&*global()?, flow, bits_per_sec))
}

/// `cm_bulk_request(flows, n)`: one MTU for each.
///
/// # Safety
/// `flows` points to `n` ids (NULL allowed when n is 0).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cm_bulk_request(flows: *const cm_flowid, n: usize) -> c_int {
    // SAFETY: the caller's contract.
    guard::int(|| unsafe { calls::bulk_request(&*global()?, flows, n) })
}

/// `cm_bulk_notify(flows, nsent, n)`.
///
/// # Safety
/// `flows` and `nsent` point to `n` elements each.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cm_bulk_notify(
    flows: *const cm_flowid,
    nsent: *const i64,
    n: usize,
) -> c_int {
    // SAFETY: the caller's contract.
    guard::int(|| unsafe { calls::bulk_notify(&*global()?, flows, nsent, n) })
}

/// `cm_bulk_update(reports, n)`.
///
/// # Safety
/// `fb` points to `n` reports.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cm_bulk_update(fb: *const cm_feedback, n: usize) -> c_int {
    // SAFETY: the caller's contract.
    guard::int(|| unsafe { calls::bulk_update(&*global()?, fb, n) })
}

/// `cm_bulk_query(flows, n, out)`.
///
/// # Safety
/// `flows` points to `n` ids, `out` to room for `n` estimates.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cm_bulk_query(
    flows: *const cm_flowid,
    n: usize,
    out: *mut cm_estimate,
) -> c_int {
    // SAFETY: the caller's contract.
    guard::int(|| unsafe { calls::bulk_query(&*global()?, flows, n, out) })
}

/// Open a buffered (congestion-controlled UDP) flow on `udp_fd` to `dst`.
///
/// # Safety
/// `dst` is NULL or a whole `sockaddr_in`/`sockaddr_in6`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cm_open_buffered(udp_fd: c_int, dst: *const libc::sockaddr) -> cm_flowid {
    guard::long(|| {
        // SAFETY: the caller's contract.
        let dst = unsafe { crate::addr::read(dst, None) }?;
        calls::open_buffered(&*global()?, udp_fd, dst)
    })
}

/// `cm_send(flow, buf, len)`: queue one datagram on a buffered flow.
///
/// # Safety
/// `buf` points to `len` readable bytes (NULL allowed when len is 0).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cm_send(flow: cm_flowid, buf: *const c_void, len: usize) -> c_int {
    // SAFETY: the caller's contract.
    guard::int(|| unsafe { calls::send(&*global()?, flow, buf, len) })
}

/// Deliver ready events to the callbacks; returns how many.
#[unsafe(no_mangle)]
pub extern "C" fn cm_dispatch() -> c_int {
    guard::int(|| {
        let c = global()?;
        let me = Arc::as_ptr(&c).cast_mut();
        c.ctx.dispatch(me).map(guard::count)
    })
}

/// Block until an event may be ready or `timeout_ms` passes.
#[unsafe(no_mangle)]
pub extern "C" fn cm_wait(timeout_ms: c_int) -> c_int {
    guard::int(|| global()?.ctx.wait(timeout_ms).map(|()| 0))
}

/// The pollable descriptor (readable when `cm_dispatch` has work).
#[unsafe(no_mangle)]
pub extern "C" fn cm_fd() -> c_int {
    guard::int(|| global()?.ctx.fd())
}

/// SIGIO when the CM has something for this process.
#[unsafe(no_mangle)]
pub extern "C" fn cm_enable_sigio() -> c_int {
    guard::int(|| global()?.ctx.enable_sigio().map(|()| 0))
}

/// Daemon mode: the longest a call waits for the daemon's reply, in
/// milliseconds (> 0; default 5000), before it returns `-ETIMEDOUT`.
#[unsafe(no_mangle)]
pub extern "C" fn cm_set_reply_timeout(ms: c_int) -> c_int {
    guard::int(|| global()?.ctx.set_reply_timeout(ms).map(|()| 0))
}

/// A static message for an error code.
#[unsafe(no_mangle)]
pub extern "C" fn cm_strerror(code: c_int) -> *const c_char {
    let mut out = std::ptr::null();
    guard::void(|| out = guard::strerror(code));
    if out.is_null() {
        c"internal error in libcm".as_ptr()
    } else {
        out
    }
}
