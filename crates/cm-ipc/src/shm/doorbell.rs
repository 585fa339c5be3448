//! A doorbell: an `eventfd` that one side sleeps on and the other rings,
//! only when the sleeper asked (see "Doorbells" in [`crate::shm`]).

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use rustix::event::{EventfdFlags, eventfd};
use rustix::io::Errno;

/// An `eventfd` used as a wake-up signal (readable once rung).
#[derive(Debug)]
pub struct Doorbell(OwnedFd);

impl Doorbell {
    /// A new, silent doorbell (non-blocking, close-on-exec).
    pub fn new() -> std::io::Result<Doorbell> {
        Ok(Doorbell(eventfd(
            0,
            EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK,
        )?))
    }

    /// A doorbell received from the peer.
    pub fn from_fd(fd: OwnedFd) -> Doorbell {
        Doorbell(fd)
    }

    /// Ring it (a counter that is already near its maximum stays rung).
    pub fn ring(&self) -> std::io::Result<()> {
        match rustix::io::write(&self.0, &1u64.to_ne_bytes()) {
            Ok(_) | Err(Errno::AGAIN) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Silence it; returns whether it had been rung.
    pub fn clear(&self) -> bool {
        self.take() > 0
    }

    /// Silence it; returns how many rings it had (an eventfd counts them).
    pub fn take(&self) -> u64 {
        let mut b = [0u8; 8];
        match rustix::io::read(&self.0, &mut b) {
            Ok(8) => u64::from_ne_bytes(b),
            _ => 0,
        }
    }
}

impl AsFd for Doorbell {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.0.as_fd()
    }
}
