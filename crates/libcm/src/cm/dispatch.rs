//! Delivering events: polling, callbacks, waiting, libcm's own loop, the
//! pollable descriptor and SIGIO (cm-implementation-linux §2.2, §3.1).

use std::os::fd::{AsFd, AsRawFd, BorrowedFd};

use rustix::event::epoll;

use cm_core::FlowId;

use super::Cm;
use crate::backend::Backend;
use crate::error::CmError;
use crate::event::CmEvent;

impl Cm {
    /// Gather what the CM has for this handle without blocking; grants for
    /// buffered flows are served here and never surface.
    fn pump(&mut self) -> Result<(), CmError> {
        self.failover_tick()?;
        let r = match &mut self.backend {
            Backend::Embedded(e) => {
                e.pump(&mut self.events, &self.fo.to_app);
                Ok(())
            }
            Backend::Daemon(d) => d.pump(&mut self.events, &self.fo.to_app),
        };
        match r {
            Err(e) if self.should_fail_over(&e) => self.fail_over()?,
            r => r?,
        }
        // Serve every queued grant of a buffered flow, not only new ones: a
        // call's own pump (embedded `after_call`) may already have queued it.
        if !self.buffered.is_empty() && !self.events.is_empty() {
            self.serve_buffered()?;
        }
        Ok(())
    }

    /// The next event, if one is ready (never blocks).
    pub fn poll_event(&mut self) -> Result<Option<CmEvent>, CmError> {
        if self.events.is_empty() || !self.buffered.is_empty() {
            self.pump()?;
        }
        let ev = self.events.pop_front();
        if let Some(ev) = &ev {
            self.observe(ev);
        }
        Ok(ev)
    }

    /// The next ready event of `flow` (never blocks). Other flows' events
    /// stay queued in their order, for their own owners: several
    /// request/callback senders can share one `Cm` on one thread, each
    /// taking only its grants.
    pub fn poll_event_for(&mut self, flow: FlowId) -> Result<Option<CmEvent>, CmError> {
        if !self.events.iter().any(|e| e.flow() == Some(flow)) || !self.buffered.is_empty() {
            self.pump()?;
        }
        let Some(i) = self.events.iter().position(|e| e.flow() == Some(flow)) else {
            return Ok(None);
        };
        let ev = self.events.remove(i);
        if let Some(ev) = &ev {
            self.observe(ev);
        }
        Ok(ev)
    }

    /// Deliver every ready event to the registered callbacks (events with no
    /// callback stay for [`Cm::poll_event`]). Calls the callbacks make are
    /// batched and sent once at the end. Returns the number delivered.
    /// Never blocks.
    pub fn dispatch(&mut self) -> Result<usize, CmError> {
        let was = self.dispatching;
        self.dispatching = true;
        let r = self.dispatch_inner();
        self.dispatching = was;
        let flushed = if was { Ok(()) } else { self.after_dispatch() };
        let n = r?;
        flushed?;
        Ok(n)
    }

    fn dispatch_inner(&mut self) -> Result<usize, CmError> {
        let mut delivered = 0;
        let mut kept = std::collections::VecDeque::new();
        // Bounded: events raised by the callbacks themselves are delivered
        // by the next dispatch, so a callback that always re-requests cannot
        // spin here forever.
        self.pump()?;
        let mut budget = self.events.len();
        while budget > 0 {
            budget -= 1;
            let Some(ev) = self.events.pop_front() else {
                break;
            };
            self.observe(&ev);
            match ev {
                CmEvent::Send { flow, bytes } if self.on_send.is_some() => {
                    if let Some(mut cb) = self.on_send.take() {
                        cb(self, flow, bytes);
                        self.on_send.get_or_insert(cb);
                    }
                    delivered += 1;
                }
                CmEvent::Update { flow, estimate } if self.on_update.is_some() => {
                    if let Some(mut cb) = self.on_update.take() {
                        cb(self, flow, estimate);
                        self.on_update.get_or_insert(cb);
                    }
                    delivered += 1;
                }
                // A move has no callback: `status()` tells it. Kept, it
                // would make `next_timeout` report work for ever to an
                // application that only dispatches.
                CmEvent::Status { .. } => {}
                other => kept.push_back(other),
            }
        }
        // Events without a callback keep their order ahead of newer ones.
        while let Some(ev) = kept.pop_back() {
            self.events.push_front(ev);
        }
        Ok(delivered)
    }

    fn after_dispatch(&mut self) -> Result<(), CmError> {
        match &mut self.backend {
            Backend::Daemon(d) if self.autoflush || d.batch_full(self.batch_limit) => d.flush(),
            Backend::Daemon(_) => Ok(()),
            Backend::Embedded(e) => {
                e.ack_fd();
                e.pump(&mut self.events, &self.fo.to_app);
                e.rearm(!self.events.is_empty())
            }
        }
    }

    /// Block until an event may be ready or `timeout` passes (`None`: no
    /// limit in daemon mode; in embedded mode, until the next CM timer).
    /// Batched calls are sent first.
    pub fn wait(&mut self, timeout: Option<std::time::Duration>) -> Result<(), CmError> {
        if !self.events.is_empty() {
            return Ok(());
        }
        match &mut self.backend {
            Backend::Daemon(d) => {
                if d.has_inbox() {
                    return Ok(());
                }
                match d.block(timeout) {
                    Err(e) if self.should_fail_over(&e) => self.fail_over(),
                    r => r,
                }
            }
            Backend::Embedded(e) => {
                e.pump(&mut self.events, &self.fo.to_app);
                if self.events.is_empty() {
                    e.wait(timeout);
                }
                Ok(())
            }
        }
    }

    /// How long the application may sleep before it must call
    /// [`Cm::dispatch`] again, for loops that wait on their own descriptors
    /// (quinn-style `poll_timeout`): zero when events are ready, the time to
    /// the CM's next timer in embedded mode, and `None` (wait on
    /// [`Cm::pollable_fd`]) in daemon mode. In daemon mode it also sends
    /// batched calls and, with shared rings, arms the doorbell (one
    /// `eventfd` read), so call it right before sleeping.
    pub fn next_timeout(&mut self) -> Option<std::time::Duration> {
        if !self.events.is_empty() {
            return Some(std::time::Duration::ZERO);
        }
        match &mut self.backend {
            Backend::Embedded(e) => {
                e.pump(&mut self.events, &self.fo.to_app);
                if !self.events.is_empty() {
                    return Some(std::time::Duration::ZERO);
                }
                e.next_deadline().map(cm_clock::until)
            }
            Backend::Daemon(d) => {
                // The caller is about to sleep: batched calls must go now.
                // An answer is expected: poll for it briefly rather than let
                // the application sleep and be woken for it.
                if d.flush().is_err() || d.spin_for_answer().is_err() {
                    return Some(std::time::Duration::ZERO);
                }
                // The answer came: the application dispatches next, not
                // sleeps, so the doorbell is left alone (silencing it, and
                // ringing it for the events already read and reading that
                // ring back, were three system calls per answer).
                if d.has_inbox() {
                    return Some(std::time::Duration::ZERO);
                }
                // With rings: look (memory only), then silence and arm the
                // doorbell the application will sleep on.
                if d.has_rings() && (d.drain().is_err() || d.prepare_poll().is_err()) {
                    return Some(std::time::Duration::ZERO);
                }
                d.has_inbox().then_some(std::time::Duration::ZERO)
            }
        }
    }

    /// libcm's own event loop (cm-implementation-linux §3.1, item 2):
    /// dispatch to the callbacks and wait, until `done` says stop.
    pub fn run_until(&mut self, mut done: impl FnMut(&mut Cm) -> bool) -> Result<(), CmError> {
        loop {
            self.dispatch()?;
            if done(self) {
                return Ok(());
            }
            self.wait(Some(std::time::Duration::from_millis(100)))?;
        }
    }

    /// A descriptor for the application's select/poll/epoll set: readable
    /// when [`Cm::dispatch`] has work (cm-implementation-linux §2.2, the
    /// control socket). Daemon mode: an epoll set of the shared rings'
    /// doorbell and the control socket (the socket alone with
    /// [`crate::Transport::Socket`]); embedded mode: a timerfd kept armed
    /// for the CM's next event.
    ///
    /// Taken once and kept in the application's set, it is readable while
    /// something waits and quiet once [`Cm::dispatch`] took it (at most one
    /// spurious wake-up for a doorbell ring that was on its way). Two cases
    /// need a call before the application sleeps, for which calling this
    /// again (or [`Cm::next_timeout`], or [`Cm::flush`] for the first) is
    /// enough: calls batched with autoflush off must be sent, and over
    /// [`crate::Transport::Socket`] events read off the socket while a call
    /// waited for its reply sit in libcm with the socket quiet.
    ///
    /// The descriptor is libcm's own epoll set around the CM's (the
    /// daemon's doorbell and socket, or the embedded CM's timer), so it
    /// stays the same when a daemon-mode handle moves to an embedded CM
    /// and back (`failover`); a daemon that hung up is no longer in it.
    pub fn pollable_fd(&mut self) -> Result<BorrowedFd<'_>, CmError> {
        if let Backend::Embedded(e) = &mut self.backend {
            e.fd()?;
            e.pump(&mut self.events, &self.fo.to_app);
            e.rearm(!self.events.is_empty())?;
        }
        let prepared = match &mut self.backend {
            Backend::Daemon(d) => d
                .flush()
                // Arms the doorbell the descriptor watches (or rings it if
                // frames already wait).
                .and_then(|()| d.prepare_poll()),
            Backend::Embedded(_) => Ok(()),
        };
        match prepared {
            Err(e) if self.should_fail_over(&e) => {
                self.fail_over()?;
                if let Backend::Embedded(e) = &mut self.backend {
                    e.fd()?;
                    e.rearm(true)?;
                }
            }
            r => r?,
        }
        if self.outer.is_none() {
            self.outer = Some(epoll::create(epoll::CreateFlags::CLOEXEC)?);
            self.watch_backend()?;
        }
        match &self.outer {
            Some(fd) => Ok(fd.as_fd()),
            None => Err(CmError::Invalid("no descriptor")),
        }
    }

    /// Put the CM's own descriptor in the application's epoll set (after
    /// the set is made, and after each move).
    pub(super) fn watch_backend(&mut self) -> Result<(), CmError> {
        let Some(outer) = &self.outer else {
            return Ok(());
        };
        let inner = match &mut self.backend {
            Backend::Daemon(d) => d.fd()?,
            Backend::Embedded(e) => e.fd()?,
        };
        match epoll::add(
            outer,
            inner,
            epoll::EventData::new_u64(0),
            epoll::EventFlags::IN,
        ) {
            Ok(()) | Err(rustix::io::Errno::EXIST) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Ask for SIGIO when the CM has something for this process
    /// (cm-implementation-linux §2.2.1: "an option for processes to receive
    /// a SIGIO when their control socket status changes"). The application
    /// installs the handler and calls [`Cm::dispatch`] after it runs.
    pub fn enable_sigio(&mut self) -> Result<(), CmError> {
        if let Backend::Daemon(d) = &mut self.backend {
            if d.has_rings() {
                // An eventfd cannot raise SIGIO: the daemon also nudges the
                // socket, which can.
                sigio::enable(d.socket().as_raw_fd())?;
                d.push(&cm_ipc::ToDaemon::SocketDoorbell { on: true })?;
                d.flush()?;
                d.set_socket_bell();
                return Ok(());
            }
            // O_ASYNC on the socket itself (libcm's epoll set around it
            // cannot raise SIGIO).
            return sigio::enable(d.socket().as_raw_fd());
        }
        let Backend::Embedded(e) = &mut self.backend else {
            return Ok(());
        };
        let fd = e.fd()?.as_raw_fd();
        sigio::enable(fd)
    }
}

#[allow(unsafe_code)]
mod sigio {
    //! `fcntl(F_SETOWN)` and `O_ASYNC`: neither rustix nor std wraps them.

    use crate::error::CmError;

    pub(super) fn enable(fd: i32) -> Result<(), CmError> {
        // SAFETY: fcntl on a descriptor this process owns (borrowed from the
        // Cm for the duration of the call) with integer arguments only.
        unsafe {
            if libc::fcntl(fd, libc::F_SETOWN, libc::getpid()) < 0 {
                return Err(std::io::Error::last_os_error().into());
            }
            let fl = libc::fcntl(fd, libc::F_GETFL);
            if fl < 0 || libc::fcntl(fd, libc::F_SETFL, fl | libc::O_ASYNC) < 0 {
                return Err(std::io::Error::last_os_error().into());
            }
        }
        Ok(())
    }
}
