//! Daemon mode: the CM runs in the daemon (`cmd`, crate cm-daemon); calls
//! travel in batched frames (cm-ipc), through the shared-memory rings once
//! attached (the default, `rings.rs`), else over the Unix `SOCK_SEQPACKET`
//! control socket.
//!
//! Fire-and-forget calls (request, notify, update, close, thresh) are
//! appended to an outgoing frame; [`crate::Cm`] flushes it after each call
//! made outside a dispatch, and once at the end of a dispatch for calls
//! made from callbacks, so a callback-driven sender pays one `send` per
//! batch of packets, not per packet. Calls that return a value flush and
//! wait for their reply, keeping any grants that arrive meanwhile.
//!
//! Before sleeping on the socket after sending calls that the daemon
//! answers (requests, calls with a reply), the connection polls it without
//! blocking for up to [`DaemonConn::spin`], yielding the CPU between polls
//! (cm-ipc "Waiting: spin, then block"): the answer usually comes within
//! microseconds, and a thread that never sleeps needs no ~50 µs cross-CPU
//! wake-up. It spins at most once per batch sent, and adapts how long: the
//! spin doubles when an answer came within [`DaemonConn::spin`] (spinning
//! longer would have caught it) and halves when it came later or not at
//! all (a full window), down to [`MIN_SPIN`] — the grow/shrink rule of
//! KVM's adaptive halt-polling (Linux `Documentation/virt/kvm/halt-polling.rst`).

use std::collections::VecDeque;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::Path;

use cm_ipc::{Frame, ToClient, ToDaemon, decode_frame_into};
use rustix::event::{PollFd, PollFlags, Timespec, poll};
use rustix::io::Errno;
use rustix::net::{
    AddressFamily, RecvFlags, SendFlags, SocketAddrUnix, SocketFlags, SocketType, connect, recv,
    send, socket_with,
};

mod replies;
mod spinners;

use super::rings::Rings;
use crate::error::CmError;
use crate::event::CmEvent;

/// How often an idle ring-mode client looks at the control socket for the
/// daemon's hang-up when it does not block on it.
const HANGUP_CHECK: std::time::Duration = std::time::Duration::from_millis(1);

/// Traffic on the daemon connection (see [`crate::Cm::ipc_counters`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IpcCounters {
    /// Frames sent to the daemon.
    pub frames_out: u64,
    /// Frames received from the daemon.
    pub frames_in: u64,
    /// Calls sent (messages in the frames out).
    pub calls_out: u64,
    /// Reads of the socket (or the ring) that found nothing.
    pub empty_reads: u64,
    /// Doorbells rung to wake the daemon (shared-memory rings only).
    pub doorbells_out: u64,
}

/// How a daemon connection carries its frames.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    /// Shared-memory rings (cm_ipc::shm; the default), falling back to
    /// the socket if the daemon does not offer them.
    SharedMemory,
    /// The control socket only.
    Socket,
}

/// Default longest client spin before sleeping when an answer is expected.
/// The daemon's answer to a batch typically takes 50-200 µs on the target
/// 2-core machine (it must be scheduled beside two busy threads), and a
/// client that sleeps before it comes pays a ~50 µs wake-up on top; the
/// adaptive spin (see the module docs) shrinks when answers do not come.
pub(crate) const DEFAULT_SPIN: std::time::Duration = std::time::Duration::from_micros(500);
/// Default longest wait for the daemon's reply to a call (and for its
/// welcome when connecting). A daemon that answers at all answers within
/// milliseconds; one stopped (`kill -STOP`) or hung never does, and a call
/// must not block forever on it.
pub const DEFAULT_REPLY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);
/// Shortest adaptive spin.
pub(crate) const MIN_SPIN: std::time::Duration = std::time::Duration::from_micros(10);

/// How much larger than the batch limit a batch without calls the daemon
/// answers may grow before it is sent (see [`DaemonConn::batch_full`]).
pub(crate) const QUIET_BATCH_FACTOR: usize = 8;

/// A connection to the daemon.
pub(crate) struct DaemonConn {
    fd: OwnedFd,
    out: Frame,
    inbox: VecDeque<ToClient>,
    next_seq: u32,
    /// The client id the daemon gave this connection.
    pub(crate) client: u64,
    /// This process's uid as the daemon sees it.
    pub(crate) uid: u32,
    rbuf: Vec<u8>,
    /// How long to poll for an expected answer before sleeping.
    spin: std::time::Duration,
    /// Calls in `out` that the daemon answers.
    out_answered: bool,
    /// A batch that the daemon answers was sent and nothing has come back
    /// since (and no spin has waited for it yet).
    awaiting: bool,
    /// The current (adaptive) spin, at most `spin`.
    spin_now: std::time::Duration,
    /// When the oldest batch still waiting for an answer was sent.
    asked_at: Option<std::time::Instant>,
    /// Frames sent and received, messages sent (for benchmarks and `stat`).
    counters: IpcCounters,
    /// The shared-memory rings, once attached.
    rings: Option<Rings>,
    /// When the socket was last looked at for a hang-up (ring mode).
    sock_checked: std::time::Instant,
    /// Longest wait for a reply ([`DEFAULT_REPLY_TIMEOUT`]).
    pub(crate) reply_timeout: std::time::Duration,
}

impl DaemonConn {
    /// Connect, say Hello (and attach the shared rings, if asked and offered).
    pub(crate) fn connect(path: &Path, transport: Transport) -> Result<Self, CmError> {
        Self::connect_within(path, transport, DEFAULT_REPLY_TIMEOUT)
    }

    /// [`DaemonConn::connect`], waiting at most `welcome` for the daemon's
    /// answer to Hello.
    pub(crate) fn connect_within(
        path: &Path,
        transport: Transport,
        welcome: std::time::Duration,
    ) -> Result<Self, CmError> {
        let fd = socket_with(
            AddressFamily::UNIX,
            SocketType::SEQPACKET,
            SocketFlags::CLOEXEC,
            None,
        )?;
        let addr = SocketAddrUnix::new(path)?;
        connect(&fd, &addr).map_err(|e| CmError::NoDaemon {
            path: path.to_path_buf(),
            source: e.into(),
        })?;
        let mut c = DaemonConn {
            fd,
            out: Frame::new(),
            inbox: VecDeque::new(),
            next_seq: 1,
            client: 0,
            uid: 0,
            rbuf: vec![0; cm_ipc::MAX_FRAME],
            spin: DEFAULT_SPIN,
            out_answered: false,
            awaiting: false,
            spin_now: DEFAULT_SPIN,
            asked_at: None,
            reply_timeout: welcome,
            counters: IpcCounters::default(),
            rings: None,
            sock_checked: std::time::Instant::now(),
        };
        c.push(&ToDaemon::Hello {
            version: cm_ipc::VERSION,
        })?;
        let attach = (transport == Transport::SharedMemory).then(|| c.seq());
        if let Some(seq) = attach {
            c.push(&ToDaemon::Attach { seq })?;
        }
        if let Err(e) = c.flush() {
            // A daemon that refuses a client (a client limit) writes the
            // refusal and closes, which may come before the Hello is
            // written: the send then fails, and the refusal is still there
            // to read.
            if matches!(e, CmError::Disconnected) {
                if let Err(r @ CmError::Refused { .. }) = c.handshake(attach) {
                    return Err(r);
                }
            }
            return Err(e);
        }
        c.handshake(attach)?;
        c.reply_timeout = DEFAULT_REPLY_TIMEOUT;
        Ok(c)
    }

    /// Read the answers to Hello (and Attach, with its descriptors).
    fn handshake(&mut self, attach: Option<u32>) -> Result<(), CmError> {
        let mut welcomed = false;
        let mut attached = attach.is_none();
        let mut fds = Vec::new();
        let mut reset = false;
        let deadline = std::time::Instant::now() + self.reply_timeout;
        while !(welcomed && attached) {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return Err(CmError::Timeout(self.reply_timeout));
            }
            let ts = timespec(left);
            let mut p = [PollFd::new(&self.fd, PollFlags::IN)];
            match poll(&mut p, Some(&ts)) {
                Ok(0) => continue,
                Ok(_) | Err(Errno::INTR) => {}
                Err(e) => return Err(e.into()),
            }
            let got = match cm_ipc::shm::recv_with_fds(self.fd.as_fd(), &mut self.rbuf) {
                // A daemon that refuses a client closes before reading its
                // Hello, and Linux reports that reset before the frames
                // queued ahead of it: read on for the refusal.
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset && !reset => {
                    reset = true;
                    continue;
                }
                r => r?,
            };
            match got {
                None => continue,
                Some((0, _)) => return Err(CmError::Disconnected),
                Some((n, got)) => {
                    if !got.is_empty() {
                        fds = got;
                    }
                    let n = n.min(self.rbuf.len());
                    self.counters.frames_in += 1;
                    decode_frame_into(&self.rbuf[..n], &mut self.inbox)?;
                }
            }
            let mut i = 0;
            while i < self.inbox.len() {
                match self.inbox[i] {
                    ToClient::Welcome { client, uid, .. } if !welcomed => {
                        (self.client, self.uid, welcomed) = (client, uid, true);
                    }
                    ToClient::Error { seq: 0, code, .. } if !welcomed => {
                        return Err(CmError::Daemon(code));
                    }
                    // A client limit (named) refused the connection.
                    ToClient::Refused {
                        seq: 0,
                        code,
                        ref why,
                        ..
                    } if !welcomed => {
                        let why = why.clone();
                        return Err(CmError::Refused { code, why });
                    }
                    ToClient::Attached { seq, .. } if Some(seq) == attach => {
                        self.rings = Some(Rings::from_fds(std::mem::take(&mut fds))?);
                        attached = true;
                    }
                    // Refused (or no shared memory here): stay on the socket.
                    ToClient::Error { seq, .. } if Some(seq) == attach => attached = true,
                    _ => {
                        i += 1;
                        continue;
                    }
                }
                self.inbox.remove(i);
            }
        }
        Ok(())
    }

    /// Before the application sleeps on [`DaemonConn::fd`]: with rings, the
    /// descriptor is made readable if frames wait (in the ring or already
    /// read) and armed otherwise; nothing is read here, so nothing read can
    /// be slept on.
    pub(crate) fn prepare_poll(&mut self) -> Result<(), CmError> {
        let unread = !self.inbox.is_empty();
        match &mut self.rings {
            Some(l) => l.prepare_poll(unread),
            None => Ok(()),
        }
    }

    /// Traffic so far, doorbells included.
    pub(crate) fn counters(&self) -> IpcCounters {
        let mut c = self.counters;
        c.doorbells_out = self.rings.as_ref().map_or(0, |l| l.rang);
        c
    }

    /// Whether frames travel through shared-memory rings.
    pub(crate) fn has_rings(&self) -> bool {
        self.rings.is_some()
    }

    /// SIGIO mode: the daemon nudges the socket too; `drain` looks at it.
    pub(crate) fn set_socket_bell(&mut self) {
        if let Some(l) = &mut self.rings {
            l.socket_bell = true;
        }
    }

    /// The longest spin for an answer (see [`crate::Cm::set_spin`]).
    pub(crate) fn set_spin(&mut self, spin: std::time::Duration) {
        self.spin = spin;
        self.spin_now = spin;
    }

    /// How frames travel now.
    pub(crate) fn transport(&self) -> Transport {
        if self.rings.is_some() {
            Transport::SharedMemory
        } else {
            Transport::Socket
        }
    }

    /// The control socket itself (SIGIO is raised on it).
    pub(crate) fn socket(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// The descriptor the application polls: the control socket, or with
    /// rings the client's doorbell and the socket in one epoll set.
    pub(crate) fn fd(&mut self) -> Result<BorrowedFd<'_>, CmError> {
        match &mut self.rings {
            Some(l) => l.poll_set(self.fd.as_fd()),
            None => Ok(self.fd.as_fd()),
        }
    }

    fn seq(&mut self) -> u32 {
        let s = self.next_seq;
        self.next_seq = self.next_seq.wrapping_add(1).max(1);
        s
    }

    /// Append a message to the outgoing frame (sending the frame first if
    /// it is full).
    pub(crate) fn push(&mut self, m: &ToDaemon) -> Result<(), CmError> {
        if !self.out.has_room(256) {
            self.flush()?;
        }
        self.out_answered |= m.expects_answer();
        self.out.push(m);
        Ok(())
    }

    /// Whether a batch of `limit` calls is ready to go (autoflush off). A
    /// batch of fire-and-forget calls only (notifications, feedback) waits
    /// until it is [`QUIET_BATCH_FACTOR`] times larger, until calls that
    /// the daemon answers join it, or until the application is about to
    /// sleep: sending it would wake the daemon for a turn that grants
    /// nothing, and its calls reach the daemon in the same order anyway.
    pub(crate) fn batch_full(&self, limit: usize) -> bool {
        let n = self.out.len();
        n >= limit && (self.out_answered || n >= limit.saturating_mul(QUIET_BATCH_FACTOR))
    }

    /// Send the outgoing frame, if any.
    pub(crate) fn flush(&mut self) -> Result<(), CmError> {
        if self.out.is_empty() {
            return Ok(());
        }
        if let Some(l) = &mut self.rings {
            l.send(self.out.bytes(), self.fd.as_fd())?;
        } else {
            loop {
                match send(&self.fd, self.out.bytes(), SendFlags::NOSIGNAL) {
                    Ok(_) => break,
                    Err(Errno::INTR) => continue,
                    Err(Errno::PIPE | Errno::CONNRESET) => return Err(CmError::Disconnected),
                    Err(e) => return Err(e.into()),
                }
            }
        }
        self.counters.frames_out += 1;
        self.counters.calls_out += self.out.len() as u64;
        self.out.clear();
        if std::mem::take(&mut self.out_answered) {
            self.awaiting = true;
            self.asked_at.get_or_insert_with(std::time::Instant::now);
        }
        Ok(())
    }

    /// Read every frame waiting, without blocking: from the rings (leaving
    /// ours armed) or the socket.
    pub(crate) fn drain(&mut self) -> Result<(), CmError> {
        if self.rings.is_some() {
            return self.drain_ring();
        }
        self.drain_socket_only()
    }

    fn drain_ring(&mut self) -> Result<(), CmError> {
        let Some(l) = &mut self.rings else {
            return Ok(());
        };
        let inbox = &mut self.inbox;
        let n = l.drain(|f| Ok(decode_frame_into(f, inbox)?))?;
        let socket_bell = l.socket_bell;
        if n > 0 {
            self.counters.frames_in += n;
            self.awaiting = false;
            self.adapt_spin();
        } else {
            self.counters.empty_reads += 1;
        }
        // The socket carries nothing but nudges (SIGIO mode) and the
        // daemon's hang-up: look at it when nudges may wait, and otherwise
        // now and then (a blocking wait watches it anyway).
        if socket_bell || (n == 0 && self.sock_checked.elapsed() > HANGUP_CHECK) {
            self.sock_checked = std::time::Instant::now();
            self.drain_socket_only()?;
        }
        Ok(())
    }

    fn drain_socket_only(&mut self) -> Result<(), CmError> {
        loop {
            match recv(&self.fd, &mut self.rbuf, RecvFlags::DONTWAIT) {
                Ok((0, _)) => return Err(CmError::Disconnected),
                Ok((n, _)) => {
                    let n = n.min(self.rbuf.len());
                    self.counters.frames_in += 1;
                    self.awaiting = false;
                    self.adapt_spin();
                    decode_frame_into(&self.rbuf[..n], &mut self.inbox)?;
                }
                Err(Errno::AGAIN) => {
                    self.counters.empty_reads += 1;
                    return Ok(());
                }
                Err(Errno::INTR) => continue,
                Err(Errno::CONNRESET) => return Err(CmError::Disconnected),
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// If an answer is expected, poll for it without blocking for up to
    /// `spin`, yielding the CPU between polls (so a daemon sharing this
    /// CPU runs at once). Returns whether a frame arrived meanwhile. At most
    /// one spin per batch sent: a spin that finds nothing clears the
    /// expectation, so a client whose grants wait on a full window does not
    /// spin before every sleep.
    pub(crate) fn spin_for_answer(&mut self) -> Result<bool, CmError> {
        if !self.awaiting || self.spin.is_zero() {
            return Ok(false);
        }
        // Enough of this process's threads spin already (spinners.rs).
        let Some(_slot) = spinners::take() else {
            return Ok(false);
        };
        let before = self.counters.frames_in;
        let until = std::time::Instant::now() + self.spin_now.min(self.spin);
        if let Some(l) = &mut self.rings {
            l.waiting_here();
        }
        loop {
            self.drain()?;
            if self.counters.frames_in != before {
                return Ok(true);
            }
            if std::time::Instant::now() >= until {
                self.awaiting = false;
                return Ok(false);
            }
            std::thread::yield_now();
        }
    }

    /// An answer came: grow the spin if it came within the longest spin,
    /// shrink it otherwise (KVM halt-polling's rule, see the module docs).
    fn adapt_spin(&mut self) {
        let Some(t) = self.asked_at.take() else {
            return;
        };
        self.spin_now = if t.elapsed() <= self.spin {
            self.spin_now.saturating_mul(2).min(self.spin)
        } else {
            (self.spin_now / 2).max(MIN_SPIN)
        };
    }

    /// Block until the socket is readable or `timeout` passes, then drain it
    /// (after a bounded spin if an answer is expected).
    /// Frames already in the inbox end the wait at once: they are the
    /// application's events.
    pub(crate) fn block(&mut self, timeout: Option<std::time::Duration>) -> Result<(), CmError> {
        self.block_for(timeout, true)
    }

    /// [`DaemonConn::block`]; `inbox_counts`: frames already in the inbox
    /// end the wait. A wait for replies passes false, since it has looked at
    /// them: otherwise a client holding events it has not dispatched yet
    /// would poll in a loop without sleeping until its reply came, and a
    /// thousand such clients (`cm bench load --bulk --clients 1000`) took
    /// the CPUs from the daemon that was to answer them.
    fn block_for(
        &mut self,
        timeout: Option<std::time::Duration>,
        inbox_counts: bool,
    ) -> Result<(), CmError> {
        self.flush()?;
        if self.spin_for_answer()? {
            return Ok(());
        }
        let ts = timeout.map(timespec);
        if self.rings.is_some() {
            // Sleep only if nothing came meanwhile; then silence and arm
            // the doorbell the client sleeps on.
            let before = self.counters.frames_in;
            self.drain_ring()?;
            if self.counters.frames_in != before || (inbox_counts && !self.inbox.is_empty()) {
                return Ok(());
            }
            // Nothing new, and (if they count) no events held: what the
            // inbox holds is not a reason to wake.
            if let Some(l) = &mut self.rings {
                l.prepare_poll(false)?;
            }
        }
        // The socket (its hang-up, SIGIO nudges or, without rings, every
        // frame) and, with rings, the client's doorbell.
        let sock = PollFd::new(&self.fd, PollFlags::IN);
        let mut fds = [sock.clone(), sock];
        let n = match &self.rings {
            Some(l) => {
                fds[1] = PollFd::new(&l.bell_me, PollFlags::IN);
                2
            }
            None => 1,
        };
        match poll(&mut fds[..n], ts.as_ref()) {
            Ok(_) | Err(Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
        let ready = fds[0].revents();
        if ready.intersects(PollFlags::IN | PollFlags::HUP | PollFlags::ERR) {
            self.drain_socket_only()?;
        }
        if self.rings.is_some() {
            self.drain_ring()?;
        }
        Ok(())
    }

    /// Wait for more frames while a reply is due by `deadline`: a
    /// [`CmError::Timeout`] once it has passed.
    pub(crate) fn block_until(&mut self, deadline: std::time::Instant) -> Result<(), CmError> {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return Err(CmError::Timeout(self.reply_timeout));
        }
        self.block_for(Some(left), false)
    }

    /// Move events (not replies) from the inbox to `out`.
    /// (`to_app` maps the daemon's flow ids to the application's, after a
    /// move; see `cm::failover`.)
    pub(crate) fn pump(
        &mut self,
        out: &mut VecDeque<CmEvent>,
        to_app: &cm_core::idhash::IdMap<cm_core::FlowId, cm_core::FlowId>,
    ) -> Result<(), CmError> {
        self.drain()?;
        while let Some(m) = self.inbox.pop_front() {
            if let Some(ev) = CmEvent::from_wire(&m) {
                out.push_back(ev.to_app(to_app));
            }
            // A reply nobody waits for (a call abandoned by an error) is dropped.
        }
        Ok(())
    }

    /// Whether events wait in the inbox.
    pub(crate) fn has_inbox(&self) -> bool {
        !self.inbox.is_empty()
    }
}

impl Drop for DaemonConn {
    /// Calls still batched when the handle goes away were made by the
    /// application and must reach the daemon: feedback left behind would
    /// leave its bytes "in flight" in a macroflow that outlives the flow,
    /// which then ages on feedback that never comes. Best effort: a daemon
    /// that is gone is not an error here.
    fn drop(&mut self) {
        let _ = self.flush();
    }
}

fn timespec(d: std::time::Duration) -> Timespec {
    Timespec {
        tv_sec: i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        tv_nsec: i64::from(d.subsec_nanos()),
    }
}
