//! The loop's side of the clients' shared-memory rings (`cm_ipc::shm`):
//! attaching a client, reading the frames in its ring, arming every ring's
//! doorbell before the loop sleeps, and following the busiest client's CPU.
//!
//! A busy client's frames are read by polling ring memory after every
//! wait, spinning or not, so a client whose daemon is awake never rings.
//! Only when the loop is about to block does it ask each client to ring
//! (`need_wake`), and it checks every ring once more after asking, so a
//! frame published meanwhile is read rather than slept on.

use std::os::fd::AsFd;

use cm_ipc::shm;
use cm_ipc::{ErrorCode, Frame, ToClient};
use rustix::event::epoll;

use super::{Daemon, RING_BIT};
use crate::client_rings::ClientRings;
use crate::log;
use crate::session::FlushResult;

/// Frames read from one client's ring per loop turn (fairness).
const RING_FRAMES_PER_TURN: usize = 64;

impl Daemon {
    /// `Attach`: create the client's region and doorbells and hand them over
    /// on its socket. Output queued so far goes out on the socket first;
    /// every later frame goes through the rings.
    pub(super) fn attach(&mut self, token: u64, seq: u32) {
        // Refused when not offered, or attached already.
        if !self.cfg.shared_memory || self.sessions.get(&token).is_some_and(|s| s.rings.is_some()) {
            self.error(token, seq, 0, ErrorCode::InvalidArgument);
            return;
        }
        let rings = match ClientRings::create() {
            Ok(l) => l,
            Err(e) => {
                log!(warn, "msg=\"cannot create a shared ring\" error=\"{e}\"");
                self.error(token, seq, 0, ErrorCode::LimitReached);
                return;
            }
        };
        let Some(s) = self.sessions.get_mut(&token) else {
            return;
        };
        // Replies queued before this one (Welcome) keep their order.
        if s.flush() != FlushResult::Done {
            self.drop_session(token, "not reading its socket");
            return;
        }
        let mut f = Frame::new();
        f.push(&ToClient::Attached {
            seq,
            ring_bytes: rings.region.ring_bytes(),
        });
        let fds = [
            rings.region.fd(),
            rings.bell_in.as_fd(),
            rings.bell_out.as_fd(),
        ];
        if let Err(e) = shm::send_with_fds(s.fd.as_fd(), &f.finish(), &fds) {
            self.drop_session(token, &format!("cannot pass the shared ring: {e}"));
            return;
        }
        if epoll::add(
            &self.epoll,
            &rings.bell_in,
            epoll::EventData::new_u64(token | RING_BIT),
            epoll::EventFlags::IN,
        )
        .is_err()
        {
            self.drop_session(token, "epoll refused the doorbell");
            return;
        }
        s.rings = Some(rings);
    }

    /// Read up to a turn's worth of frames from a client's ring, handled at
    /// `now` (the turn's time). Returns whether any came. A ring the client
    /// broke ends its session.
    pub(super) fn read_ring(&mut self, token: u64, now: cm_core::Instant) -> bool {
        let mut got = false;
        for _ in 0..RING_FRAMES_PER_TURN {
            let Some(l) = self.sessions.get_mut(&token).and_then(|s| s.rings.as_mut()) else {
                return got;
            };
            let mut buf = std::mem::take(&mut self.ring_buf);
            let r = l.region.pop(&mut buf);
            match r {
                Ok(true) => {
                    got = true;
                    l.frames += 1;
                    self.handle_frame(token, &buf, now);
                    self.ring_buf = buf;
                }
                Ok(false) => {
                    self.ring_buf = buf;
                    break;
                }
                Err(e) => {
                    self.ring_buf = buf;
                    self.drop_session(token, &format!("{e}"));
                    return got;
                }
            }
        }
        // The client may be waiting for room to publish more.
        if let Some(s) = self.sessions.get(&token) {
            if let Some(l) = &s.rings {
                if got && l.region.take_peer_space() {
                    l.ring_client(&s.fd);
                }
            }
        }
        got
    }

    /// Read every ring with frames waiting (memory reads only, no system
    /// call). Returns whether any had some.
    pub(super) fn read_rings(&mut self, now: cm_core::Instant) -> bool {
        let mut tokens = std::mem::take(&mut self.ring_tokens);
        tokens.clear();
        tokens.extend(
            self.sessions
                .iter()
                .filter(|(_, s)| s.rings.as_ref().is_some_and(|l| l.region.pending()))
                .map(|(&t, _)| t),
        );
        if tokens.is_empty() {
            self.ring_tokens = tokens;
            return false;
        }
        // The turn's one clock reading, taken after its wait, for all its
        // frames: reading the clock per frame was 6% of the daemon's CPU
        // under the API benchmark (two frames per packet).
        let mut got = false;
        for &t in &tokens {
            got |= self.read_ring(t, now);
        }
        self.ring_tokens = tokens;
        got
    }

    /// Every loop turn (`polled`: its wait did not sleep): let go if
    /// starved; every [`crate::follow::PERIOD`], move next to the client
    /// that published the most frames among those that say where they wait
    /// (`follow.rs`) and count again.
    pub(super) fn follow_busiest(&mut self, polled: bool, now: std::time::Instant) {
        let Some(f) = &mut self.follow else {
            return;
        };
        if !f.turn(now, polled) {
            self.follow = None;
            return;
        }
        if !f.due(now) {
            return;
        }
        // Among the clients that waited by polling and yielding in this
        // period (the CPU hint is taken each period): a busier one that did
        // not (it sleeps, or never waits) has no CPU to hand over and must
        // not hide one that did.
        let mut best: (u64, Option<u32>) = (0, None);
        for s in self.sessions.values_mut() {
            if let Some(l) = &mut s.rings {
                if let Some(cpu) = l.region.take_client_cpu() {
                    if l.frames > best.0 {
                        best = (l.frames, Some(cpu));
                    }
                }
                l.frames = 0;
            }
        }
        if !f.decide(now, best.0, best.1) {
            self.follow = None;
        }
    }

    /// About to block: ask every client to ring for its next frame. Returns
    /// whether blocking is safe (no ring has a frame); if not, the requests
    /// are withdrawn.
    pub(super) fn arm_rings(&mut self) -> bool {
        let mut idle = true;
        for s in self.sessions.values() {
            if let Some(l) = &s.rings {
                idle &= l.region.arm();
            }
        }
        if !idle {
            self.disarm_rings();
        }
        idle
    }

    /// Awake again: clients need not ring.
    pub(super) fn disarm_rings(&mut self) {
        for s in self.sessions.values() {
            if let Some(l) = &s.rings {
                l.region.disarm();
            }
        }
    }

    /// A client rang: silence its doorbell (the frames are read by
    /// [`Daemon::read_rings`]).
    pub(super) fn doorbell(&mut self, token: u64) {
        if let Some(l) = self.sessions.get(&token).and_then(|s| s.rings.as_ref()) {
            l.bell_in.clear();
        }
    }

    /// `SocketDoorbell`: announce frames on the socket too (or stop).
    pub(super) fn socket_doorbell(&mut self, token: u64, on: bool) -> Result<(), ErrorCode> {
        match self.sessions.get_mut(&token).and_then(|s| s.rings.as_mut()) {
            Some(l) => {
                l.socket_bell = on;
                Ok(())
            }
            None => Err(ErrorCode::InvalidArgument),
        }
    }
}
