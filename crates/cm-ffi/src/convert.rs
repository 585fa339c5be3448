//! Arguments from C to the core's types and results back, with the checks
//! the C API documents (negative ids and counts, NaN, unknown loss modes,
//! thresholds below 1 are `-EINVAL`).

use cm_core::{Bytes, Duration, Feedback, FlowId, LossMode, MacroflowId, PathEstimate, Thresholds};

use crate::guard::{Code, EINVAL, EOVERFLOW};
use crate::{cm_estimate, cm_flowid};

/// A flow id from C: negative ids are invalid.
pub(crate) fn flow_id(f: cm_flowid) -> Result<FlowId, Code> {
    u64::try_from(f).map(FlowId::from_u64).map_err(|_| EINVAL)
}

pub(crate) fn flow_out(f: FlowId) -> Result<cm_flowid, Code> {
    i64::try_from(f.to_u64()).map_err(|_| EOVERFLOW)
}

pub(crate) fn macroflow_out(m: MacroflowId) -> Result<i64, Code> {
    i64::try_from(m.to_u64()).map_err(|_| EOVERFLOW)
}

/// A byte count from C: negative counts are invalid.
pub(crate) fn bytes_in(n: i64) -> Result<u64, Code> {
    u64::try_from(n).map_err(|_| EINVAL)
}

/// Seconds (double) to the core's microseconds; `<= 0` is "no sample".
pub(crate) fn rtt_in(rtt: f64) -> Result<Option<Duration>, Code> {
    if !rtt.is_finite() {
        return Err(EINVAL);
    }
    if rtt <= 0.0 {
        return Ok(None);
    }
    let us = (rtt * 1e6).round();
    if us >= u64::MAX as f64 {
        return Err(EINVAL);
    }
    // In range and non-negative: the cast is exact up to rounding.
    Ok(Some(Duration::from_micros((us as u64).max(1))))
}

/// The C loss-mode constant to the core's.
pub(crate) fn loss_in(mode: i32) -> Result<LossMode, Code> {
    Ok(match mode {
        crate::CM_LOSS_NONE => LossMode::None,
        crate::CM_LOSS_FEEDBACK => LossMode::Transient,
        crate::CM_NO_FEEDBACK => LossMode::Persistent,
        crate::CM_EXPLICIT_CONGESTION => LossMode::Ecn,
        crate::CM_NO_CONGESTION => LossMode::NotCongestion,
        _ => return Err(EINVAL),
    })
}

/// A feedback report from C's `cm_update` arguments.
pub(crate) fn feedback(nsent: i64, nrecd: i64, lossmode: i32, rtt: f64) -> Result<Feedback, Code> {
    let (nsent, nrecd) = (bytes_in(nsent)?, bytes_in(nrecd)?);
    if nrecd > nsent {
        return Err(EINVAL);
    }
    Ok(Feedback {
        nsent: Bytes(nsent),
        nrecd: Bytes(nrecd),
        loss: loss_in(lossmode)?,
        rtt: rtt_in(rtt)?,
        lost_sent: None,
    })
}

/// An estimate for C: every unknown field is -1 (never a fake zero).
pub(crate) fn estimate_out(e: &PathEstimate) -> cm_estimate {
    cm_estimate {
        rate: e.rate.map_or(-1.0, |r| r.bytes_per_sec() as f64),
        srtt: e.srtt.map_or(-1.0, Duration::as_secs_f64),
        rttvar: e.rttvar.map_or(-1.0, Duration::as_secs_f64),
        loss: e.loss.unwrap_or(-1.0),
    }
}

/// Check `cm_thresh` factors (finite, >= 1).
pub(crate) fn thresholds(rd: f64, ru: f64, td: f64, tu: f64) -> Result<Thresholds, Code> {
    let t = Thresholds {
        rate_down: rd,
        rate_up: ru,
        rtt_down: td,
        rtt_up: tu,
    };
    t.validate().map_err(|_| EINVAL)?;
    Ok(t)
}

/// A socket path from C: NULL is the default path.
///
/// # Safety
/// `path` is NULL or a NUL-terminated string.
pub(crate) unsafe fn socket_path(path: *const std::ffi::c_char) -> std::path::PathBuf {
    use std::os::unix::ffi::OsStrExt;
    if path.is_null() {
        return libcm::default_socket_path();
    }
    // SAFETY: non-NULL and NUL-terminated by the caller's contract.
    let s = unsafe { std::ffi::CStr::from_ptr(path) };
    std::path::PathBuf::from(std::ffi::OsStr::from_bytes(s.to_bytes()))
}
