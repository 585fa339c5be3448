//! The one place with `unsafe`: the `TUNSETIFF` ioctl and `sched_setscheduler`.
#![allow(unsafe_code)]

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;

const TUNSETIFF: libc::c_ulong = 0x4004_54ca;
const IFF_TUN: libc::c_short = 0x0001;
const IFF_NO_PI: libc::c_short = 0x1000;

/// `struct ifreq` as far as `TUNSETIFF` uses it: the name and the flags.
#[repr(C)]
struct IfReq {
    name: [libc::c_char; libc::IFNAMSIZ],
    flags: libc::c_short,
    // The kernel copies `sizeof(struct ifreq)` = 40 bytes on 64-bit.
    _pad: [u8; 22],
}

/// Create (or attach to) the TUN device `name` (`IFF_TUN | IFF_NO_PI`) in the network
/// namespace of the calling thread, returning its non-blocking file descriptor.
///
/// The device exists as long as the returned file is open.
pub(crate) fn open_tun(name: &str) -> io::Result<File> {
    if name.is_empty() || name.len() >= libc::IFNAMSIZ {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "bad TUN name"));
    }
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open("/dev/net/tun")?;
    let mut req = IfReq {
        name: [0; libc::IFNAMSIZ],
        flags: IFF_TUN | IFF_NO_PI,
        _pad: [0; 22],
    };
    for (dst, src) in req.name.iter_mut().zip(name.bytes()) {
        *dst = src as libc::c_char;
    }
    // SAFETY: `file` is an open descriptor of /dev/net/tun; TUNSETIFF reads (and may
    // write back the name into) a `struct ifreq`, and `req` is a live, writable,
    // properly aligned buffer at least as large as `struct ifreq` (40 bytes).
    let rc = unsafe { libc::ioctl(file.as_raw_fd(), TUNSETIFF as _, &mut req as *mut IfReq) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(file)
}

/// Make the calling thread `SCHED_FIFO` at `priority` (1..=99) so it wakes on time
/// even when the machine is busy. Needs root (CAP_SYS_NICE).
pub(crate) fn set_realtime(priority: i32) -> io::Result<()> {
    let param = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: pid 0 means the calling thread; `param` is a valid, initialized
    // `sched_param` that outlives the call, which only reads it.
    let rc = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn ifreq_is_as_large_as_the_kernels() {
        assert!(std::mem::size_of::<super::IfReq>() >= 40);
    }
}
