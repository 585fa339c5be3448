//! `cm_select`: the transport selection middleware (crate cm-select) for
//! C. Requirements come in cm-select's text form (`key=value` tokens); the
//! choice's summary and its one-line reason go out into caller buffers.

use std::ffi::{CStr, c_char, c_int};

use crate::guard::{self, Code, EFAULT, EINVAL};

/// No transport fits the requirements (contradictory or impossible).
const ENOPROTOOPT: Code = Code(-libc::ENOPROTOOPT);
/// A result did not fit its buffer (it is truncated there).
const ERANGE: Code = Code(-libc::ERANGE);

/// Copy `text` NUL-terminated into `buf` of `len` bytes (truncated to fit;
/// NULL or 0 skips). Returns whether it fit whole.
///
/// # Safety
/// `buf` is NULL or valid for `len` bytes of writes.
unsafe fn copy_out(text: &str, buf: *mut c_char, len: usize) -> bool {
    if buf.is_null() || len == 0 {
        return buf.is_null();
    }
    let bytes = text.as_bytes();
    let n = bytes.len().min(len - 1);
    // SAFETY: `buf` has room for `len` > n bytes by the caller's contract,
    // and a `str` never overlaps a C output buffer the caller owns.
    unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr().cast::<c_char>(), buf, n);
        buf.add(n).write(0);
    }
    n == bytes.len()
}

/// `cm_select(requirements, choice, choice_len, reason, reason_len)`: pick
/// a transport. 0 on success, -EINVAL for text that does not parse,
/// -ENOPROTOOPT when no transport fits (the reason buffer then holds why),
/// -ERANGE when a result was truncated, -EFAULT for NULL requirements.
///
/// # Safety
/// `requirements` is NULL or NUL-terminated; `choice` and `reason` are
/// NULL or valid for `choice_len` / `reason_len` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cm_select(
    requirements: *const c_char,
    choice: *mut c_char,
    choice_len: usize,
    reason: *mut c_char,
    reason_len: usize,
) -> c_int {
    guard::int(|| {
        if requirements.is_null() {
            return Err(EFAULT);
        }
        // SAFETY: non-NULL and NUL-terminated by the caller's contract.
        let text = unsafe { CStr::from_ptr(requirements) };
        let parsed = text
            .to_str()
            .map_err(|_| "requirements are not UTF-8".to_owned())
            .and_then(|t| t.parse::<cm_select::Requirements>());
        let req = match parsed {
            Ok(r) => r,
            Err(why) => {
                // SAFETY: the caller's contract on `reason`.
                unsafe { copy_out(&why, reason, reason_len) };
                return Err(EINVAL);
            }
        };
        match cm_select::select(&req) {
            Ok(c) => {
                // SAFETY: the caller's contract on both buffers.
                let whole = unsafe {
                    copy_out(&c.summary(), choice, choice_len)
                        & copy_out(&c.reason(), reason, reason_len)
                };
                if whole { Ok(0) } else { Err(ERANGE) }
            }
            Err(e) => {
                // SAFETY: the caller's contract on the buffers.
                unsafe {
                    copy_out("", choice, choice_len);
                    copy_out(&e.to_string(), reason, reason_len);
                }
                Err(ENOPROTOOPT)
            }
        }
    })
}
