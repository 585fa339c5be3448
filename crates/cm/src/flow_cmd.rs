//! `cm flow`: one real CM flow through libcm, for demos and tests.
//!
//! It opens a flow at the CM daemon, starts its own receiver (a thread
//! with a UDP socket on the loopback destination that acknowledges every
//! second datagram and what is left when its socket is drained), and sends
//! for a while using the request/callback API
//! (cm-implementation-linux §2.1.1, "ALF" senders): `cm_request`, a
//! `cmapp_send` callback registered with `cm_register_send` that sends one
//! datagram and answers with `cm_notify`, and the receiver's acks fed back
//! with `cm_update` carrying RTT samples (cm-implementation-linux §3.3:
//! application-level feedback). The datagrams, the acks and the loss rule
//! are CC-UDP's (`cm_transport::ccudp`, as libcm's `CcUdpSocket`). Loopback
//! only: it never sends a packet off the machine.

use std::cell::RefCell;
use std::net::{SocketAddr, UdpSocket};
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration as StdDuration, Instant as StdInstant};

use anyhow::{Context, Result, bail};
use cm_transport::ccudp::feedback::Accounting;
use cm_transport::ccudp::wire::{self, DATA_HEADER_LEN, DataHeader, Packet};
use libcm::{Bytes, Cm, CmEvent, ControllerConfig, Duration, Feedback, FlowId, Rate};
use rustix::event::{PollFd, PollFlags, Timespec, poll};
use serde::Serialize;

use crate::ccudp_acks::{Acks, is_transient, send_ack};
use crate::stat_view::SocketArg;

/// Options of `cm flow`.
#[derive(Debug, clap::Args)]
pub struct FlowArgs {
    /// Destination, a loopback address and port (127.0.0.0/8 or ::1); the
    /// receiver is started there (port 0: any free port).
    pub dst: SocketAddr,
    #[command(flatten)]
    pub socket: SocketArg,
    /// How long to send, in seconds.
    #[arg(long, default_value_t = 10.0)]
    pub secs: f64,
    /// Send no faster than this many Mbit/s (the application's own limit;
    /// default: as fast as the CM grants).
    #[arg(long)]
    pub rate_limit: Option<f64>,
    /// Datagram size in bytes (at most the flow's MTU).
    #[arg(long, default_value_t = 1200)]
    pub size: usize,
    /// Run this controller on the flow's macroflow (and so for every flow
    /// in it), e.g. `iscc:l=2` or `iiad:mode=window` (docs/api.md
    /// "Choosing the controller"); default: what the macroflow runs.
    #[arg(long, value_name = "SPEC")]
    pub controller: Option<ControllerConfig>,
    /// The path's bottleneck capacity in Mbit/s, for the macroflow's
    /// controller (ISCC runs on it; until it has one, AIMD).
    #[arg(long, value_name = "MBIT")]
    pub capacity: Option<f64>,
    /// Print the summary as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Grants asked for and not yet received, at most: enough that the CM's
/// window, not this program, limits an unlimited sender.
const REQUEST_DEPTH: u32 = 32;

/// The application's own token bucket (`--rate-limit`).
#[derive(Debug)]
struct Bucket {
    bytes_per_sec: f64,
    tokens: f64,
    cap: f64,
    at: StdInstant,
}

impl Bucket {
    fn refill(&mut self, now: StdInstant) {
        let dt = now.saturating_duration_since(self.at).as_secs_f64();
        self.tokens = (self.tokens + dt * self.bytes_per_sec).min(self.cap);
        self.at = now;
    }
}

/// What the send callback and the loop share.
struct Sender {
    sock: UdpSocket,
    session: u16,
    size: usize,
    /// CC-UDP's record of every datagram sent and what became of it.
    acct: Accounting,
    requested: u32,
    bucket: Option<Bucket>,
    error: Option<anyhow::Error>,
    buf: Vec<u8>,
    padding: Vec<u8>,
    sent_bytes: u64,
    expired: u64,
}

impl Sender {
    /// `cmapp_send`: send one datagram of at most the granted size, then
    /// `cm_notify` what was sent (0 declines the grant).
    fn on_grant(&mut self, cm: &mut Cm, flow: FlowId, bytes: Bytes) {
        self.requested = self.requested.saturating_sub(1);
        let len = self
            .size
            .min(usize::try_from(bytes.get()).unwrap_or(usize::MAX));
        let mut sent = 0;
        if len >= DATA_HEADER_LEN {
            let now = cm_clock::now();
            let h = DataHeader {
                session: self.session,
                seq: self.acct.next_seq(),
                ts: wire::timestamp(now),
            };
            h.encode(&self.padding[..len - DATA_HEADER_LEN], &mut self.buf);
            match self.sock.send(&self.buf) {
                Ok(n) => {
                    sent = n as u64;
                    self.acct.on_queued(n);
                    self.acct.on_departed(now);
                    self.sent_bytes += sent;
                    if let Some(b) = &mut self.bucket {
                        b.tokens -= sent as f64;
                    }
                }
                // A full socket buffer: decline this grant, ask again.
                Err(e) if is_transient(&e) => {}
                Err(e) => self.error = Some(anyhow::Error::new(e).context("sending a datagram")),
            }
        }
        if let Err(e) = cm.notify(flow, sent) {
            self.error = Some(anyhow::Error::new(e).context("cm_notify"));
        }
    }

    /// Read every ack waiting; return the feedback for `cm_update`: what
    /// each ack resolved (with its RTT sample), and persistent loss if the
    /// retransmission timeout passed without one.
    fn read_acks(&mut self, rbuf: &mut [u8]) -> Result<Vec<Feedback>> {
        let mut fbs = Vec::new();
        loop {
            let n = match self.sock.recv(rbuf) {
                Ok(n) => n,
                Err(e) if is_transient(&e) => break,
                Err(e) => return Err(e).context("reading acks"),
            };
            let Ok(Packet::Ack(ack)) = wire::decode(&rbuf[..n]) else {
                continue;
            };
            if ack.session != self.session {
                continue;
            }
            let now = cm_clock::now();
            fbs.extend(self.acct.on_ack(now, &ack));
        }
        fbs.extend(self.acct.handle_timeout(cm_clock::now()));
        Ok(fbs)
    }

    /// How long until the token bucket allows one more request (zero when
    /// it does now or there is no bucket).
    fn token_wait(&self) -> StdDuration {
        match &self.bucket {
            Some(b) if self.requested < REQUEST_DEPTH => {
                let need = (f64::from(self.requested) + 1.0) * self.size as f64 - b.tokens;
                StdDuration::from_secs_f64((need / b.bytes_per_sec).max(0.0))
            }
            _ => StdDuration::ZERO,
        }
    }

    /// Whether the application has data for one more grant now.
    fn wants_more(&mut self, now: StdInstant) -> bool {
        if self.requested >= REQUEST_DEPTH {
            return false;
        }
        match &mut self.bucket {
            None => true,
            Some(b) => {
                b.refill(now);
                b.tokens >= (f64::from(self.requested) + 1.0) * self.size as f64
            }
        }
    }
}

/// The receiver: a thread acknowledging the datagrams on `addr` (CC-UDP's
/// acks: every second one, and what is left when the socket is drained).
struct Receiver {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: JoinHandle<Result<u64>>,
}

impl Receiver {
    fn spawn(addr: SocketAddr) -> Result<Receiver> {
        let sock =
            UdpSocket::bind(addr).with_context(|| format!("binding the receiver on {addr}"))?;
        sock.set_nonblocking(true)?;
        let addr = sock.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("cm-flow-receiver".into())
            .spawn(move || {
                let mut buf = vec![0u8; 65_536];
                let mut acks = Acks::default();
                while !flag.load(Ordering::Relaxed) {
                    match sock.recv_from(&mut buf) {
                        Ok((n, from)) => {
                            if let Some((to, ack)) =
                                acks.on_datagram(&buf[..n], from, cm_clock::now())
                            {
                                send_ack(&sock, to, &ack)?;
                            }
                        }
                        Err(e) if is_transient(&e) => {
                            for (to, ack) in acks.drained(cm_clock::now()) {
                                send_ack(&sock, to, &ack)?;
                            }
                            crate::wait::readable(&sock, StdDuration::from_millis(50))?;
                        }
                        Err(e) => return Err(e).context("receiver"),
                    }
                }
                Ok(acks.received)
            })?;
        Ok(Receiver { addr, stop, thread })
    }

    fn join(self) -> Result<u64> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread
            .join()
            .map_err(|_| anyhow::anyhow!("receiver thread panicked"))?
    }
}

/// What `cm flow` prints at the end.
#[derive(Debug, Serialize)]
struct Summary {
    flow: u64,
    macroflow: u64,
    /// The controller the macroflow ran at the end.
    controller: String,
    pid: u32,
    dst: SocketAddr,
    secs: f64,
    sent_datagrams: u64,
    sent_bytes: u64,
    acked_datagrams: u64,
    lost_datagrams: u64,
    received_datagrams: u64,
    expired_grants: u64,
    send_mbit: f64,
    rate_mbit: Option<f64>,
    srtt_us: Option<u64>,
    rttvar_us: Option<u64>,
    loss: Option<f64>,
}

fn check(args: &FlowArgs) -> Result<()> {
    if !args.dst.ip().is_loopback() {
        bail!(
            "refusing to send to {}: cm flow only sends on loopback (127.0.0.0/8 or ::1) \
             and never puts traffic on the network",
            args.dst.ip()
        );
    }
    if !(args.secs.is_finite() && args.secs > 0.0 && args.secs <= 86_400.0) {
        bail!("--secs must be a positive number of seconds (at most a day)");
    }
    if let Some(r) = args.rate_limit {
        if !(r.is_finite() && r > 0.0) {
            bail!("--rate-limit must be a positive number of Mbit/s");
        }
    }
    if args.size < DATA_HEADER_LEN || args.size > 65_000 {
        bail!("--size must be between {DATA_HEADER_LEN} and 65000 bytes");
    }
    if let Some(c) = args.capacity {
        if !(c.is_finite() && c > 0.0 && c <= 1e7) {
            bail!("--capacity must be a positive number of Mbit/s");
        }
    }
    Ok(())
}

/// Run `cm flow`.
pub fn run(args: &FlowArgs) -> Result<()> {
    check(args)?;
    let mut cm = args.socket.connect()?;
    let receiver = Receiver::spawn(args.dst)?;
    let dst = receiver.addr;
    let result = send(&mut cm, args, dst);
    let received = receiver.join();
    let mut summary = result?;
    summary.received_datagrams = received?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&summary)?);
    } else {
        print_summary(&summary);
    }
    Ok(())
}

fn send(cm: &mut Cm, args: &FlowArgs, dst: SocketAddr) -> Result<Summary> {
    let local: SocketAddr = if dst.is_ipv4() {
        ([127, 0, 0, 1], 0).into()
    } else {
        (std::net::Ipv6Addr::LOCALHOST, 0).into()
    };
    let sock = UdpSocket::bind(local).context("binding the sender")?;
    sock.connect(dst)?;
    sock.set_nonblocking(true)?;
    let flow = cm
        .open(Some(sock.local_addr()?), dst)
        .context("cm_open at the daemon")?;
    let macroflow = cm.macroflow_of(flow)?.to_u64();
    if let Some(c) = &args.controller {
        cm.set_controller(flow, c).context("cm_set_controller")?;
    }
    if let Some(mbit) = args.capacity {
        // Checked in `check`: positive and at most 10 Tbit/s.
        let bits = (mbit * 1e6).round() as u64;
        cm.set_capacity(flow, Some(Rate::from_bits_per_sec(bits)))
            .context("cm_set_capacity")?;
    }
    let size = args
        .size
        .min(usize::try_from(cm.mtu(flow)?).unwrap_or(usize::MAX));
    let pid = std::process::id();
    eprintln!(
        "cm flow: pid {pid}, flow {} to {dst} (macroflow {macroflow}) at {}, for {} s",
        flow.to_u64(),
        args.socket.path().display(),
        args.secs
    );
    let start = StdInstant::now();
    let bucket = args.rate_limit.map(|mbit| Bucket {
        bytes_per_sec: mbit * 1e6 / 8.0,
        tokens: size as f64,
        // Bursts of at most the request depth or 10 ms of sending.
        cap: (f64::from(REQUEST_DEPTH) * size as f64).max(mbit * 1e6 / 8.0 / 100.0),
        at: start,
    });
    let state = Rc::new(RefCell::new(Sender {
        sock,
        session: (flow.to_u64() & 0xffff) as u16,
        size,
        acct: Accounting::new(),
        requested: 0,
        bucket,
        error: None,
        buf: Vec::with_capacity(size),
        padding: vec![0; size],
        sent_bytes: 0,
        expired: 0,
    }));
    let cb = state.clone();
    cm.register_send(move |cm, f, bytes| cb.borrow_mut().on_grant(cm, f, bytes));
    // Taken once: libcm keeps it readable only while something waits
    // (calls are sent at once, autoflush being on).
    let cm_fd = cm.pollable_fd()?.try_clone_to_owned()?;
    let deadline = start + StdDuration::from_secs_f64(args.secs);
    let mut rbuf = vec![0u8; 2048];
    loop {
        let now = StdInstant::now();
        if now >= deadline {
            break;
        }
        cm.dispatch()?;
        while let Some(ev) = cm.poll_event()? {
            match ev {
                // A grant that arrived after dispatch gathered its events.
                CmEvent::Send { flow, bytes } => state.borrow_mut().on_grant(cm, flow, bytes),
                CmEvent::GrantExpired { .. } => {
                    let mut s = state.borrow_mut();
                    s.expired += 1;
                    s.requested = s.requested.saturating_sub(1);
                }
                CmEvent::FlowReclaimed { .. } => bail!("the CM reclaimed the flow"),
                CmEvent::Error { code, .. } => bail!("the daemon refused a call: {code:?}"),
                _ => {}
            }
        }
        let (fbs, ask) = {
            let mut s = state.borrow_mut();
            if let Some(e) = s.error.take() {
                return Err(e);
            }
            let fbs = s.read_acks(&mut rbuf)?;
            let mut ask = 0;
            while s.wants_more(now) {
                s.requested += 1;
                ask += 1;
            }
            (fbs, ask)
        };
        // One message each for the feedback and the requests (bulk calls,
        // cm-implementation-linux §5).
        if !fbs.is_empty() {
            let batch: Vec<(FlowId, Feedback)> = fbs.into_iter().map(|fb| (flow, fb)).collect();
            cm.bulk_update(&batch)?;
        }
        if ask > 0 {
            cm.bulk_request(&vec![(flow, 1); ask])?;
        }
        let s = state.borrow();
        let mut wait = deadline
            .saturating_duration_since(StdInstant::now())
            .min(StdDuration::from_millis(5));
        if s.requested == 0 && s.bucket.is_some() {
            wait = wait.min(s.token_wait().max(StdDuration::from_micros(50)));
        }
        let mut fds = [
            PollFd::new(&cm_fd, PollFlags::IN),
            PollFd::new(&s.sock, PollFlags::IN),
        ];
        let ts = Timespec {
            tv_sec: 0,
            tv_nsec: i64::from(wait.subsec_nanos()),
        };
        match poll(&mut fds, Some(&ts)) {
            Ok(_) | Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
    let est = cm.query(flow)?;
    let controller = cm
        .stat()?
        .macroflows
        .into_iter()
        .find(|m| m.id == macroflow)
        .map(|m| m.controller)
        .unwrap_or_default();
    cm.close(flow)?;
    let secs = start.elapsed().as_secs_f64();
    let s = state.borrow();
    Ok(Summary {
        flow: flow.to_u64(),
        macroflow,
        controller,
        pid,
        dst,
        secs,
        sent_datagrams: s.acct.departed(),
        sent_bytes: s.sent_bytes,
        acked_datagrams: s.acct.counters.acked,
        lost_datagrams: s.acct.counters.lost,
        received_datagrams: 0,
        expired_grants: s.expired,
        send_mbit: s.sent_bytes as f64 * 8.0 / secs / 1e6,
        rate_mbit: est.rate.map(|r| r.bytes_per_sec() as f64 * 8.0 / 1e6),
        srtt_us: est.srtt.map(Duration::as_micros),
        rttvar_us: est.rttvar.map(Duration::as_micros),
        loss: est.loss,
    })
}

fn print_summary(s: &Summary) {
    let opt = |v: Option<String>| v.unwrap_or_else(|| "-".into());
    println!(
        "flow {} to {} (macroflow {}, {}, pid {}): {:.1} s",
        s.flow, s.dst, s.macroflow, s.controller, s.pid, s.secs
    );
    println!(
        "  sent {} datagrams ({} bytes, {:.2} Mbit/s); acked {}, lost {}, received {}, expired grants {}",
        s.sent_datagrams,
        s.sent_bytes,
        s.send_mbit,
        s.acked_datagrams,
        s.lost_datagrams,
        s.received_datagrams,
        s.expired_grants
    );
    println!(
        "  CM estimate at the end: rate {} Mbit/s, srtt {}, rttvar {}, loss {}",
        opt(s.rate_mbit.map(|r| format!("{r:.2}"))),
        opt(s.srtt_us.map(cm_report::fmt::micros)),
        opt(s.rttvar_us.map(cm_report::fmt::micros)),
        opt(s.loss.map(|l| format!("{:.2}%", l * 100.0))),
    );
}
