//! How a call reaches the CM: applied to the embedded core at once, or
//! queued for the daemon and sent at once or in a batch
//! ([`Cm::set_autoflush`], [`Cm::set_batch_limit`]), or sent with a reply
//! awaited (after a short spin, [`Cm::set_spin`]).

use cm_core::{CongestionManager, FlowId, Instant};
use cm_ipc::{ToClient, ToDaemon};

use super::Cm;
use crate::backend::Backend;
use crate::backend::embedded::Embedded;
use crate::error::CmError;

impl Cm {
    /// A fire-and-forget call on `flow` (the application's id):
    /// `embedded` applies it to the in-process core at `now` with the
    /// core's id of the flow, or `wire` makes its message for the daemon
    /// with the daemon's id; then it is sent per the batching rules
    /// ([`Cm::after_call`]). If the daemon is found gone, the handle moves
    /// to an embedded CM (`failover`) and the call is applied there.
    pub(super) fn fire(
        &mut self,
        flow: FlowId,
        embedded: impl FnOnce(&mut CongestionManager, Instant, FlowId) -> Result<(), cm_core::Error>,
        wire: impl FnOnce(FlowId) -> ToDaemon,
    ) -> Result<(), CmError> {
        let id = self.bid(flow);
        let pushed = match &mut self.backend {
            Backend::Embedded(e) => {
                embedded(&mut e.core, cm_clock::now(), id)?;
                return self.after_call();
            }
            Backend::Daemon(d) => d.push(&wire(id)),
        };
        match pushed.and_then(|()| self.after_call()) {
            Err(e) if self.should_fail_over(&e) => {
                self.fail_over()?;
                let id = self.bid(flow);
                if let Backend::Embedded(e) = &mut self.backend {
                    embedded(&mut e.core, cm_clock::now(), id)?;
                }
                self.after_call()
            }
            r => r,
        }
    }

    /// A call with an answer on `flow` (the application's id, `None` for
    /// `open`): `embedded` asks the in-process core, or `wire` makes the
    /// daemon's message (with the `seq` its reply echoes) and `reply` reads
    /// the answer; any other reply is `unexpected`. If the daemon is found
    /// gone, the handle moves to an embedded CM and asks it.
    pub(super) fn ask<T>(
        &mut self,
        flow: Option<FlowId>,
        embedded: impl FnOnce(&mut Embedded, FlowId) -> Result<T, cm_core::Error>,
        wire: impl FnOnce(u32, FlowId) -> ToDaemon,
        reply: impl FnOnce(ToClient) -> Option<T>,
        unexpected: &'static str,
    ) -> Result<T, CmError> {
        let id = flow.map_or(FlowId::from_u64(0), |f| self.bid(f));
        let answer = match &mut self.backend {
            Backend::Embedded(e) => return Ok(embedded(e, id)?),
            Backend::Daemon(d) => d.call(|seq| wire(seq, id)),
        };
        match answer {
            Ok(m) => reply(m).ok_or(CmError::Invalid(unexpected)),
            Err(e) if self.should_fail_over(&e) => {
                self.fail_over()?;
                let id = flow.map_or(FlowId::from_u64(0), |f| self.bid(f));
                match &mut self.backend {
                    Backend::Embedded(e) => Ok(embedded(e, id)?),
                    Backend::Daemon(_) => Err(CmError::Disconnected),
                }
            }
            Err(e) => Err(e),
        }
    }

    /// After a fire-and-forget call: send it now unless calls are being
    /// batched (inside a dispatch, or with autoflush off).
    pub(crate) fn after_call(&mut self) -> Result<(), CmError> {
        match &mut self.backend {
            Backend::Daemon(d) if self.autoflush && !self.dispatching => d.flush(),
            // Batching: send once enough calls have gathered.
            Backend::Daemon(d) if d.batch_full(self.batch_limit) => d.flush(),
            Backend::Daemon(_) => Ok(()),
            Backend::Embedded(e) => {
                e.pump(&mut self.events, &self.fo.to_app);
                if !self.dispatching {
                    e.rearm(!self.events.is_empty())?;
                }
                Ok(())
            }
        }
    }

    /// Run `f` with flushing deferred, then flush once.
    pub(super) fn batched<T>(
        &mut self,
        f: impl FnOnce(&mut Cm) -> Result<T, CmError>,
    ) -> Result<T, CmError> {
        let was = self.autoflush;
        self.autoflush = false;
        let r = f(self);
        self.autoflush = was;
        let flushed = self.after_call();
        let v = r?;
        flushed?;
        Ok(v)
    }

    /// Daemon mode: with `false`, calls are gathered and sent to the daemon
    /// together once [`Cm::set_batch_limit`] of them wait, or when the
    /// application calls [`Cm::flush`], [`Cm::next_timeout`], [`Cm::wait`],
    /// [`Cm::pollable_fd`] or any call that returns a value. An
    /// application that sleeps on its own must call one of those first.
    /// With `true` (the default) every call outside a dispatch is sent at
    /// once, and calls made from callbacks go out at the end of the
    /// dispatch. Embedded mode has nothing to batch.
    pub fn set_autoflush(&mut self, on: bool) {
        self.autoflush = on;
    }

    /// How many calls may wait in a batch (with autoflush off) before they
    /// are sent (default 32; at least 1). A batch of fire-and-forget calls
    /// only (`notify`, `update`, ...) may grow 8 times larger before it is
    /// sent on its own, since the daemon answers none of them: it goes with
    /// the next request or call with a reply, or when the application is
    /// about to sleep, in the order the calls were made.
    pub fn set_batch_limit(&mut self, calls: usize) {
        self.batch_limit = calls.max(1);
    }

    /// Daemon mode: how long, before sleeping, libcm polls the daemon
    /// connection for the answer to calls it just sent (a grant for a
    /// request, a reply), yielding the CPU between polls: in
    /// [`Cm::next_timeout`] (which then returns zero if the answer came),
    /// [`Cm::wait`], and calls that wait for a reply. It spins at most once
    /// per batch sent, so at most this long per sleep, and adaptively: the
    /// spin doubles (up to this) while answers come within it and halves
    /// (down to 10 µs) while they come later or not at all, e.g. when the
    /// window is full. A thread that keeps polling is not put to sleep and
    /// woken again, which costs ~50 µs across CPUs (cm-ipc "Waiting: spin,
    /// then block"). Default 500 µs; zero never spins. Embedded mode never
    /// waits for an answer.
    pub fn set_spin(&mut self, spin: std::time::Duration) {
        if let Backend::Daemon(d) = &mut self.backend {
            d.set_spin(spin);
        }
    }

    /// Daemon mode: the longest a call waits for the daemon's reply
    /// (`open`, `mtu`, `query`, the macroflow calls, bulk queries, `stat`)
    /// before it fails with [`CmError::Timeout`] (`-ETIMEDOUT` in C).
    /// Default 5 s ([`DEFAULT_REPLY_TIMEOUT`](crate::DEFAULT_REPLY_TIMEOUT));
    /// a daemon that answers at all answers within milliseconds, so the
    /// limit only matters when it is stopped or hung. Zero is refused.
    pub fn set_reply_timeout(&mut self, timeout: std::time::Duration) -> Result<(), CmError> {
        if timeout.is_zero() {
            return Err(CmError::Invalid("a reply timeout of zero"));
        }
        if let Backend::Daemon(d) = &mut self.backend {
            d.reply_timeout = timeout;
        }
        Ok(())
    }

    /// Send batched calls to the daemon now (no-op in embedded mode).
    pub fn flush(&mut self) -> Result<(), CmError> {
        match &mut self.backend {
            Backend::Daemon(d) => d.flush(),
            Backend::Embedded(_) => Ok(()),
        }
    }
}
