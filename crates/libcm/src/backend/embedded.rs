//! Embedded mode: the congestion manager runs inside this process, on the
//! real clock (`cm-clock`), with no daemon. Calls are direct
//! function calls into `cm-core`; the only system calls are for the
//! optional pollable descriptor.

use std::collections::VecDeque;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use cm_core::idhash::IdMap;
use cm_core::{ClientId, Config, CongestionManager, FlowId, Instant};
use rustix::time::{
    Itimerspec, TimerfdClockId, TimerfdFlags, TimerfdTimerFlags, Timespec, timerfd_create,
    timerfd_settime,
};

use crate::error::CmError;
use crate::event::CmEvent;

/// An in-process CM with one client (this program).
pub(crate) struct Embedded {
    pub(crate) core: CongestionManager,
    pub(crate) client: ClientId,
    /// A timerfd that is readable when `dispatch` has work (created on the
    /// first request for a pollable descriptor).
    timer: Option<OwnedFd>,
    /// The deadline the timerfd is armed for.
    armed: Option<Instant>,
    /// A deadline of libcm's own (a reconnection attempt while standing in
    /// for the daemon, `cm::failover`): waits and the descriptor wake for
    /// it as for the core's timers.
    pub(crate) wake_at: Option<Instant>,
}

impl Embedded {
    pub(crate) fn new(mut cfg: Config) -> Result<Self, CmError> {
        // One in-process client that cannot vanish without the CM.
        cfg.client_timeout = None;
        let mut core = CongestionManager::new(cfg)
            .map_err(|_| CmError::Invalid("invalid CM configuration"))?;
        let client = core.register_client(cm_clock::now())?;
        Ok(Embedded {
            core,
            client,
            timer: None,
            armed: None,
            wake_at: None,
        })
    }

    /// Service due timers and move the core's events to `out`.
    /// (`to_app` maps the core's flow ids to the application's, after a
    /// move; see `cm::failover`.)
    pub(crate) fn pump(&mut self, out: &mut VecDeque<CmEvent>, to_app: &IdMap<FlowId, FlowId>) {
        if let Some(t) = self.core.poll_timeout() {
            let now = cm_clock::now();
            if t <= now {
                self.core.handle_timeout(now);
            }
        }
        while let Some(ev) = self.core.poll_event() {
            if let Some(ev) = CmEvent::from_core(ev) {
                out.push_back(ev.to_app(to_app));
            }
        }
    }

    /// The next core timer or libcm's own deadline, whichever is first.
    pub(crate) fn next_deadline(&mut self) -> Option<Instant> {
        match (self.core.poll_timeout(), self.wake_at) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Sleep until the next deadline or `timeout`, whichever is first.
    pub(crate) fn wait(&mut self, timeout: Option<std::time::Duration>) {
        let until_timer = self.next_deadline().map(cm_clock::until);
        let d = match (until_timer, timeout) {
            (Some(a), Some(b)) => a.min(b),
            (Some(a), None) => a,
            (None, Some(b)) => b,
            // Nothing can happen without a call from this program.
            (None, None) => return,
        };
        if !d.is_zero() {
            std::thread::sleep(d);
        }
    }

    /// The pollable descriptor, created on first use.
    pub(crate) fn fd(&mut self) -> Result<BorrowedFd<'_>, CmError> {
        if self.timer.is_none() {
            let fd = timerfd_create(
                TimerfdClockId::Monotonic,
                TimerfdFlags::CLOEXEC | TimerfdFlags::NONBLOCK,
            )?;
            self.timer = Some(fd);
            self.armed = None;
        }
        match &self.timer {
            Some(fd) => Ok(fd.as_fd()),
            None => Err(CmError::Invalid("no timer")),
        }
    }

    /// Keep the descriptor's readiness in step with the core: readable at
    /// once when events wait, else at the next timer. Costs a system call
    /// only when the deadline changes and only once a descriptor exists.
    pub(crate) fn rearm(&mut self, events_waiting: bool) -> Result<(), CmError> {
        if self.timer.is_none() {
            return Ok(());
        }
        let want = if events_waiting {
            Some(Instant::ZERO)
        } else {
            self.next_deadline()
        };
        let Some(fd) = &self.timer else {
            return Ok(());
        };
        if want == self.armed {
            return Ok(());
        }
        // Drain a past expiry so the descriptor reads as not-ready.
        let mut buf = [0u8; 8];
        let _ = rustix::io::read(fd, &mut buf);
        let value = match want {
            None => Timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            Some(t) => {
                let d = cm_clock::until(t).max(std::time::Duration::from_nanos(1));
                Timespec {
                    tv_sec: i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
                    tv_nsec: i64::from(d.subsec_nanos()),
                }
            }
        };
        let spec = Itimerspec {
            it_interval: Timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: value,
        };
        timerfd_settime(fd, TimerfdTimerFlags::empty(), &spec)?;
        self.armed = want;
        Ok(())
    }

    /// Clear the descriptor's readiness (after a dispatch consumed it).
    pub(crate) fn ack_fd(&mut self) {
        if let Some(fd) = &self.timer {
            let mut buf = [0u8; 8];
            if rustix::io::read(fd, &mut buf).is_ok() {
                self.armed = None;
            }
        }
    }
}
