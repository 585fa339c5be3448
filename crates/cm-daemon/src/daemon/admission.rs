//! Admitting a new client: the client-count limits (`max_clients`,
//! `max_clients_per_user`) and the memory budget (`max_memory_mib`, see
//! `memory.rs`). A refused client is told which limit it met, in the same
//! `Refused` message that names a flow limit, before its connection is
//! closed; libcm returns it from `Cm::connect` as `CmError::Refused`
//! (`-EMFILE` in C). Nobody else is affected.

use std::os::fd::OwnedFd;

use cm_ipc::Frame;
use rustix::net::{SendFlags, send};

use super::Daemon;
use super::flows::limit;

impl Daemon {
    /// Whether a new client of user `uid` may connect; if not, the limit
    /// it met and the limit's value.
    pub(super) fn admit(&self, uid: u32) -> Result<(), (&'static str, usize)> {
        if self.sessions.len() >= self.cfg.max_clients {
            return Err(("max_clients", self.cfg.max_clients));
        }
        let of_user = self.sessions.values().filter(|s| s.uid == uid).count();
        if of_user >= self.cfg.max_clients_per_user {
            return Err(("max_clients_per_user", self.cfg.max_clients_per_user));
        }
        if self.budget.over {
            let mib = usize::try_from(self.cfg.max_memory_mib).unwrap_or(usize::MAX);
            return Err(("max_memory_mib", mib));
        }
        Ok(())
    }
}

/// Tell a refused client which limit it met, on a connection about to be
/// closed: one `Refused` frame, without waiting (the connection is new, so
/// its send buffer is empty).
pub(super) fn tell_refused(fd: &OwnedFd, name: &str, value: usize) {
    let mut f = Frame::new();
    f.push(&limit(0, 0, name, value));
    let _ = send(fd, &f.finish(), SendFlags::DONTWAIT | SendFlags::NOSIGNAL);
}
