//! The boundary: error codes, `catch_unwind` around every entry point, and
//! `cm_strerror`.

use std::collections::HashMap;
use std::ffi::{CStr, CString, c_char, c_int};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Mutex;

use libcm::CmError;

/// A negative errno-style code on its way to C.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Code(pub(crate) i32);

impl From<CmError> for Code {
    fn from(e: CmError) -> Self {
        Code(e.code())
    }
}

/// A NULL pointer where one is required.
pub(crate) const EFAULT: Code = Code(-libc::EFAULT);
/// A bad argument (negative flow id, bad length, bad threshold, ...).
pub(crate) const EINVAL: Code = Code(-libc::EINVAL);
/// A socket address of a family other than AF_INET / AF_INET6.
pub(crate) const EAFNOSUPPORT: Code = Code(-libc::EAFNOSUPPORT);
/// `cm_init_*` after the implicit context exists.
pub(crate) const EALREADY: Code = Code(-libc::EALREADY);
/// A datagram larger than the flow's MTU.
pub(crate) const EMSGSIZE: Code = Code(-libc::EMSGSIZE);
/// A descriptor that is not a UDP socket.
pub(crate) const ENOTSOCK: Code = Code(-libc::ENOTSOCK);
/// A bad descriptor.
pub(crate) const EBADF: Code = Code(-libc::EBADF);
/// A value that does not fit the C type.
pub(crate) const EOVERFLOW: Code = Code(-libc::EOVERFLOW);
/// Not available in this mode (SIGIO in embedded mode).
pub(crate) const EOPNOTSUPP: Code = Code(-libc::EOPNOTSUPP);
/// A Rust panic was caught at the boundary.
pub(crate) const EPANIC: Code = Code(-libc::ENOTRECOVERABLE);

/// Run an entry point; a panic becomes [`EPANIC`] instead of unwinding
/// into C (undefined behaviour).
fn catch<T>(on_panic: T, f: impl FnOnce() -> T) -> T {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or(on_panic)
}

/// An entry point returning `int` (0 / a count, or a negative code).
pub(crate) fn int(f: impl FnOnce() -> Result<c_int, Code>) -> c_int {
    catch(EPANIC.0, || f().unwrap_or_else(|c| c.0))
}

/// An entry point returning a 64-bit id (or a negative code).
pub(crate) fn long(f: impl FnOnce() -> Result<i64, Code>) -> i64 {
    catch(i64::from(EPANIC.0), || {
        f().unwrap_or_else(|c| i64::from(c.0))
    })
}

/// An entry point returning nothing.
pub(crate) fn void(f: impl FnOnce()) {
    catch((), f);
}

/// A count as a C `int`, saturating.
pub(crate) fn count(n: usize) -> c_int {
    c_int::try_from(n).unwrap_or(c_int::MAX)
}

fn describe(code: i32) -> &'static str {
    // i32::MIN has no absolute value: it matches nothing below.
    match code.checked_abs().map_or(i32::MIN, |a| -a) {
        0 => "success",
        c if c == EFAULT.0 => "NULL pointer argument",
        c if c == EINVAL.0 => "invalid argument",
        c if c == EAFNOSUPPORT.0 => "address family not supported (AF_INET or AF_INET6 only)",
        c if c == EALREADY.0 => "the implicit CM context already exists",
        c if c == EMSGSIZE.0 => "datagram larger than the flow's MTU",
        c if c == ENOTSOCK.0 => "descriptor is not a UDP socket",
        c if c == EBADF.0 => "bad file descriptor",
        c if c == EOPNOTSUPP.0 => "not supported in this mode (SIGIO needs the daemon)",
        c if c == EPANIC.0 => "internal error in libcm (caught at the C boundary)",
        c if c == -libc::ENOENT => "no such flow or macroflow",
        c if c == -libc::EPERM => "permission denied by the CM daemon",
        c if c == -libc::EAGAIN => "try again (send queue full or rate limited)",
        c if c == -libc::EMFILE => {
            "a limit of the CM was reached (flows per client, macroflows per user, clients)"
        }
        c if c == -libc::EPIPE => "the CM daemon closed the connection",
        c if c == -libc::EPROTO => "protocol error or refusal from the CM daemon",
        c if c == -libc::ECONNREFUSED => "no CM daemon at the socket path",
        c if c == -libc::ETIMEDOUT => {
            "the CM daemon did not answer in time (stopped or hung; see cm_set_reply_timeout)"
        }
        _ => "",
    }
}

/// Messages for codes outside the table, made once each and kept.
static OTHER: Mutex<Option<HashMap<i32, &'static CStr>>> = Mutex::new(None);

/// `cm_strerror`: a static, NUL-terminated message.
pub(crate) fn strerror(code: c_int) -> *const c_char {
    let known = describe(code);
    if !known.is_empty() {
        return static_cstr(code, || known.to_owned());
    }
    let errno = code.checked_abs().unwrap_or(0);
    static_cstr(code, || {
        if (1..4096).contains(&errno) {
            std::io::Error::from_raw_os_error(errno).to_string()
        } else {
            format!("unknown CM error {code}")
        }
    })
}

fn static_cstr(code: i32, text: impl FnOnce() -> String) -> *const c_char {
    // Codes outside the errno range share one slot so the table stays bounded.
    let key = if (-4095..=4095).contains(&code) {
        -code.abs()
    } else {
        i32::MIN
    };
    let mut g = OTHER
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let map = g.get_or_insert_with(HashMap::new);
    let s = map.entry(key).or_insert_with(|| {
        let owned = if key == i32::MIN {
            "unknown CM error".to_owned()
        } else {
            text()
        };
        let c = CString::new(owned.replace('\0', " ")).unwrap_or_default();
        // Leaked on purpose: at most one message per distinct code (< 4097).
        Box::leak(c.into_boxed_c_str())
    });
    s.as_ptr()
}
