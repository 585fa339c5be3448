//! The daemon's end of one client's shared-memory rings (`cm_ipc::shm`):
//! the region holding both rings, the doorbell the client rings (in the
//! daemon's epoll set) and the one the daemon rings. A [`crate::session`]
//! holds one once its client attached; `daemon/rings.rs` attaches, reads
//! and arms them.

use std::os::fd::OwnedFd;

use cm_ipc::Frame;
use cm_ipc::shm::{self, Doorbell, Region};
use rustix::net::{SendFlags, send};

/// A client's shared-memory rings and doorbells.
pub(crate) struct ClientRings {
    pub(crate) region: Region,
    /// Rung by the client (in the daemon's epoll set).
    pub(crate) bell_in: Doorbell,
    /// Rung by the daemon.
    pub(crate) bell_out: Doorbell,
    /// Ring the client by an empty frame on its socket too (SIGIO clients).
    pub(crate) socket_bell: bool,
    /// Frames read since the last CPU-follow period (`follow.rs`).
    pub(crate) frames: u64,
}

impl ClientRings {
    /// A fresh region of the default size and two doorbells.
    pub(crate) fn create() -> std::io::Result<ClientRings> {
        Ok(ClientRings {
            region: Region::create(shm::DEFAULT_RING_BYTES)?,
            bell_in: Doorbell::new()?,
            bell_out: Doorbell::new()?,
            socket_bell: false,
            frames: 0,
        })
    }

    /// Ring the client's doorbell(s); `fd` is its control socket.
    pub(crate) fn ring_client(&self, fd: &OwnedFd) {
        let _ = self.bell_out.ring();
        if self.socket_bell {
            // Best effort: a full socket is readable already.
            let _ = send(
                fd,
                &Frame::new().finish(),
                SendFlags::DONTWAIT | SendFlags::NOSIGNAL,
            );
        }
    }
}
