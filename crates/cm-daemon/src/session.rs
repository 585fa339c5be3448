//! One connected client: its socket, identity (SO_PEERCRED), outgoing
//! frames and message-rate limit, and once attached its shared-memory
//! rings (`client_rings.rs`), which then carry every frame both ways.

use std::collections::VecDeque;
use std::os::fd::OwnedFd;

use cm_core::ClientId;
use cm_ipc::{Frame, ToClient};
use rustix::io::Errno;
use rustix::net::{SendFlags, send};

use crate::client_rings::ClientRings;

/// Frames a client may leave unread before it is dropped as stuck.
const MAX_BACKLOG: usize = 1024;

/// A token bucket over messages: `rate` per second, one second of burst.
#[derive(Debug)]
pub(crate) struct Limiter {
    rate: u64,
    tokens: u64,
    last_us: u64,
}

impl Limiter {
    pub(crate) fn new(rate: u64, now_us: u64) -> Self {
        Limiter {
            rate,
            tokens: rate,
            last_us: now_us,
        }
    }

    /// Take one token; false when the client is over its rate.
    pub(crate) fn take(&mut self, now_us: u64) -> bool {
        let dt = now_us.saturating_sub(self.last_us);
        if dt > 0 {
            let add = cm_core::units::mul_div(dt, self.rate, 1_000_000, false);
            if add > 0 {
                self.tokens = self.tokens.saturating_add(add).min(self.rate);
                self.last_us = now_us;
            }
        }
        if self.tokens == 0 {
            return false;
        }
        self.tokens -= 1;
        true
    }
}

/// A connected client.
pub(crate) struct Session {
    pub(crate) fd: OwnedFd,
    pub(crate) uid: u32,
    pub(crate) pid: u32,
    /// Set once the client said Hello.
    pub(crate) client: Option<ClientId>,
    pub(crate) flows: usize,
    pub(crate) out: Frame,
    /// Encoded frames the socket would not take yet.
    backlog: VecDeque<Vec<u8>>,
    pub(crate) limiter: Limiter,
    /// Messages refused for rate since the last log line.
    pub(crate) limited: u64,
    /// Whether epoll watches this socket for writability.
    pub(crate) want_out: bool,
    /// The shared-memory rings, once attached.
    pub(crate) rings: Option<ClientRings>,
}

/// What flushing a session found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum FlushResult {
    /// Everything was sent.
    Done,
    /// The socket is full; wait for it to become writable.
    Blocked,
    /// The client is gone or hopelessly behind: drop it.
    Dead,
}

impl Session {
    pub(crate) fn new(fd: OwnedFd, uid: u32, pid: u32, rate: u64, now_us: u64) -> Self {
        Session {
            fd,
            uid,
            pid,
            client: None,
            flows: 0,
            out: Frame::new(),
            backlog: VecDeque::new(),
            limiter: Limiter::new(rate, now_us),
            limited: 0,
            want_out: false,
            rings: None,
        }
    }

    /// Queue a message for the client.
    pub(crate) fn push(&mut self, m: &ToClient) {
        if !self.out.has_room(256) {
            let f = self.out.finish();
            self.backlog.push_back(f);
        }
        self.out.push(m);
    }

    /// Take every queued frame, oldest first, instead of sending them (the
    /// in-process [`crate::Harness`] reads a session's output this way).
    pub(crate) fn take_frames(&mut self) -> Vec<Vec<u8>> {
        if !self.out.is_empty() {
            let f = self.out.finish();
            self.backlog.push_back(f);
        }
        self.backlog.drain(..).collect()
    }

    pub(crate) fn has_output(&self) -> bool {
        !self.out.is_empty() || !self.backlog.is_empty()
    }

    /// Send queued frames without blocking.
    pub(crate) fn flush(&mut self) -> FlushResult {
        if self.rings.is_some() {
            return self.flush_ring();
        }
        if !self.out.is_empty() {
            let f = self.out.finish();
            self.backlog.push_back(f);
        }
        while let Some(f) = self.backlog.front() {
            match send(&self.fd, f, SendFlags::DONTWAIT | SendFlags::NOSIGNAL) {
                Ok(_) => {
                    self.backlog.pop_front();
                }
                Err(Errno::INTR) => {}
                Err(Errno::AGAIN) => {
                    return if self.backlog.len() > MAX_BACKLOG {
                        FlushResult::Dead
                    } else {
                        FlushResult::Blocked
                    };
                }
                Err(_) => return FlushResult::Dead,
            }
        }
        FlushResult::Done
    }

    /// Publish queued frames to the client's ring and ring its doorbell if it
    /// sleeps. A full ring is `Blocked`: the client rings the daemon's doorbell
    /// when it has made room (`need_space`).
    fn flush_ring(&mut self) -> FlushResult {
        let Some(l) = &mut self.rings else {
            return FlushResult::Dead;
        };
        let mut pushed = false;
        // The common case, nothing backlogged: publish straight from the
        // frame being built, no copy and no allocation.
        if self.backlog.is_empty() && !self.out.is_empty() {
            match l.region.push(self.out.bytes()) {
                Ok(true) => {
                    self.out.clear();
                    pushed = true;
                }
                Ok(false) => {}
                Err(_) => return FlushResult::Dead,
            }
        }
        if !self.out.is_empty() {
            self.backlog.push_back(self.out.finish());
        }
        let mut result = FlushResult::Done;
        while let Some(f) = self.backlog.front() {
            match l.region.push(f) {
                Ok(true) => {
                    self.backlog.pop_front();
                    pushed = true;
                }
                Ok(false) => match l.region.want_space(f.len()) {
                    Ok(true) => continue,
                    Ok(false) if self.backlog.len() > MAX_BACKLOG => return FlushResult::Dead,
                    Ok(false) => {
                        result = FlushResult::Blocked;
                        break;
                    }
                    Err(_) => return FlushResult::Dead,
                },
                Err(_) => return FlushResult::Dead,
            }
        }
        if pushed && l.region.take_peer_wake() {
            l.ring_client(&self.fd);
        }
        result
    }
}

#[cfg(test)]
mod tests {
    use super::Limiter;

    #[test]
    fn the_limiter_refills_at_its_rate_and_caps_at_one_second() {
        let mut l = Limiter::new(1000, 0);
        assert!((0..1000).all(|_| l.take(0)), "a full bucket to start");
        assert!(!l.take(0), "then over the rate");
        // 1000/s: one token per millisecond, none for less.
        assert!(!l.take(999));
        assert!(l.take(1000));
        assert!(!l.take(1000));
        // A long silence (even one whose refill overflows u64) refills to
        // the cap, never past it.
        let mut l = Limiter::new(u64::MAX / 2, 0);
        assert!(l.take(u64::MAX));
        assert_eq!(l.tokens, u64::MAX / 2 - 1);
    }
}
