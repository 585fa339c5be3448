//! `cm proxy`: the paper's VoIP proxy as a UDP relay pair
//! (transport-selection-middleware §4.3.1). An unmodified application
//! sends its datagrams to the **ingress** on a local port; the ingress
//! carries them through a congestion-controlled channel (CC-UDP,
//! [`libcm::ccudp::CcUdpSocket`], TFRC by default) to the **egress**,
//! which delivers them to the real destination. Replies travel back the
//! same way to the application's address.
//!
//! The ingress holds at most MAXQ datagrams ([`MaxQueue`]) besides the one
//! the CM has been asked to send, and drops from the head (default) or the
//! tail when more arrive: the drops happen at the proxy, early, instead of
//! at the bottleneck. Feedback is the egress's CC-UDP acknowledgements.
//! Garbage sent to the egress is counted and ignored by CC-UDP; a peer
//! that vanishes leaves the channel without acknowledgements, which the
//! CM answers by slowing to its minimum pace, never by blocking the
//! application.

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration as StdDuration, Instant as StdInstant};

use cm_core::controller::ControllerConfig;
use cm_transport::maxq::{MaxQueue, Overflow};
use libcm::ccudp::{Accepting, CcUdpSocket, SharedCm};
use rustix::event::{PollFd, PollFlags, Timespec, poll};
use serde::Serialize;

/// The ingress's settings.
#[derive(Clone, Debug)]
pub struct IngressConfig {
    /// Where the application sends its datagrams.
    pub listen: SocketAddr,
    /// The egress.
    pub egress: SocketAddr,
    /// Datagrams waiting besides the one handed to the CM.
    pub maxq: usize,
    /// What a full queue drops.
    pub overflow: Overflow,
    /// The channel's controller (None: the CM's default).
    pub controller: Option<ControllerConfig>,
}

/// The egress's settings.
#[derive(Clone, Debug)]
pub struct EgressConfig {
    /// Where the ingress sends.
    pub listen: SocketAddr,
    /// The real destination.
    pub deliver: SocketAddr,
}

/// What an ingress did.
#[derive(Clone, Debug, Default, Serialize)]
pub struct IngressReport {
    /// Datagrams the application offered.
    pub offered: u64,
    /// Datagrams handed to the CM (sent, or about to be).
    pub sent: u64,
    /// Datagrams dropped at the proxy (its queue full, or larger than the
    /// channel carries).
    pub dropped_at_proxy: u64,
    /// Mean wait in the proxy's queue, ms.
    pub mean_queue_ms: f64,
    /// Longest wait, ms.
    pub max_queue_ms: f64,
    /// Channel datagrams the egress acknowledged.
    pub acked: u64,
    /// Channel datagrams declared lost in the network.
    pub lost: u64,
    /// Replies relayed back to the application.
    pub replies: u64,
    /// The application's address (replies go there).
    pub app: Option<String>,
}

/// What an egress did.
#[derive(Clone, Debug, Default, Serialize)]
pub struct EgressReport {
    /// Datagrams received from the ingress and delivered.
    pub delivered: u64,
    /// Delivery failures (the destination refused).
    pub deliver_errors: u64,
    /// Datagrams on the channel port that were not CC-UDP (ignored).
    pub malformed: u64,
    /// Replies from the destination carried back.
    pub replies: u64,
    /// Replies dropped (the channel back was full).
    pub replies_dropped: u64,
    /// The ingress's address, once it has sent.
    pub ingress: Option<String>,
}

/// Why a proxy end stopped.
#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    /// A socket could not be set up.
    #[error("{what}: {error}")]
    Setup {
        /// What was being set up.
        what: String,
        /// The error (shown in the message, not as a source, so that a
        /// chain printer does not show it twice).
        error: io::Error,
    },
    /// The CM refused.
    #[error("congestion manager: {0}")]
    Cm(#[from] libcm::CmError),
    /// A socket failed while relaying.
    #[error("relaying: {0}")]
    Io(#[from] io::Error),
}

/// `r`, or the error as a [`ProxyError::Setup`] of `what`.
pub fn setup<T>(what: impl Into<String>, r: io::Result<T>) -> Result<T, ProxyError> {
    r.map_err(|source| ProxyError::Setup {
        what: what.into(),
        error: source,
    })
}

/// Wait for one of `fds`, at most `timeout`, 200 ms, or until `until`.
fn wait(fds: &[BorrowedFd<'_>], timeout: StdDuration, until: Option<StdInstant>) {
    let left = until.map_or(timeout, |u| u.saturating_duration_since(StdInstant::now()));
    let t = timeout.min(left).min(StdDuration::from_millis(200));
    let ts = Timespec {
        tv_sec: t.as_secs() as i64,
        tv_nsec: i64::from(t.subsec_nanos()),
    };
    let mut p: Vec<PollFd<'_>> = fds
        .iter()
        .map(|f| PollFd::from_borrowed_fd(*f, PollFlags::IN))
        .collect();
    let _ = poll(&mut p, Some(&ts));
}

/// One end of the relay, as its event loop sees it.
pub trait Relay {
    /// One round of work; never blocks.
    fn step(&mut self) -> Result<(), ProxyError>;
    /// How long the loop may sleep before [`Relay::step`] has work that
    /// no descriptor announces.
    fn wake(&mut self) -> Result<StdDuration, ProxyError>;
    /// The descriptors whose readiness means work.
    fn fds(&self) -> Vec<BorrowedFd<'_>>;
    /// Whether this end has nothing left to do (a relay never has: it
    /// runs until stopped).
    fn finished(&self) -> bool {
        false
    }
}

/// Relay `all` (ends sharing the CM `cm`, on this thread, so their flows
/// to one host share its macroflow) until `stop` is set, `until` passes or
/// every end is [`Relay::finished`].
pub fn run_all<R: Relay>(
    all: &mut [R],
    cm: &SharedCm,
    stop: &AtomicBool,
    until: Option<StdInstant>,
) -> Result<(), ProxyError> {
    while !stop.load(Ordering::Relaxed) && until.is_none_or(|u| StdInstant::now() < u) {
        if !all.is_empty() && all.iter().all(|r| r.finished()) {
            break;
        }
        let mut t = StdDuration::from_millis(200);
        for r in all.iter_mut() {
            r.step()?;
            t = t.min(r.wake()?);
        }
        let mut c = cm.borrow_mut();
        let cm_fd = c.pollable_fd().ok();
        let mut fds: Vec<BorrowedFd<'_>> = all.iter().flat_map(|r| r.fds()).collect();
        fds.extend(cm_fd);
        wait(&fds, t, until);
    }
    Ok(())
}

/// The ingress end.
pub struct Ingress {
    app: UdpSocket,
    cc: CcUdpSocket,
    cm: SharedCm,
    queue: MaxQueue<Vec<u8>>,
    app_addr: Option<SocketAddr>,
    replies: u64,
    /// The largest payload the channel carries (its MTU less the header).
    max_payload: usize,
    /// Datagrams larger than the channel carries, dropped on arrival.
    oversized: u64,
    /// One datagram's room, reused by every step.
    buf: Vec<u8>,
}

impl Ingress {
    /// Bind the application's port and open the channel to the egress.
    pub fn bind(cm: &SharedCm, cfg: &IngressConfig) -> Result<Ingress, ProxyError> {
        let app = setup(
            format!("binding {}", cfg.listen),
            UdpSocket::bind(cfg.listen),
        )?;
        setup("non-blocking", app.set_nonblocking(true))?;
        let any: SocketAddr = if cfg.egress.is_ipv4() {
            "0.0.0.0:0"
                .parse()
                .map_err(|_| io::Error::other("address"))?
        } else {
            "[::]:0".parse().map_err(|_| io::Error::other("address"))?
        };
        let mut cc = setup("opening the channel", CcUdpSocket::bind(cm, any))?;
        // Feedback is the egress's acknowledgements (the paper's proxy
        // pair), not the CM protocol's probes: see docs/middleware.md.
        cc.set_cm_protocol(false);
        setup(
            format!("connecting to {}", cfg.egress),
            cc.connect(cfg.egress),
        )?;
        setup("non-blocking", cc.set_nonblocking(true))?;
        if let (Some(c), Some(flow)) = (&cfg.controller, cc.flow()) {
            cm.borrow_mut().set_controller(flow, c)?;
        }
        let max_payload = setup("the channel's MTU", cc.max_payload())?;
        Ok(Ingress {
            app,
            cc,
            cm: SharedCm::clone(cm),
            queue: MaxQueue::new(cfg.maxq, cfg.overflow),
            app_addr: None,
            replies: 0,
            max_payload,
            oversized: 0,
            buf: vec![0u8; 65_536],
        })
    }

    /// The application's port.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.app.local_addr()
    }

    /// Nothing of this channel waits in the CM's send queue.
    fn cm_idle(&self) -> bool {
        self.cc.stats().queued_bytes == 0
    }

    /// One round: take the application's datagrams, feed the CM, relay
    /// replies. Never blocks.
    pub fn step(&mut self) -> Result<(), ProxyError> {
        let now = cm_clock::now();
        loop {
            match self.app.recv_from(&mut self.buf) {
                Ok((n, from)) => {
                    self.app_addr = Some(from);
                    if n > self.max_payload {
                        // Larger than the channel carries: dropped here.
                        self.oversized += 1;
                    } else {
                        let _ = self.queue.push(now, self.buf[..n].to_vec());
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                // ICMP errors from earlier replies: not the application's data.
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => continue,
                Err(e) => return Err(e.into()),
            }
        }
        self.cc.drive()?;
        while self.cm_idle() {
            let Some((d, _)) = self.queue.pop(cm_clock::now()) else {
                break;
            };
            match self.cc.send(&d) {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => return Err(e.into()),
            }
        }
        loop {
            match self.cc.recv(&mut self.buf) {
                Ok(n) => {
                    if let Some(a) = self.app_addr {
                        let _ = self.app.send_to(&self.buf[..n], a);
                        self.replies += 1;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }

    /// Relay until `stop` is set or `until` passes.
    pub fn run(&mut self, stop: &AtomicBool, until: Option<StdInstant>) -> Result<(), ProxyError> {
        let cm = SharedCm::clone(&self.cm);
        run_all(std::slice::from_mut(self), &cm, stop, until)
    }

    /// What it has done so far.
    pub fn report(&self) -> IngressReport {
        let q = self.queue.stats();
        let c = self.cc.stats();
        IngressReport {
            offered: q.offered + self.oversized,
            sent: q.sent,
            dropped_at_proxy: q.dropped + self.oversized,
            mean_queue_ms: q.mean_wait().map_or(0.0, |d| d.as_micros() as f64 / 1000.0),
            max_queue_ms: q.max_wait_us as f64 / 1000.0,
            acked: c.acked,
            lost: c.lost,
            replies: self.replies,
            app: self.app_addr.map(|a| a.to_string()),
        }
    }
}

impl Relay for Ingress {
    fn step(&mut self) -> Result<(), ProxyError> {
        Ingress::step(self)
    }

    fn wake(&mut self) -> Result<StdDuration, ProxyError> {
        let t = self
            .cc
            .next_timeout()?
            .unwrap_or(StdDuration::from_millis(200));
        // A datagram waiting for the CM: look again soon.
        Ok(if self.queue.is_empty() {
            t
        } else {
            t.min(StdDuration::from_millis(1))
        })
    }

    fn fds(&self) -> Vec<BorrowedFd<'_>> {
        vec![self.app.as_fd(), self.cc.as_fd()]
    }
}

/// The egress end.
pub struct Egress {
    /// Until the ingress's first datagram the channel's peer is unknown:
    /// the first CC-UDP sender becomes it.
    chan: Accepting,
    cm: SharedCm,
    out: UdpSocket,
    deliver: SocketAddr,
    report: EgressReport,
    /// One datagram's room, reused by every step.
    buf: Vec<u8>,
}

impl Egress {
    /// Bind the channel port and a socket towards the destination.
    pub fn bind(cm: &SharedCm, cfg: &EgressConfig) -> Result<Egress, ProxyError> {
        let chan = setup(
            format!("binding {}", cfg.listen),
            Accepting::bind(cfg.listen),
        )?;
        let any = if cfg.deliver.is_ipv4() {
            "0.0.0.0:0"
        } else {
            "[::]:0"
        };
        let out = setup("opening the delivery socket", UdpSocket::bind(any))?;
        setup("connecting the delivery socket", out.connect(cfg.deliver))?;
        setup("non-blocking", out.set_nonblocking(true))?;
        Ok(Egress {
            chan,
            cm: SharedCm::clone(cm),
            out,
            deliver: cfg.deliver,
            report: EgressReport::default(),
            buf: vec![0u8; 65_536],
        })
    }

    /// The channel port.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.chan.local_addr()
    }

    /// One round: deliver what arrived, carry replies back. Never blocks.
    pub fn step(&mut self) -> Result<(), ProxyError> {
        // Not CC-UDP in front of the first channel datagram: garbage, or
        // a stray datagram (dropped).
        if self.chan.poll(&self.cm)? {
            self.report.malformed += 1;
        }
        let Some(cc) = self.chan.socket() else {
            return Ok(());
        };
        if self.report.ingress.is_none() {
            self.report.ingress = cc.peer_addr().ok().map(|a| a.to_string());
        }
        let buf = &mut self.buf;
        loop {
            match cc.recv(buf) {
                Ok(n) => match self.out.send(&buf[..n]) {
                    Ok(_) => self.report.delivered += 1,
                    Err(_) => self.report.deliver_errors += 1,
                },
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => return Err(e.into()),
            }
        }
        loop {
            match self.out.recv(buf) {
                Ok(n) => match cc.send(&buf[..n]) {
                    Ok(_) => self.report.replies += 1,
                    Err(_) => self.report.replies_dropped += 1,
                },
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                // The destination is not listening (ICMP): nothing to relay.
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => continue,
                Err(e) => return Err(e.into()),
            }
        }
        cc.drive()?;
        self.report.malformed = self.report.malformed.max(cc.stats().malformed);
        Ok(())
    }

    /// Relay until `stop` is set or `until` passes.
    pub fn run(&mut self, stop: &AtomicBool, until: Option<StdInstant>) -> Result<(), ProxyError> {
        let cm = SharedCm::clone(&self.cm);
        run_all(std::slice::from_mut(self), &cm, stop, until)
    }

    /// What it has done so far.
    pub fn report(&self) -> EgressReport {
        self.report.clone()
    }

    /// The destination.
    pub fn destination(&self) -> SocketAddr {
        self.deliver
    }
}

impl Relay for Egress {
    fn step(&mut self) -> Result<(), ProxyError> {
        Egress::step(self)
    }

    fn wake(&mut self) -> Result<StdDuration, ProxyError> {
        Ok(match self.chan.socket() {
            Some(cc) => cc.next_timeout()?.unwrap_or(StdDuration::from_millis(200)),
            None => StdDuration::from_millis(200),
        })
    }

    fn fds(&self) -> Vec<BorrowedFd<'_>> {
        let mut fds = vec![self.out.as_fd()];
        fds.extend(self.chan.fd());
        fds
    }
}
