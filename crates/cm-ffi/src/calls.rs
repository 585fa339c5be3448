//! Each C call once: its arguments checked and converted (`convert.rs`),
//! applied to a context (`ctx`), its result as C wants it.
//! `implicit_ctx.rs` exports these as the papers' `cm_*` calls on the
//! per-process context, `explicit_ctx.rs` as the `cm_ctx_*` calls on a
//! handle the program owns.

use std::ffi::{CStr, c_char, c_double, c_int, c_void};

use cm_core::FlowId;

use crate::convert::{self, flow_id};
use crate::guard::{Code, EFAULT, EINVAL};
use crate::{cm_ctx, cm_estimate, cm_feedback, cm_flowid, cm_mflowid, slice};

/// `cm_mtu`.
pub(crate) fn mtu(c: &cm_ctx, flow: cm_flowid) -> Result<c_int, Code> {
    let m = c.ctx.mtu(flow_id(flow)?)?;
    Ok(c_int::try_from(m).unwrap_or(c_int::MAX))
}

/// `cm_request` (`k` = 1) and `cm_request_mtus`.
pub(crate) fn request(c: &cm_ctx, flow: cm_flowid, k: c_int) -> Result<c_int, Code> {
    let k = u32::try_from(k).map_err(|_| EINVAL)?;
    c.ctx.request(flow_id(flow)?, k).map(|()| 0)
}

/// `cm_notify`.
pub(crate) fn notify(c: &cm_ctx, flow: cm_flowid, nsent: i64) -> Result<c_int, Code> {
    let n = convert::bytes_in(nsent)?;
    c.ctx.notify(flow_id(flow)?, n).map(|()| 0)
}

/// `cm_update`.
pub(crate) fn update(
    c: &cm_ctx,
    flow: cm_flowid,
    nsent: i64,
    nrecd: i64,
    lossmode: c_int,
    rtt: c_double,
) -> Result<c_int, Code> {
    let fb = convert::feedback(nsent, nrecd, lossmode, rtt)?;
    c.ctx.update(flow_id(flow)?, fb).map(|()| 0)
}

/// `cm_close`.
pub(crate) fn close(c: &cm_ctx, flow: cm_flowid) -> Result<c_int, Code> {
    c.ctx.close(flow_id(flow)?).map(|()| 0)
}

/// `cm_thresh(down, up)`: context-wide rate thresholds (the RTT factors
/// keep their defaults).
pub(crate) fn thresh(c: &cm_ctx, down: c_double, up: c_double) -> Result<c_int, Code> {
    let d = cm_core::Thresholds::default();
    let t = convert::thresholds(down, up, d.rtt_down, d.rtt_up)?;
    c.ctx.thresh_all(t).map(|()| 0)
}

/// `cm_thresh_flow`: RFC 3124's four factors for one flow.
pub(crate) fn thresh_flow(
    c: &cm_ctx,
    flow: cm_flowid,
    rate_down: c_double,
    rate_up: c_double,
    rtt_down: c_double,
    rtt_up: c_double,
) -> Result<c_int, Code> {
    let t = convert::thresholds(rate_down, rate_up, rtt_down, rtt_up)?;
    c.ctx.thresh_flow(flow_id(flow)?, t).map(|()| 0)
}

/// `cm_set_weight`.
pub(crate) fn set_weight(c: &cm_ctx, flow: cm_flowid, weight: c_int) -> Result<c_int, Code> {
    let w = u32::try_from(weight).map_err(|_| EINVAL)?;
    c.ctx.set_weight(flow_id(flow)?, w).map(|()| 0)
}

/// `cm_set_controller`: the spec's text form parsed here (not UTF-8 or not
/// a spec: `-EINVAL`), run on the flow's macroflow.
///
/// # Safety
/// `spec` is NULL or a NUL-terminated string.
pub(crate) unsafe fn set_controller(
    c: &cm_ctx,
    flow: cm_flowid,
    spec: *const c_char,
) -> Result<c_int, Code> {
    if spec.is_null() {
        return Err(EFAULT);
    }
    let flow = flow_id(flow)?;
    // SAFETY: non-NULL and NUL-terminated by the caller's contract.
    let text = unsafe { CStr::from_ptr(spec) };
    let cfg = text
        .to_str()
        .map_err(|_| EINVAL)?
        .parse::<cm_core::controller::ControllerConfig>()
        .map_err(|_| EINVAL)?;
    c.ctx.set_controller(flow, &cfg).map(|()| 0)
}

/// `cm_set_capacity`: bits per second (0 forgets the estimate).
pub(crate) fn set_capacity(c: &cm_ctx, flow: cm_flowid, bits_per_sec: u64) -> Result<c_int, Code> {
    let rate = (bits_per_sec > 0).then(|| cm_core::Rate::from_bits_per_sec(bits_per_sec));
    c.ctx.set_capacity(flow_id(flow)?, rate).map(|()| 0)
}

/// `cm_getmacroflow`.
pub(crate) fn getmacroflow(c: &cm_ctx, flow: cm_flowid) -> Result<cm_mflowid, Code> {
    c.ctx.getmacroflow(flow_id(flow)?)
}

/// `cm_setmacroflow(mflow, flow)`.
pub(crate) fn setmacroflow(
    c: &cm_ctx,
    mflow: cm_mflowid,
    flow: cm_flowid,
) -> Result<cm_mflowid, Code> {
    c.ctx.setmacroflow(mflow, flow_id(flow)?)
}

/// `cm_open_buffered`, the destination already read.
pub(crate) fn open_buffered(
    c: &cm_ctx,
    udp_fd: c_int,
    dst: std::net::SocketAddr,
) -> Result<cm_flowid, Code> {
    c.ctx.open_buffered(crate::udp_socket(udp_fd)?, dst)
}

/// `cm_send`.
///
/// # Safety
/// `buf` points to `len` readable bytes (NULL allowed when len is 0).
pub(crate) unsafe fn send(
    c: &cm_ctx,
    flow: cm_flowid,
    buf: *const c_void,
    len: usize,
) -> Result<c_int, Code> {
    // SAFETY: the caller's contract.
    let data = unsafe { slice(buf.cast::<u8>(), len) }?;
    c.ctx.send(flow_id(flow)?, data).map(|()| 0)
}

fn ids(flows: &[cm_flowid]) -> Result<Vec<FlowId>, Code> {
    flows.iter().map(|&f| flow_id(f)).collect()
}

/// `cm_bulk_request`: one MTU for each flow.
///
/// # Safety
/// `flows` points to `n` ids.
pub(crate) unsafe fn bulk_request(
    c: &cm_ctx,
    flows: *const cm_flowid,
    n: usize,
) -> Result<c_int, Code> {
    // SAFETY: the caller's contract.
    let flows = ids(unsafe { slice(flows, n) }?)?;
    c.ctx.bulk_request(&flows).map(|()| 0)
}

/// `cm_bulk_notify`.
///
/// # Safety
/// `flows` and `nsent` point to `n` elements.
pub(crate) unsafe fn bulk_notify(
    c: &cm_ctx,
    flows: *const cm_flowid,
    nsent: *const i64,
    n: usize,
) -> Result<c_int, Code> {
    // SAFETY: the caller's contract.
    let (f, s) = unsafe { (slice(flows, n)?, slice(nsent, n)?) };
    let sent = f
        .iter()
        .zip(s)
        .map(|(&f, &s)| Ok((flow_id(f)?, convert::bytes_in(s)?)))
        .collect::<Result<Vec<_>, Code>>()?;
    c.ctx.bulk_notify(&sent).map(|()| 0)
}

/// `cm_bulk_update`.
///
/// # Safety
/// `fb` points to `n` reports.
pub(crate) unsafe fn bulk_update(
    c: &cm_ctx,
    fb: *const cm_feedback,
    n: usize,
) -> Result<c_int, Code> {
    // SAFETY: the caller's contract.
    let fb = unsafe { slice(fb, n) }?;
    let fbs = fb
        .iter()
        .map(|r| {
            Ok((
                flow_id(r.flow)?,
                convert::feedback(r.nsent, r.nrecd, r.lossmode, r.rtt)?,
            ))
        })
        .collect::<Result<Vec<_>, Code>>()?;
    c.ctx.bulk_update(&fbs).map(|()| 0)
}

/// `cm_bulk_query`.
///
/// # Safety
/// `flows` points to `n` ids and `out` to room for `n` estimates.
pub(crate) unsafe fn bulk_query(
    c: &cm_ctx,
    flows: *const cm_flowid,
    n: usize,
    out: *mut cm_estimate,
) -> Result<c_int, Code> {
    if n > 0 && out.is_null() {
        return Err(EFAULT);
    }
    // SAFETY: the caller's contract.
    let flows = ids(unsafe { slice(flows, n) }?)?;
    let ests = c.ctx.bulk_query(&flows)?;
    for (i, e) in ests.into_iter().enumerate().take(n) {
        // SAFETY: out has room for n estimates (caller's contract), i < n.
        unsafe { out.add(i).write_unaligned(e) };
    }
    Ok(0)
}
