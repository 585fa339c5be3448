//! The CC-UDP receiver: a plain UDP socket for control messages and one
//! receiving [`CcUdpSocket`] per transfer, connected to its sender. The
//! receiving sockets count payload and never send anything of their own;
//! their receiver CM answers the sender's handshake and probes by itself.
//!
//! A `CcUdpSocket` shares an `Rc<RefCell<Cm>>`, which cannot cross threads,
//! so the receiver's CM and its transfers live inside [`CcUdpReceiver::serve`]:
//! transfers still running when it returns are reported incomplete.

use std::cell::RefCell;
use std::io::ErrorKind;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsFd;
use std::rc::Rc;
use std::time::{Duration, Instant};

use libcm::Cm;
use libcm::ccudp::{CcUdpSocket, SharedCm};
use rustix::event::{PollFd, PollFlags, poll};

use super::control::Control;
use crate::error::{Result, TtcpError};
use crate::net::{SOCKET_BUFFER, big_buffers, send_datagram_to, timespec};
use crate::payload::Sink;
use crate::spec::{CcUdpReceiverOptions, ReceiverOptions, Until};
use crate::summary::{ProgressSample, Role, Summary, Transport, throughput};

/// A finished transfer is remembered this long, to answer repeated DONEs.
const KEEP_FINISHED: Duration = Duration::from_secs(10);
/// Transfers at once, at most (further HELLOs go unanswered).
const MAX_TRANSFERS: usize = 64;
/// Longest wait of the serving loop.
const MAX_WAIT: Duration = Duration::from_millis(50);

fn io(context: &'static str) -> impl Fn(std::io::Error) -> TtcpError {
    move |e| TtcpError::io(context, e)
}

/// A receiving socket for `peer`, bound to `local`.
fn receiving_socket(
    cm: &SharedCm,
    local: SocketAddr,
    peer: SocketAddr,
    o: &CcUdpReceiverOptions,
) -> Result<CcUdpSocket> {
    let s = CcUdpSocket::bind(cm, local)
        .map_err(|e| TtcpError::io(format!("bind receiving socket {local}"), e))?;
    big_buffers(&s, SOCKET_BUFFER);
    receiving(s, peer, o)
}

/// A receiving socket's settings: the receiver CM as asked, non-blocking,
/// connected to the sender.
fn receiving(
    mut s: CcUdpSocket,
    peer: SocketAddr,
    o: &CcUdpReceiverOptions,
) -> Result<CcUdpSocket> {
    s.set_cm_protocol(o.cm_protocol);
    s.set_nonblocking(true).map_err(io("set non-blocking"))?;
    s.connect(peer)
        .map_err(|e| TtcpError::io(format!("connect receiving socket to {peer}"), e))?;
    Ok(s)
}

/// One transfer being received.
struct Xfer {
    nonce: u64,
    /// The sender's data socket.
    peer: SocketAddr,
    /// `None` once finished.
    sock: Option<CcUdpSocket>,
    port: u16,
    opened: Instant,
    start_unix: f64,
    cpu0: Duration,
    first: Option<Instant>,
    last: Option<Instant>,
    bytes: u64,
    datagrams: u64,
    /// Duplicates dropped by sockets since replaced.
    dups_before: u64,
    restarts: u32,
    /// When DONE arrived (the transfer is finished).
    done: Option<Instant>,
    heard: Instant,
    next_sample: Option<Instant>,
    samples: Vec<ProgressSample>,
    sink: Sink,
}

impl Xfer {
    fn duplicates(&self) -> u64 {
        self.dups_before + self.sock.as_ref().map_or(0, |s| s.stats().duplicates)
    }

    fn summary(&self, local: SocketAddr, complete: bool) -> Summary {
        let (first, last) = (
            self.first.unwrap_or(self.opened),
            self.last.unwrap_or(self.opened),
        );
        let seconds = last.saturating_duration_since(first).as_secs_f64();
        Summary {
            transport: Transport::CcUdp,
            role: Role::Receiver,
            local: local.to_string(),
            peer: self.peer.to_string(),
            bytes: self.bytes,
            seconds,
            throughput_bps: throughput(self.bytes, seconds),
            retransmissions: self.duplicates(),
            cpu_s: cm_clock::thread_cpu()
                .saturating_sub(self.cpu0)
                .as_secs_f64(),
            start_s: cm_clock::secs_since_epoch(first),
            end_s: cm_clock::secs_since_epoch(last),
            start_unix_s: self.start_unix,
            complete,
            progress: self.samples.clone(),
            tcpcm: None,
            ccudp: None,
        }
    }

    /// Everything waiting on the socket; replaces the socket once when
    /// `restart_after` bytes have arrived.
    fn read(&mut self, cm: &SharedCm, o: &CcUdpReceiverOptions, buf: &mut [u8]) -> Result<()> {
        // The clock is read for the first datagram, every
        // `CLOCK_EVERY`th and when the socket is drained, not per datagram.
        const CLOCK_EVERY: u64 = 64;
        let mut unstamped = false;
        loop {
            let Some(s) = self.sock.as_mut() else {
                return Ok(());
            };
            match s.recv(buf) {
                Ok(n) => {
                    if self.first.is_none() || self.datagrams % CLOCK_EVERY == 0 {
                        self.stamp(Instant::now());
                        unstamped = false;
                    } else {
                        unstamped = true;
                    }
                    self.sink.write(self.bytes, buf.get(..n).unwrap_or(&[]))?;
                    self.bytes += n as u64;
                    self.datagrams += 1;
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    if unstamped {
                        self.stamp(Instant::now());
                    }
                    return Ok(());
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(TtcpError::io("receive", e)),
            }
            if self.restarts == 0 && o.restart_after.is_some_and(|b| self.bytes >= b) {
                self.restart(cm, o)?;
            }
        }
    }

    /// A datagram arrived at about `now`.
    fn stamp(&mut self, now: Instant) {
        self.first.get_or_insert(now);
        self.last = Some(now);
        self.heard = now;
    }

    /// Drop the receiving socket's CM and receiver-CM state, as a restarted
    /// receiver would lose them. The kernel socket itself is handed over
    /// (duplicated before the old one closes): a port closed even for a
    /// moment would answer the sender with ICMP port unreachable, which
    /// makes it fall back to "no receiver CM" instead of resynchronising.
    fn restart(&mut self, cm: &SharedCm, o: &CcUdpReceiverOptions) -> Result<()> {
        let Some(old) = self.sock.take() else {
            return Ok(());
        };
        let fd = old
            .as_fd()
            .try_clone_to_owned()
            .map_err(io("duplicate socket"))?;
        self.dups_before += old.stats().duplicates;
        drop(old);
        let s =
            CcUdpSocket::from_std(cm, UdpSocket::from(fd)).map_err(io("wrap receiving socket"))?;
        self.sock = Some(receiving(s, self.peer, o)?);
        self.restarts += 1;
        Ok(())
    }
}

/// The CC-UDP receiver (see the module docs).
pub(crate) struct CcUdpReceiver {
    ctl: UdpSocket,
    local: SocketAddr,
    opts: ReceiverOptions,
    /// Transfers started so far (names the output files).
    started: u64,
}

/// The serving loop's state.
struct Serving<'a> {
    cm: SharedCm,
    xfers: Vec<Xfer>,
    out: Vec<Summary>,
    finished: usize,
    on_done: &'a mut dyn FnMut(&Summary),
}

impl CcUdpReceiver {
    pub(crate) fn bind(addr: SocketAddr, opts: ReceiverOptions) -> Result<CcUdpReceiver> {
        let ctl = UdpSocket::bind(addr).map_err(|e| TtcpError::io(format!("bind {addr}"), e))?;
        ctl.set_nonblocking(true).map_err(io("set non-blocking"))?;
        let local = ctl.local_addr().map_err(io("local address"))?;
        Ok(CcUdpReceiver {
            ctl,
            local,
            opts,
            started: 0,
        })
    }

    pub(crate) fn local_addr(&self) -> SocketAddr {
        self.local
    }

    pub(crate) fn serve(
        &mut self,
        until: &Until<'_>,
        on_done: &mut dyn FnMut(&Summary),
    ) -> Result<Vec<Summary>> {
        let cm: SharedCm = Rc::new(RefCell::new(Cm::embedded(libcm::Config::default())?));
        let mut sv = Serving {
            cm,
            xfers: Vec::new(),
            out: Vec::new(),
            finished: 0,
            on_done,
        };
        let mut buf = vec![0u8; 65_536];
        let mut linger_until: Option<Instant> = None;
        loop {
            let now = Instant::now();
            if until.stopped(now) || linger_until.is_some_and(|t| now >= t) {
                break;
            }
            if linger_until.is_none() && until.count.is_some_and(|n| sv.finished >= n) {
                // Answer repeated DONEs a little longer.
                linger_until = Some(now + Duration::from_millis(300));
            }
            loop {
                match self.ctl.recv_from(&mut buf) {
                    Ok((n, from)) => {
                        if let Some(m) = buf.get(..n).and_then(Control::decode) {
                            self.on_control(&mut sv, from, m, &mut buf)?;
                        }
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(e)
                        if matches!(
                            e.kind(),
                            ErrorKind::Interrupted | ErrorKind::ConnectionRefused
                        ) => {}
                    Err(e) => return Err(TtcpError::io("control receive", e)),
                }
            }
            for x in &mut sv.xfers {
                x.read(&sv.cm, &self.opts.ccudp, &mut buf)?;
            }
            self.timers(&mut sv);
            self.wait(&mut sv, until)?;
        }
        for x in &sv.xfers {
            if x.done.is_none() && x.bytes > 0 {
                let s = x.summary(self.local, false);
                (sv.on_done)(&s);
                sv.out.push(s);
            }
        }
        Ok(sv.out)
    }

    fn on_control(
        &mut self,
        sv: &mut Serving<'_>,
        from: SocketAddr,
        m: Control,
        buf: &mut [u8],
    ) -> Result<()> {
        match m {
            Control::Hello { nonce, port } => {
                let peer = SocketAddr::new(from.ip(), port);
                let known = sv
                    .xfers
                    .iter()
                    .find(|x| x.nonce == nonce && x.peer == peer)
                    .map(|x| x.port);
                let port = match known {
                    Some(p) => p,
                    None => {
                        if sv.xfers.len() >= MAX_TRANSFERS {
                            return Ok(());
                        }
                        let local = SocketAddr::new(self.local.ip(), 0);
                        let sock = receiving_socket(&sv.cm, local, peer, &self.opts.ccudp)?;
                        let port = sock.local_addr().map_err(io("local address"))?.port();
                        self.started += 1;
                        let now = Instant::now();
                        sv.xfers.push(Xfer {
                            nonce,
                            peer,
                            sock: Some(sock),
                            port,
                            opened: now,
                            start_unix: cm_clock::unix_now(),
                            cpu0: cm_clock::thread_cpu(),
                            first: None,
                            last: None,
                            bytes: 0,
                            datagrams: 0,
                            dups_before: 0,
                            restarts: 0,
                            done: None,
                            heard: now,
                            next_sample: self.opts.progress_interval.map(|d| now + d),
                            samples: Vec::new(),
                            sink: Sink::create(self.opts.output.as_deref(), self.started)?,
                        });
                        port
                    }
                };
                send_datagram_to(&self.ctl, &Control::Ready { nonce, port }.encode(), from)
            }
            Control::Done { nonce } => {
                let Some(x) = sv
                    .xfers
                    .iter_mut()
                    .find(|x| x.nonce == nonce && x.peer.ip() == from.ip())
                else {
                    return Ok(());
                };
                if x.done.is_none() {
                    // What already arrived counts.
                    x.read(&sv.cm, &self.opts.ccudp, buf)?;
                    let now = Instant::now();
                    x.done = Some(now);
                    x.heard = now;
                    x.next_sample = None;
                    if self.opts.progress_interval.is_some() {
                        x.samples.push(ProgressSample {
                            t: now.saturating_duration_since(x.opened).as_secs_f64(),
                            bytes: x.bytes,
                        });
                    }
                    let s = x.summary(self.local, true);
                    x.dups_before = x.duplicates();
                    x.sock = None;
                    (sv.on_done)(&s);
                    sv.out.push(s);
                    sv.finished += 1;
                }
                let report = Control::Report {
                    nonce,
                    bytes: x.bytes,
                    datagrams: x.datagrams,
                    duplicates: x.duplicates(),
                    restarts: x.restarts,
                };
                send_datagram_to(&self.ctl, &report.encode(), from)
            }
            Control::Ready { .. } | Control::Report { .. } => Ok(()),
        }
    }

    /// Progress samples; forgetting silent and long-finished transfers.
    fn timers(&self, sv: &mut Serving<'_>) {
        let now = Instant::now();
        let step = self.opts.progress_interval;
        for x in &mut sv.xfers {
            if let (Some(at), Some(step)) = (x.next_sample, step) {
                if at <= now && x.done.is_none() {
                    x.samples.push(ProgressSample {
                        t: at.saturating_duration_since(x.opened).as_secs_f64(),
                        bytes: x.bytes,
                    });
                    let mut next = at + step;
                    while next <= now {
                        next += step;
                    }
                    x.next_sample = Some(next);
                }
            }
        }
        let idle = self.opts.idle_timeout;
        let local = self.local;
        let Serving {
            xfers,
            out,
            on_done,
            ..
        } = sv;
        xfers.retain(|x| {
            let silent = now.saturating_duration_since(x.heard);
            match x.done {
                Some(_) => silent <= KEEP_FINISHED,
                None if silent > idle => {
                    if x.bytes > 0 {
                        let s = x.summary(local, false);
                        on_done(&s);
                        out.push(s);
                    }
                    false
                }
                None => true,
            }
        });
    }

    /// Until a socket is readable, a timer is due, or [`MAX_WAIT`].
    fn wait(&self, sv: &mut Serving<'_>, until: &Until<'_>) -> Result<()> {
        let now = Instant::now();
        let mut wait = MAX_WAIT;
        if let Some(d) = until.deadline {
            wait = wait.min(d.saturating_duration_since(now));
        }
        for x in &mut sv.xfers {
            if let Some(t) = x.next_sample {
                wait = wait.min(t.saturating_duration_since(now));
            }
            if let Some(s) = x.sock.as_mut() {
                if let Ok(Some(t)) = s.next_timeout() {
                    wait = wait.min(t);
                }
            }
        }
        if wait.is_zero() {
            return Ok(());
        }
        let mut fds = vec![PollFd::from_borrowed_fd(self.ctl.as_fd(), PollFlags::IN)];
        for x in &sv.xfers {
            if let Some(s) = &x.sock {
                fds.push(PollFd::from_borrowed_fd(s.as_fd(), PollFlags::IN));
            }
        }
        match poll(&mut fds, Some(&timespec(wait))) {
            Ok(_) | Err(rustix::io::Errno::INTR) => Ok(()),
            Err(e) => Err(TtcpError::errno("poll", e)),
        }
    }
}
