//! The CC-UDP sender: setup on the control port, blocking sends through a
//! [`CcUdpSocket`], the drain, and the receiver's report.

use std::cell::RefCell;
use std::io::ErrorKind;
use std::net::{SocketAddr, UdpSocket};
use std::rc::Rc;
use std::time::{Duration, Instant};

use libcm::Cm;
use libcm::ccudp::{CcUdpSocket, SharedCm};
use rustix::event::PollFlags;

use super::control::Control;
use super::{DRAIN_LIMIT, ccudp_config, random_u64};
use crate::error::{Result, TtcpError};
use crate::net::{SOCKET_BUFFER, big_buffers, wait_fd};
use crate::payload::Source;
use crate::spec::{Observer, SendSpec};
use crate::summary::{CcUdpDetail, ProgressSample, Role, Summary, Transport, throughput};

/// HELLO is repeated this often until READY arrives.
const HELLO_RETRY: Duration = Duration::from_millis(250);
/// DONE is repeated this often until REPORT arrives ...
const DONE_RETRY: Duration = Duration::from_millis(100);
/// ... this many times at most.
const DONE_TRIES: u32 = 10;
/// A blocking send waits at most this long for queue space before the
/// loop samples and checks its limits (then it tries again).
const WRITE_WAIT: Duration = Duration::from_millis(50);
/// The sending rate is sampled this often (for [`CcUdpDetail::peak_send_bps`]).
const SAMPLE: Duration = Duration::from_millis(100);
/// Longest wait in the drain loop.
const POLL_MAX: Duration = Duration::from_millis(10);
/// IPv4 and UDP headers.
const IP_UDP: u64 = 28;
/// CC-UDP's (and the CM protocol's) data header.
const DATA_HEADER: u64 = 16;

fn io(context: &'static str) -> impl Fn(std::io::Error) -> TtcpError {
    move |e| TtcpError::io(context, e)
}

/// The unspecified address of `dst`'s family, any port.
fn unspecified(dst: SocketAddr) -> SocketAddr {
    match dst {
        SocketAddr::V4(_) => SocketAddr::from(([0, 0, 0, 0], 0)),
        SocketAddr::V6(_) => SocketAddr::from(([0u16; 8], 0)),
    }
}

/// Waits on `ctl` until `until` for a message `want` accepts.
fn await_control<T>(
    ctl: &UdpSocket,
    until: Instant,
    refused: &mut bool,
    want: impl Fn(Control) -> Option<T>,
) -> Result<Option<T>> {
    let mut buf = [0u8; 128];
    loop {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(None);
        }
        ctl.set_read_timeout(Some(left))
            .map_err(io("control socket timeout"))?;
        match ctl.recv(&mut buf) {
            Ok(n) => {
                if let Some(t) = buf.get(..n).and_then(Control::decode).and_then(&want) {
                    return Ok(Some(t));
                }
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) if e.kind() == ErrorKind::ConnectionRefused => {
                // Nobody listens (yet): wait out the interval.
                *refused = true;
                std::thread::sleep(until.saturating_duration_since(Instant::now()));
            }
            Err(e) => return Err(TtcpError::io("control receive", e)),
        }
    }
}

/// Sends `msg` on `ctl`; a refusal is noted, not an error.
fn send_control(ctl: &UdpSocket, msg: &Control, refused: &mut bool) -> Result<()> {
    match ctl.send(&msg.encode()) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == ErrorKind::ConnectionRefused => {
            *refused = true;
            Ok(())
        }
        Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => Ok(()),
        Err(e) => Err(TtcpError::io("control send", e)),
    }
}

/// HELLO until READY: the receiver's data port.
fn hello(ctl: &UdpSocket, spec: &SendSpec, nonce: u64, port: u16) -> Result<u16> {
    let start = Instant::now();
    let mut refused = false;
    let msg = Control::Hello { nonce, port };
    loop {
        if start.elapsed() >= spec.connect_timeout {
            return Err(TtcpError::Unreachable {
                dst: spec.dst,
                secs: start.elapsed().as_secs_f64(),
                detail: if refused {
                    "; connection refused".into()
                } else {
                    String::new()
                },
            });
        }
        send_control(ctl, &msg, &mut refused)?;
        let until = (Instant::now() + HELLO_RETRY).min(start + spec.connect_timeout);
        let ready = await_control(ctl, until, &mut refused, |m| match m {
            Control::Ready { nonce: n, port } if n == nonce => Some(port),
            _ => None,
        })?;
        if let Some(p) = ready {
            return Ok(p);
        }
    }
}

/// What the receiver reported: (bytes, datagrams, restarts).
fn done(ctl: &UdpSocket, nonce: u64) -> Result<Option<(u64, u64, u32)>> {
    let mut refused = false;
    for _ in 0..DONE_TRIES {
        send_control(ctl, &Control::Done { nonce }, &mut refused)?;
        let r = await_control(
            ctl,
            Instant::now() + DONE_RETRY,
            &mut refused,
            |m| match m {
                Control::Report {
                    nonce: n,
                    bytes,
                    datagrams,
                    restarts,
                    ..
                } if n == nonce => Some((bytes, datagrams, restarts)),
                _ => None,
            },
        )?;
        if r.is_some() {
            return Ok(r);
        }
    }
    Ok(None)
}

/// Whether every datagram that left is resolved: nothing queued at the
/// CM and nothing in flight for the flow.
fn resolved(sock: &CcUdpSocket, cm: &SharedCm) -> bool {
    if sock.stats().queued_bytes > 0 {
        return false;
    }
    let Some(flow) = sock.flow() else {
        return true;
    };
    let Ok(mut cm) = cm.try_borrow_mut() else {
        return false;
    };
    cm.stat().is_ok_and(|s| {
        s.flows
            .iter()
            .find(|f| f.id == flow.to_u64())
            .is_none_or(|f| f.in_flight == 0)
    })
}

/// Samples taken while the transfer runs.
struct Tracker<'o> {
    t0: Instant,
    payload: u64,
    wire: u64,
    /// (seconds since t0, datagrams sent), every [`SAMPLE`].
    sent: Vec<(f64, u64)>,
    next_sample: Instant,
    progress: Vec<ProgressSample>,
    every: Option<Duration>,
    next_progress: Option<Instant>,
    /// Datagrams sent at the last change, and when.
    departed: (u64, Instant),
    idle: Duration,
    observer: Option<Observer<'o>>,
    index: usize,
}

impl Tracker<'_> {
    /// Payload bytes acknowledged so far (by count of datagrams).
    fn acked_bytes(&self, sock: &CcUdpSocket, queued: u64) -> u64 {
        (sock.stats().acked * self.payload).min(queued)
    }

    /// Samples due at `now`; fails if nothing left the socket for the idle
    /// limit.
    fn tick(&mut self, sock: &CcUdpSocket, dst: SocketAddr, total: u64, queued: u64) -> Result<()> {
        let now = Instant::now();
        let t = now.saturating_duration_since(self.t0).as_secs_f64();
        if now >= self.next_sample {
            let sent = sock.stats().sent;
            self.sent.push((t, sent));
            while self.next_sample <= now {
                self.next_sample += SAMPLE;
            }
            if sent > self.departed.0 {
                self.departed = (sent, now);
            } else if now.saturating_duration_since(self.departed.1) > self.idle {
                return Err(TtcpError::Stalled {
                    dst,
                    secs: now.saturating_duration_since(self.departed.1).as_secs_f64(),
                    acked: self.acked_bytes(sock, queued),
                    total,
                });
            }
        }
        if let (Some(at), Some(step)) = (self.next_progress, self.every) {
            if now >= at {
                let s = ProgressSample {
                    t,
                    bytes: self.acked_bytes(sock, queued),
                };
                self.progress.push(s);
                if let Some(obs) = self.observer.as_mut() {
                    obs(self.index, &s);
                }
                let mut next = at + step;
                while next <= now {
                    next += step;
                }
                self.next_progress = Some(next);
            }
        }
        Ok(())
    }

    /// Highest rate over any window of at least one second (the whole run
    /// if shorter), bits/s of IP packets.
    fn peak_bps(&self) -> f64 {
        let mut peak = 0.0_f64;
        let Some(&(t_end, n_end)) = self.sent.last() else {
            return 0.0;
        };
        if t_end < 1.0 {
            return if t_end > 0.0 {
                (n_end * self.wire * 8) as f64 / t_end
            } else {
                0.0
            };
        }
        let mut j = 0;
        for (i, &(ti, ni)) in self.sent.iter().enumerate() {
            j = j.max(i);
            while self.sent.get(j).is_some_and(|&(tj, _)| tj - ti < 1.0) {
                j += 1;
            }
            let Some(&(tj, nj)) = self.sent.get(j) else {
                break;
            };
            peak = peak.max(nj.saturating_sub(ni) as f64 * (self.wire * 8) as f64 / (tj - ti));
        }
        peak
    }
}

/// GSO runs handed to the socket per `send_batch_with`: one pass of the
/// socket's engine (reading feedback, serving grants) per two runs rather
/// than per run, and the second run usually reaches the receiver while it
/// is still awake from the first.
const RUNS: usize = 2;

/// Payloads of `payload` bytes handed to the socket per `send_batch_with`:
/// [`RUNS`] times as many as one GSO call carries with their headers, so
/// that what the window lets out at once leaves in full calls (64
/// datagrams of 1216 bytes would leave as a run of 53 and a remnant of 11).
fn batch_len(payload: usize) -> usize {
    RUNS * (cm_udp::MAX_GSO_BYTES / (payload + DATA_HEADER as usize)).clamp(1, cm_udp::MAX_BATCH)
}

/// One CC-UDP transfer on the calling thread, with `cm` (e.g. a daemon's)
/// or, if `None`, an embedded CM of its own with [`ccudp_config`].
pub(crate) fn send(
    spec: &SendSpec,
    index: usize,
    observer: Option<Observer<'_>>,
    cm: Option<&mut Cm>,
) -> Result<Summary> {
    let Some(cm) = cm else {
        let own: SharedCm = Rc::new(RefCell::new(Cm::embedded(ccudp_config())?));
        return transfer(spec, index, observer, &own);
    };
    // The socket shares its CM (`Rc<RefCell<Cm>>`): lend the caller's to
    // it for the transfer and take it back afterwards.
    let lent = std::mem::replace(cm, Cm::embedded(ccudp_config())?);
    let shared: SharedCm = Rc::new(RefCell::new(lent));
    let r = transfer(spec, index, observer, &shared);
    match Rc::try_unwrap(shared) {
        Ok(c) => *cm = c.into_inner(),
        Err(_) => return Err(TtcpError::Invalid("the CM is still shared".into())),
    }
    r
}

/// The transfer itself, on `cm`.
fn transfer(
    spec: &SendSpec,
    index: usize,
    observer: Option<Observer<'_>>,
    cm: &SharedCm,
) -> Result<Summary> {
    let cpu0 = cm_clock::thread_cpu();
    let bind = spec.bind.unwrap_or_else(|| unspecified(spec.dst));
    let mut sock = CcUdpSocket::bind(cm, bind).map_err(io("bind data socket"))?;
    let local = sock.local_addr().map_err(io("local address"))?;
    big_buffers(&sock, SOCKET_BUFFER);
    let ctl = UdpSocket::bind(SocketAddr::new(bind.ip(), 0)).map_err(io("bind control socket"))?;
    ctl.connect(spec.dst)
        .map_err(|e| TtcpError::io(format!("connect control socket to {}", spec.dst), e))?;
    let nonce = random_u64();
    let port = hello(&ctl, spec, nonce, local.port())?;
    sock.connect(SocketAddr::new(spec.dst.ip(), port))
        .map_err(io("connect data socket"))?;
    sock.set_write_timeout(Some(WRITE_WAIT))
        .map_err(io("write timeout"))?;
    sock.restrict_offload(spec.offload()?)
        .map_err(io("UDP offload"))?;
    let max = sock.max_payload().map_err(io("max payload"))?;
    if max == 0 {
        return Err(TtcpError::Invalid("the CM's MTU leaves no payload".into()));
    }
    let payload = match spec.payload {
        Some(p) if p > max => {
            return Err(TtcpError::Invalid(format!(
                "a payload of {p} bytes is over the {max} the CM's MTU leaves"
            )));
        }
        Some(p) => p,
        None => max,
    };
    let source = Source::open(spec.file.as_deref())?;
    // Payloads go to the socket a GSO run at a time, written in place in
    // the CM's queue (`send_batch_with`). Without a file the payload is
    // zeros: the queue's buffers have only ever held this transfer's
    // zero payloads behind their headers, so `Source::fill` leaves them.
    let batch = batch_len(payload);
    let mut lens: Vec<usize> = Vec::with_capacity(batch);
    let t0 = Instant::now();
    let start_unix = cm_clock::unix_now();
    let limit_at = spec.time_limit.map(|d| t0 + d);
    let payload = payload as u64;
    let mut tr = Tracker {
        t0,
        payload,
        wire: payload + DATA_HEADER + IP_UDP,
        sent: vec![(0.0, 0)],
        next_sample: t0 + SAMPLE,
        progress: Vec::new(),
        every: spec.progress_interval,
        next_progress: spec.progress_interval.map(|d| t0 + d),
        departed: (0, t0),
        idle: spec.idle_timeout,
        observer,
        index,
    };
    let mut queued = 0u64;
    let mut limited = false;
    while queued < spec.bytes {
        if limit_at.is_some_and(|t| Instant::now() >= t) {
            limited = true;
            break;
        }
        let n = (spec.bytes - queued).min(payload * batch as u64);
        lens.clear();
        lens.extend(std::iter::repeat_n(
            payload as usize,
            (n / payload) as usize,
        ));
        if n % payload > 0 {
            lens.push((n % payload) as usize);
        }
        let mut failed = None;
        let at = queued;
        let r = sock.send_batch_with(&lens, |i, b| {
            if failed.is_none() {
                failed = source.fill(at + i as u64 * payload, b).err();
            }
        });
        if let Some(e) = failed {
            return Err(e);
        }
        match r {
            Ok(k) => {
                queued += lens.iter().take(k).map(|&l| l as u64).sum::<u64>();
            }
            // The write timeout: the queue is still full.
            Err(e) if e.kind() == ErrorKind::WouldBlock => {}
            Err(e) => return Err(TtcpError::io("send", e)),
        }
        tr.tick(&sock, spec.dst, spec.bytes, queued)?;
    }
    // Drive until everything that left is resolved (or the limits).
    let mut drained = false;
    if !limited {
        let drain_end = Instant::now() + DRAIN_LIMIT;
        let deadline = limit_at.map_or(drain_end, |l| l.min(drain_end));
        loop {
            sock.drive().map_err(io("drive"))?;
            tr.tick(&sock, spec.dst, spec.bytes, queued)?;
            if resolved(&sock, cm) {
                drained = true;
                break;
            }
            let now = Instant::now();
            if now >= deadline {
                limited = limit_at.is_some_and(|l| now >= l);
                break;
            }
            let wait = sock
                .next_timeout()
                .map_err(io("next timeout"))?
                .unwrap_or(POLL_MAX)
                .min(POLL_MAX)
                .min(deadline.saturating_duration_since(now));
            wait_fd(&sock, PollFlags::IN, wait)?;
        }
    }
    let end = Instant::now();
    let st = sock.stats();
    tr.sent
        .push((end.saturating_duration_since(t0).as_secs_f64(), st.sent));
    let srtt_s = sock
        .estimate()
        .ok()
        .and_then(|e| e.srtt)
        .map(|d| d.as_secs_f64());
    let report = done(&ctl, nonce)?;
    drop(sock);
    let estimate = (st.acked * payload).min(queued);
    let bytes = report.map_or(estimate, |r| r.0);
    let seconds = end.saturating_duration_since(t0).as_secs_f64();
    if spec.progress_interval.is_some() {
        tr.progress.push(ProgressSample { t: seconds, bytes });
    }
    let p = st.proto;
    let detail = CcUdpDetail {
        payload: u32::try_from(payload).unwrap_or(u32::MAX),
        datagrams_sent: st.sent,
        acked: st.acked,
        lost: st.lost,
        state: p.state.to_owned(),
        syns: p.syns,
        probes: p.probes.0,
        responses: p.probes.1,
        resets: p.resets,
        fallbacks: p.fallbacks,
        cm_sent: p.cm_sent,
        cm_lost: p.cm_lost,
        loss_estimate: (p.cm_sent > 0).then(|| p.cm_lost as f64 / p.cm_sent as f64),
        acks_received: st.acks_received,
        srtt_s,
        receiver_bytes: report.map(|r| r.0),
        receiver_datagrams: report.map(|r| r.1),
        receiver_restarts: report.map_or(0, |r| r.2),
        peak_send_bps: tr.peak_bps(),
        sent_progress: tr
            .sent
            .iter()
            .map(|&(t, n)| ProgressSample {
                t,
                bytes: n * tr.wire,
            })
            .collect(),
        drained,
    };
    Ok(Summary {
        transport: Transport::CcUdp,
        role: Role::Sender,
        local: local.to_string(),
        peer: spec.dst.to_string(),
        bytes,
        seconds,
        throughput_bps: throughput(bytes, seconds),
        retransmissions: 0,
        cpu_s: cm_clock::thread_cpu().saturating_sub(cpu0).as_secs_f64(),
        start_s: cm_clock::secs_since_epoch(t0),
        end_s: cm_clock::secs_since_epoch(end),
        start_unix_s: start_unix,
        complete: !limited && queued == spec.bytes && st.queued_bytes == 0,
        progress: tr.progress,
        tcpcm: None,
        ccudp: Some(detail),
    })
}
