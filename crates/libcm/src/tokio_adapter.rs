//! An async adapter (cm-implementation-linux §3.1's event-loop integration,
//! for tokio): await the next CM event instead of polling.
//!
//! ```no_run
//! # async fn f() -> Result<(), libcm::CmError> {
//! use libcm::{Cm, CmEvent, tokio_adapter::AsyncCm};
//! let mut cm = AsyncCm::new(Cm::new()?)?;
//! let flow = cm.get_mut().open(None, "127.0.0.1:9".parse().unwrap())?;
//! cm.get_mut().request(flow)?;
//! if let CmEvent::Send { flow, bytes } = cm.next_event().await? {
//!     cm.get_mut().notify(flow, bytes.get())?;
//! }
//! # Ok(()) }
//! ```

use std::os::fd::OwnedFd;

use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

use crate::{Cm, CmError, CmEvent};

/// A [`Cm`] whose events can be awaited on a tokio runtime (with I/O and
/// time drivers enabled).
pub struct AsyncCm {
    cm: Cm,
    fd: AsyncFd<OwnedFd>,
}

impl AsyncCm {
    /// Wrap a handle; its pollable descriptor is registered with tokio.
    pub fn new(mut cm: Cm) -> Result<Self, CmError> {
        // tokio registers its own duplicate of the descriptor, which it
        // owns, so the registration can never outlive the file.
        let dup = cm.pollable_fd()?.try_clone_to_owned()?;
        let fd = register(dup)?;
        Ok(AsyncCm { cm, fd })
    }

    /// The handle, for calls.
    pub fn get_mut(&mut self) -> &mut Cm {
        &mut self.cm
    }

    /// The next event, waiting for it without blocking the runtime.
    pub async fn next_event(&mut self) -> Result<CmEvent, CmError> {
        loop {
            if let Some(ev) = self.cm.poll_event()? {
                return Ok(ev);
            }
            self.cm.flush()?;
            // Re-arm the embedded timer for the next CM deadline.
            self.cm.pollable_fd()?;
            let mut guard = self.fd.readable().await?;
            guard.clear_ready();
            if let crate::backend::Backend::Embedded(e) = &mut self.cm.backend {
                e.ack_fd();
            }
        }
    }
}

#[allow(unsafe_code)]
fn register(fd: OwnedFd) -> std::io::Result<AsyncFd<OwnedFd>> {
    // SAFETY: `register_with_interest` requires the descriptor to stay open
    // while registered; the AsyncFd owns it (OwnedFd) and deregisters it
    // before closing it on drop.
    Ok(unsafe { AsyncFd::register_with_interest(fd, Interest::READABLE) }?)
}
