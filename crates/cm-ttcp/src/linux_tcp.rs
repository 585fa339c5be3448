//! Linux TCP: the kernel's TCP with a per-socket congestion control
//! (`setsockopt(TCP_CONGESTION)`), the same summary as TCP/CM.
//!
//! SACK, timestamps and the initial window are the network namespace's
//! (`net.ipv4.tcp_sack`, `net.ipv4.tcp_timestamps`, the route's
//! `initcwnd`), not this crate's business. Socket buffers are left to the
//! kernel's autotuning (setting `SO_RCVBUF` would switch it off).

use std::collections::HashMap;
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::OwnedFd;
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags, poll};
use rustix::net::{AddressFamily, SocketFlags, SocketType};

use crate::error::{Result, TtcpError};
use crate::net::{timespec, wait_fd};
use crate::payload::{Sink, Source};
use crate::spec::{Observer, ReceiverOptions, SendSpec, Until};
use crate::summary::{ProgressSample, Role, Summary, Transport, throughput};
use crate::sys::{tcp_info, tcp_outq};

const CHUNK: usize = 256 * 1024;

fn set_cc(fd: &OwnedFd, cc: &str) -> Result<()> {
    match rustix::net::sockopt::set_tcp_congestion(fd, cc) {
        Ok(()) => Ok(()),
        Err(rustix::io::Errno::NOENT | rustix::io::Errno::INVAL | rustix::io::Errno::PERM) => {
            Err(TtcpError::UnknownCongestionControl(cc.to_owned()))
        }
        Err(e) => Err(TtcpError::errno(
            format!("setsockopt TCP_CONGESTION {cc:?}"),
            e,
        )),
    }
}

/// Progress bookkeeping of one sender.
struct Progress<'o> {
    started: Instant,
    step: Option<Duration>,
    next: Option<Instant>,
    samples: Vec<ProgressSample>,
    observer: Option<Observer<'o>>,
    index: usize,
}

impl Progress<'_> {
    fn due(&mut self, now: Instant, acked: impl FnOnce() -> u64) {
        let (Some(at), Some(step)) = (self.next, self.step) else {
            return;
        };
        if now < at {
            return;
        }
        let s = ProgressSample {
            t: at.saturating_duration_since(self.started).as_secs_f64(),
            bytes: acked(),
        };
        self.samples.push(s);
        if let Some(o) = self.observer.as_mut() {
            o(self.index, &s);
        }
        let mut next = at + step;
        while next <= now {
            next += step;
        }
        self.next = Some(next);
    }

    fn wait(&self, now: Instant, cap: Duration) -> Duration {
        self.next
            .map_or(cap, |t| t.saturating_duration_since(now).min(cap))
            .max(Duration::from_micros(100))
    }
}

/// One Linux TCP transfer: connect, write everything, `shutdown(Write)`,
/// read until the receiver closes (it has read everything).
pub(crate) fn send(
    spec: &SendSpec,
    cc: &str,
    index: usize,
    observer: Option<Observer<'_>>,
) -> Result<Summary> {
    let dst = spec.dst;
    let family = match dst {
        SocketAddr::V4(_) => AddressFamily::INET,
        SocketAddr::V6(_) => AddressFamily::INET6,
    };
    let fd = rustix::net::socket_with(
        family,
        SocketType::STREAM,
        SocketFlags::CLOEXEC | SocketFlags::NONBLOCK,
        None,
    )
    .map_err(|e| TtcpError::errno("socket", e))?;
    set_cc(&fd, cc)?;
    if let Some(b) = spec.bind {
        rustix::net::bind(&fd, &b).map_err(|e| TtcpError::errno(format!("bind {b}"), e))?;
    }
    let cpu0 = cm_clock::thread_cpu();
    let started = Instant::now();
    let start_unix = cm_clock::unix_now();
    match rustix::net::connect(&fd, &dst) {
        Ok(()) | Err(rustix::io::Errno::INPROGRESS) => {}
        Err(e) => return Err(connect_error(spec, e)),
    }
    if !wait_fd(&fd, PollFlags::OUT, spec.connect_timeout)? {
        return Err(TtcpError::Unreachable {
            dst,
            secs: spec.connect_timeout.as_secs_f64(),
            detail: String::new(),
        });
    }
    match rustix::net::sockopt::socket_error(&fd) {
        Ok(Ok(())) => {}
        Ok(Err(e)) => return Err(connect_error(spec, e)),
        Err(e) => return Err(TtcpError::errno("SO_ERROR", e)),
    }
    let mut stream = TcpStream::from(fd);
    let local = stream
        .local_addr()
        .map_err(|e| TtcpError::io("local address", e))?;
    let mut prog = Progress {
        started,
        step: spec.progress_interval,
        next: spec.progress_interval.map(|d| started + d),
        samples: Vec::new(),
        observer,
        index,
    };
    let source = Source::open(spec.file.as_deref())?;
    let mut chunk = vec![0u8; CHUNK];
    let mut written: u64 = 0;
    let mut watch = StallWatch {
        last_acked: 0,
        progressed: Instant::now(),
    };
    let acked = |s: &TcpStream, written: u64| written.saturating_sub(tcp_outq(s).unwrap_or(0));
    let deadline = spec.time_limit.map(|t| started + t);
    let mut timed_out = false;
    while written < spec.bytes {
        if deadline.is_some_and(|d| Instant::now() >= d) {
            timed_out = true;
            break;
        }
        let n = usize::try_from(spec.bytes - written)
            .unwrap_or(CHUNK)
            .min(CHUNK);
        let part = chunk.get_mut(..n).unwrap_or_default();
        source.fill(written, part)?;
        match stream.write(part) {
            Ok(k) => {
                written += k as u64;
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                let now = Instant::now();
                let mut wait = prog.wait(now, Duration::from_millis(100));
                if let Some(d) = deadline {
                    wait = wait.min(d.saturating_duration_since(now));
                }
                wait_fd(&stream, PollFlags::OUT, wait)?;
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(TtcpError::io(format!("write to {dst}"), e)),
        }
        let now = Instant::now();
        prog.due(now, || acked(&stream, written));
        watch.check(now, acked(&stream, written), spec)?;
    }
    // At the time limit, what is acknowledged by now counts; otherwise
    // finish the transfer.
    if !timed_out {
        stream
            .shutdown(Shutdown::Write)
            .map_err(|e| TtcpError::io("shutdown", e))?;
        // The receiver closes once it has read everything: EOF here means
        // every byte arrived.
        let mut sink = [0u8; 4096];
        loop {
            match stream.read(&mut sink) {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    let now = Instant::now();
                    wait_fd(
                        &stream,
                        PollFlags::IN,
                        prog.wait(now, Duration::from_millis(100)),
                    )?;
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(TtcpError::io(format!("read from {dst}"), e)),
            }
            let now = Instant::now();
            prog.due(now, || acked(&stream, written));
            watch.check(now, acked(&stream, written), spec)?;
        }
    }
    let end = Instant::now();
    let retrans = tcp_info(&stream).map_or(0, |i| i.total_retrans);
    let cpu = cm_clock::thread_cpu().saturating_sub(cpu0);
    let bytes = if timed_out {
        let a = acked(&stream, written);
        let _ = stream.shutdown(Shutdown::Both);
        a
    } else {
        written
    };
    if prog.step.is_some() {
        prog.samples.push(ProgressSample {
            t: end.saturating_duration_since(started).as_secs_f64(),
            bytes,
        });
        if let (Some(o), Some(s)) = (prog.observer.as_mut(), prog.samples.last()) {
            o(index, s);
        }
    }
    let seconds = end.saturating_duration_since(started).as_secs_f64();
    Ok(Summary {
        transport: Transport::linux(cc),
        role: Role::Sender,
        local: local.to_string(),
        peer: dst.to_string(),
        bytes,
        seconds,
        throughput_bps: throughput(bytes, seconds),
        retransmissions: u64::from(retrans),
        cpu_s: cpu.as_secs_f64(),
        start_s: cm_clock::secs_since_epoch(started),
        end_s: cm_clock::secs_since_epoch(end),
        start_unix_s: start_unix,
        complete: !timed_out,
        progress: prog.samples,
        tcpcm: None,
        ccudp: None,
    })
}

fn connect_error(spec: &SendSpec, e: rustix::io::Errno) -> TtcpError {
    match e {
        rustix::io::Errno::CONNREFUSED
        | rustix::io::Errno::HOSTUNREACH
        | rustix::io::Errno::NETUNREACH
        | rustix::io::Errno::TIMEDOUT => TtcpError::Unreachable {
            dst: spec.dst,
            secs: 0.0,
            detail: format!("; {}", std::io::Error::from(e)),
        },
        e => TtcpError::errno(format!("connect to {}", spec.dst), e),
    }
}

/// Fails a transfer when nothing new is acknowledged for the idle timeout.
struct StallWatch {
    last_acked: u64,
    progressed: Instant,
}

impl StallWatch {
    /// `acked` bytes are acknowledged at `now`.
    fn check(&mut self, now: Instant, acked: u64, spec: &SendSpec) -> Result<()> {
        if acked > self.last_acked {
            self.last_acked = acked;
            self.progressed = now;
            Ok(())
        } else if now >= self.progressed + spec.idle_timeout {
            Err(TtcpError::Stalled {
                dst: spec.dst,
                secs: spec.idle_timeout.as_secs_f64(),
                acked,
                total: spec.bytes,
            })
        } else {
            Ok(())
        }
    }
}

struct TConn {
    stream: TcpStream,
    peer: SocketAddr,
    started: Instant,
    start_unix: f64,
    cpu0: Duration,
    bytes: u64,
    last: Instant,
    next_sample: Option<Instant>,
    samples: Vec<ProgressSample>,
    sink: Sink,
}

/// The Linux TCP receiver: accept, read until EOF, close.
pub(crate) struct TcpReceiverLoop {
    listener: TcpListener,
    local: SocketAddr,
    cc: String,
    opts: ReceiverOptions,
    conns: HashMap<u64, TConn>,
    next_id: u64,
}

impl TcpReceiverLoop {
    pub(crate) fn bind(addr: SocketAddr, cc: &str, opts: ReceiverOptions) -> Result<Self> {
        let listener =
            TcpListener::bind(addr).map_err(|e| TtcpError::io(format!("listen on {addr}"), e))?;
        listener
            .set_nonblocking(true)
            .map_err(|e| TtcpError::io("set non-blocking", e))?;
        let fd = rustix::fd::AsFd::as_fd(&listener);
        // Accepted sockets inherit the listener's algorithm (it matters
        // for the ACK path only; the data sender's choice is what counts).
        match rustix::net::sockopt::set_tcp_congestion(fd, cc) {
            Ok(()) => {}
            Err(_) => return Err(TtcpError::UnknownCongestionControl(cc.to_owned())),
        }
        let local = listener
            .local_addr()
            .map_err(|e| TtcpError::io("local address", e))?;
        Ok(TcpReceiverLoop {
            listener,
            local,
            cc: cc.to_owned(),
            opts,
            conns: HashMap::new(),
            next_id: 0,
        })
    }

    pub(crate) fn local_addr(&self) -> SocketAddr {
        self.local
    }

    fn summary(&self, c: &TConn, complete: bool) -> Summary {
        let seconds = c.last.saturating_duration_since(c.started).as_secs_f64();
        Summary {
            transport: Transport::linux(self.cc.clone()),
            role: Role::Receiver,
            local: self.local.to_string(),
            peer: c.peer.to_string(),
            bytes: c.bytes,
            seconds,
            throughput_bps: throughput(c.bytes, seconds),
            retransmissions: 0,
            cpu_s: cm_clock::thread_cpu().saturating_sub(c.cpu0).as_secs_f64(),
            start_s: cm_clock::secs_since_epoch(c.started),
            end_s: cm_clock::secs_since_epoch(c.last),
            start_unix_s: c.start_unix,
            complete,
            progress: c.samples.clone(),
            tcpcm: None,
            ccudp: None,
        }
    }

    pub(crate) fn serve(
        &mut self,
        until: &Until<'_>,
        on_done: &mut dyn FnMut(&Summary),
    ) -> Result<Vec<Summary>> {
        let mut out = Vec::new();
        let mut buf = vec![0u8; CHUNK];
        loop {
            let now = Instant::now();
            if until.stopped(now) || until.count.is_some_and(|n| out.len() >= n) {
                break;
            }
            loop {
                match self.listener.accept() {
                    Ok((stream, peer)) => {
                        stream
                            .set_nonblocking(true)
                            .map_err(|e| TtcpError::io("set non-blocking", e))?;
                        let now = Instant::now();
                        let sink = Sink::create(self.opts.output.as_deref(), self.next_id + 1)?;
                        self.conns.insert(
                            self.next_id,
                            TConn {
                                stream,
                                peer,
                                started: now,
                                start_unix: cm_clock::unix_now(),
                                cpu0: cm_clock::thread_cpu(),
                                bytes: 0,
                                last: now,
                                next_sample: self.opts.progress_interval.map(|d| now + d),
                                samples: Vec::new(),
                                sink,
                            },
                        );
                        self.next_id += 1;
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(e)
                        if matches!(
                            e.kind(),
                            ErrorKind::Interrupted | ErrorKind::ConnectionAborted
                        ) => {}
                    Err(e) => return Err(TtcpError::io("accept", e)),
                }
            }
            let mut done = Vec::new();
            for (&id, c) in &mut self.conns {
                loop {
                    match c.stream.read(&mut buf) {
                        Ok(0) => {
                            done.push((id, true));
                            break;
                        }
                        Ok(n) => {
                            c.sink.write(c.bytes, buf.get(..n).unwrap_or_default())?;
                            c.bytes += n as u64;
                            c.last = Instant::now();
                        }
                        Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                        Err(e) if e.kind() == ErrorKind::Interrupted => {}
                        Err(_) => {
                            done.push((id, false));
                            break;
                        }
                    }
                }
                let now = Instant::now();
                if let (Some(at), Some(step)) = (c.next_sample, self.opts.progress_interval) {
                    if at <= now {
                        c.samples.push(ProgressSample {
                            t: at.saturating_duration_since(c.started).as_secs_f64(),
                            bytes: c.bytes,
                        });
                        let mut next = at + step;
                        while next <= now {
                            next += step;
                        }
                        c.next_sample = Some(next);
                    }
                }
                if now.saturating_duration_since(c.last) > self.opts.idle_timeout {
                    done.push((id, false));
                }
            }
            for (id, complete) in done {
                if let Some(mut c) = self.conns.remove(&id) {
                    if complete {
                        c.last = Instant::now();
                    }
                    let s = self.summary(&c, complete);
                    on_done(&s);
                    out.push(s);
                    // Dropping the stream closes it: the sender's EOF.
                }
            }
            let now = Instant::now();
            let mut wait = Duration::from_millis(50);
            if let Some(d) = until.deadline {
                wait = wait.min(d.saturating_duration_since(now));
            }
            let mut fds: Vec<PollFd<'_>> = self
                .conns
                .values()
                .map(|c| PollFd::new(&c.stream, PollFlags::IN))
                .collect();
            fds.push(PollFd::new(&self.listener, PollFlags::IN));
            match poll(&mut fds, Some(&timespec(wait))) {
                Ok(_) | Err(rustix::io::Errno::INTR) => {}
                Err(e) => return Err(TtcpError::errno("poll", e)),
            }
        }
        let ids: Vec<u64> = self.conns.keys().copied().collect();
        for id in ids {
            if let Some(c) = self.conns.remove(&id) {
                let s = self.summary(&c, false);
                on_done(&s);
                out.push(s);
            }
        }
        Ok(out)
    }
}
