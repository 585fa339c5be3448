//! Passing the region and doorbells over the control socket (`SCM_RIGHTS`).

use std::mem::MaybeUninit;
use std::os::fd::{BorrowedFd, OwnedFd};

use rustix::io::Errno;
use rustix::net::{
    RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags, recvmsg, sendmsg,
};

/// Descriptors an `Attached` frame carries: region, daemon doorbell, client
/// doorbell.
pub const ATTACH_FDS: usize = 3;

/// Send one frame with descriptors attached, without blocking: a socket
/// that cannot take it now is an error (`WouldBlock`), never a wait, so a
/// daemon cannot be stalled by a client that does not read.
pub fn send_with_fds(
    sock: BorrowedFd<'_>,
    frame: &[u8],
    fds: &[BorrowedFd<'_>],
) -> std::io::Result<()> {
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(ATTACH_FDS))];
    let mut anc = SendAncillaryBuffer::new(&mut space);
    if !anc.push(SendAncillaryMessage::ScmRights(fds)) {
        return Err(std::io::Error::other("too many descriptors"));
    }
    loop {
        match sendmsg(
            sock,
            &[std::io::IoSlice::new(frame)],
            &mut anc,
            SendFlags::NOSIGNAL | SendFlags::DONTWAIT,
        ) {
            Ok(_) => return Ok(()),
            Err(Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
        }
    }
}

/// Receive one frame into `buf` without blocking, with any descriptors
/// that came with it. `Ok(None)`: nothing waits; `Ok(Some((0, _)))`: the
/// peer hung up.
pub fn recv_with_fds(
    sock: BorrowedFd<'_>,
    buf: &mut [u8],
) -> std::io::Result<Option<(usize, Vec<OwnedFd>)>> {
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(ATTACH_FDS))];
    let mut anc = RecvAncillaryBuffer::new(&mut space);
    let r = loop {
        match recvmsg(
            sock,
            &mut [std::io::IoSliceMut::new(buf)],
            &mut anc,
            RecvFlags::DONTWAIT | RecvFlags::CMSG_CLOEXEC,
        ) {
            Ok(r) => break r,
            Err(Errno::INTR) => continue,
            Err(Errno::AGAIN) => return Ok(None),
            Err(e) => return Err(e.into()),
        }
    };
    let mut fds = Vec::new();
    for m in anc.drain() {
        if let RecvAncillaryMessage::ScmRights(it) = m {
            fds.extend(it);
        }
    }
    Ok(Some((r.bytes, fds)))
}
