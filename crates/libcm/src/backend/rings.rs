//! The client's end of the shared-memory rings to the daemon (cm_ipc::shm):
//! frames out through one ring, frames in through the other, the daemon
//! rung only when it sleeps, and the client's doorbell left armed whenever
//! libcm hands control back to the application, so the descriptor it polls
//! becomes readable for the next frame.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::time::{Duration, Instant};

use cm_ipc::shm::{Doorbell, Region, RingError, Side};
use rustix::event::{PollFd, PollFlags, Timespec, epoll, poll};

use crate::error::CmError;

/// How long a full outgoing ring may stay full before the daemon is
/// declared stuck.
const FULL_RING_PATIENCE: Duration = Duration::from_secs(10);

/// The client's end of attached rings.
pub(crate) struct Rings {
    pub(crate) region: Region,
    bell_daemon: Doorbell,
    pub(crate) bell_me: Doorbell,
    /// The client's doorbell and the control socket in one descriptor, for the
    /// application's poll set (made on first use).
    poll_set: Option<OwnedFd>,
    /// SIGIO mode: the daemon also nudges the socket.
    pub(crate) socket_bell: bool,
    /// A frame copied out of the ring.
    buf: Vec<u8>,
    /// Doorbells rung to wake the daemon (for benchmarks).
    pub(crate) rang: u64,
    /// The daemon was asked to ring the client's doorbell before: from then
    /// on a request found not standing at the next arm was taken, and rung.
    armed: bool,
    /// Rings of the client's doorbell due and not yet read from it: one per
    /// request the daemon took, one per ring of libcm's own. Reading them as
    /// frames are taken keeps the descriptor readable only while something
    /// may wait, even for an application that polls it without calling
    /// `Cm::pollable_fd` before each sleep.
    owed: u64,
}

fn ring_err(e: RingError) -> CmError {
    CmError::Io(std::io::Error::other(e))
}

impl Rings {
    /// The rings from the descriptors that came with `Attached`: region,
    /// the daemon's doorbell, the client's doorbell.
    pub(crate) fn from_fds(fds: Vec<OwnedFd>) -> Result<Rings, CmError> {
        let mut it = fds.into_iter();
        let (Some(region), Some(daemon), Some(me)) = (it.next(), it.next(), it.next()) else {
            return Err(CmError::Invalid("Attached without its three descriptors"));
        };
        let region = Region::open(region, Side::Client).map_err(ring_err)?;
        Ok(Rings {
            region,
            bell_daemon: Doorbell::from_fd(daemon),
            bell_me: Doorbell::from_fd(me),
            poll_set: None,
            socket_bell: false,
            buf: Vec::with_capacity(cm_ipc::MAX_FRAME),
            rang: 0,
            armed: false,
            owed: 0,
        })
    }

    /// Publish one frame, ringing the daemon only if it sleeps. A full ring
    /// (the daemon is behind) waits for room, watching the socket for the
    /// daemon's death.
    pub(crate) fn send(&mut self, frame: &[u8], sock: BorrowedFd<'_>) -> Result<(), CmError> {
        let mut since: Option<Instant> = None;
        loop {
            if self.region.push(frame).map_err(ring_err)? {
                if self.region.take_peer_wake() {
                    self.bell_daemon.ring()?;
                    self.rang += 1;
                }
                return Ok(());
            }
            // Full: make sure the daemon is consuming, then give it time.
            self.bell_daemon.ring()?;
            let t0 = *since.get_or_insert_with(Instant::now);
            if t0.elapsed() > FULL_RING_PATIENCE {
                return Err(CmError::Disconnected);
            }
            wait_socket(sock, Duration::from_micros(200))?;
        }
    }

    /// Take every frame the daemon published, passing each to `frame`, and
    /// leave the ring armed (empty, doorbell requested). Returns how many.
    /// The doorbell is not silenced here (that is a system call): only
    /// before a sleep, by [`Rings::prepare_poll`].
    pub(crate) fn drain(
        &mut self,
        mut frame: impl FnMut(&[u8]) -> Result<(), CmError>,
    ) -> Result<u64, CmError> {
        let mut n = 0;
        loop {
            while self.region.pop(&mut self.buf).map_err(ring_err)? {
                n += 1;
                frame(&self.buf)?;
            }
            if self.arm() {
                break;
            }
        }
        if n > 0 && self.region.take_peer_space() {
            self.bell_daemon.ring()?;
            self.rang += 1;
        }
        self.collect_rings();
        Ok(n)
    }

    /// Make the client's descriptor readable now: events were read off the ring
    /// while waiting for a reply and wait in the inbox for a dispatch.
    pub(crate) fn ring_self(&mut self) -> Result<(), CmError> {
        self.bell_me.ring()?;
        self.owed += 1;
        Ok(())
    }

    /// Ask the daemon to ring for its next frame (see `Region::arm`),
    /// counting the ring owed if it took the previous request. Returns
    /// whether the ring is empty.
    fn arm(&mut self) -> bool {
        let (empty, standing) = self.region.arm_counted();
        if self.armed && !standing {
            self.owed += 1;
        }
        self.armed = true;
        empty
    }

    /// Read the rings owed from the client's doorbell, if any (a system call
    /// only then: while the daemon has not rung, polling the rings costs
    /// none).
    /// A ring still on its way stays owed and is read by a later call; until
    /// then it makes the descriptor readable once, spuriously.
    fn collect_rings(&mut self) {
        if self.owed > 0 {
            let t = self.bell_me.take();
            self.owed = self.owed.saturating_sub(t);
        }
    }

    /// The client is about to wait for the daemon by polling and yielding
    /// its CPU (`DaemonConn::spin_for_answer`): say which CPU, so a daemon
    /// that follows its clients (cm-daemon's `follow.rs`) can run here and
    /// take the CPU the client yields. vDSO getcpu, no system call.
    pub(crate) fn waiting_here(&mut self) {
        let cpu = u32::try_from(rustix::thread::sched_getcpu()).unwrap_or(u32::MAX - 1);
        self.region.note_cpu(cpu);
    }

    /// About to sleep on the client's doorbell (or the poll set holding it):
    /// silence it, then ask the daemon to ring for its next frame, and ring
    /// it from here if a frame already waits in the ring or `unread` (read
    /// but not yet dispatched). Every sleep is preceded by this, so the
    /// descriptor is readable exactly when something may wait: a ring that
    /// was on its way when it was silenced costs one spurious wake-up, and no
    /// frame is ever slept on. Reads no frame.
    pub(crate) fn prepare_poll(&mut self, unread: bool) -> Result<(), CmError> {
        // Silence it, owed or not (a ring nothing accounts for, e.g. one a
        // hostile daemon sends, must not keep a sleeper awake).
        self.owed = self.owed.saturating_sub(self.bell_me.take());
        if !self.arm() || unread {
            self.bell_me.ring()?;
            self.owed += 1;
        }
        Ok(())
    }

    /// One descriptor readable when the daemon rang or hung up: an epoll set
    /// of the client's doorbell and the control socket.
    pub(crate) fn poll_set(&mut self, sock: BorrowedFd<'_>) -> Result<BorrowedFd<'_>, CmError> {
        if self.poll_set.is_none() {
            let ep = epoll::create(epoll::CreateFlags::CLOEXEC)?;
            epoll::add(
                &ep,
                &self.bell_me,
                epoll::EventData::new_u64(0),
                epoll::EventFlags::IN,
            )?;
            epoll::add(
                &ep,
                sock,
                epoll::EventData::new_u64(1),
                epoll::EventFlags::IN,
            )?;
            self.poll_set = Some(ep);
        }
        match &self.poll_set {
            Some(fd) => Ok(fd.as_fd()),
            None => Err(CmError::Invalid("no poll set")),
        }
    }
}

/// Wait up to `d` for the socket to become readable (or hang up).
fn wait_socket(sock: BorrowedFd<'_>, d: Duration) -> Result<(), CmError> {
    let ts = Timespec {
        tv_sec: 0,
        tv_nsec: i64::from(d.subsec_nanos()),
    };
    let mut p = [PollFd::new(&sock, PollFlags::IN)];
    match poll(&mut p, Some(&ts)) {
        Ok(_) | Err(rustix::io::Errno::INTR) => {}
        Err(e) => return Err(e.into()),
    }
    if p[0].revents().intersects(PollFlags::HUP | PollFlags::ERR) {
        return Err(CmError::Disconnected);
    }
    Ok(())
}
