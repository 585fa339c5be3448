//! The vat sender (cm-implementation-linux §3.6, Fig 2): a CBR source, the
//! [`Policer`], the application buffer ([`MaxQueue`]) and an
//! [`AlfChannel`]: while the buffer holds a frame the sender keeps one
//! request outstanding, and at each grant it sends from the buffer's head
//! as many frames as the grant's bytes hold, so no frame waits anywhere
//! but in the buffer (vat "needs to act like an ALF application", §3.6).

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::{AsFd, BorrowedFd};
use std::time::{Duration, Instant};

use cm_force::proxy::{ProxyError, Relay, setup};
use cm_transport::ccudp::wire::DATA_HEADER_LEN;
use cm_transport::maxq::MaxQueue;
use libcm::ccudp::SharedCm;

use crate::alf::AlfChannel;
use serde::Serialize;

use super::samples::Samples;
use super::{End, Frame, Policer, Transport, VatConfig};

/// What the sender did.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct SenderReport {
    /// Frames the source made.
    pub made: u64,
    /// Frames the policer dropped.
    pub policed: u64,
    /// Frames the full buffer dropped.
    pub buffer_drops: u64,
    /// Frames handed to the socket.
    pub sent: u64,
    /// Frames still in the buffer at the end (never sent).
    pub left: u64,
    /// Mean wait in the application buffer, ms.
    pub mean_buffer_ms: f64,
    /// 95th percentile of the wait in the application buffer, ms: the
    /// part of the one-way delay that the buffer's policy decides.
    pub p95_buffer_ms: f64,
    /// Frames the receiver acknowledged (through the CM).
    pub acked: u64,
    /// Channel datagrams declared lost in the network (through the CM).
    pub lost: u64,
    /// Retransmission timeouts of the channel (through the CM).
    pub timeouts: u64,
    /// The policer's rate at the end, bytes/s (through the CM).
    pub policer_rate: Option<f64>,
}

/// Copies of the [`End`] message the sender sends, one per grant through
/// the CM (each can be lost like any datagram; RTCP's BYE is as
/// unreliable, RFC 3550 §6.6).
pub const END_COPIES: u8 = 3;
/// How long the sender tries to get its end messages out once the buffer
/// is empty; then it finishes regardless (its receiver stops on its idle
/// timer instead).
pub const END_WAIT: Duration = Duration::from_secs(1);

enum Channel {
    Cm(Box<AlfChannel>),
    Udp(UdpSocket),
}

/// The sender; drive it with [`cm_force::proxy::run_all`] (or
/// [`Relay::step`] in a loop of your own) until [`VatSender::done`].
pub struct VatSender {
    cm: SharedCm,
    cfg: VatConfig,
    channel: Channel,
    buffer: MaxQueue<Vec<u8>>,
    policer: Policer,
    start: Instant,
    next_frame: Instant,
    seq: u64,
    report: SenderReport,
    /// Sent frames' waits in the buffer, ms.
    waits_ms: Samples,
    /// End messages sent.
    ends: u8,
    /// When the last frame was made and the buffer found empty.
    emptied: Option<Instant>,
}

impl VatSender {
    /// A sender to `to`. `cm` is the CM its flow joins (unused over
    /// [`Transport::Udp`]).
    pub fn connect(cm: &SharedCm, to: SocketAddr, cfg: VatConfig) -> Result<VatSender, ProxyError> {
        cfg.check().map_err(|e| ProxyError::Setup {
            what: "vat settings".into(),
            error: io::Error::new(io::ErrorKind::InvalidInput, e),
        })?;
        let any: SocketAddr = if to.is_ipv4() {
            SocketAddr::from(([0, 0, 0, 0], 0))
        } else {
            SocketAddr::from(([0u16; 8], 0))
        };
        let channel = match cfg.transport {
            Transport::Cm => {
                let mut c = cm.try_borrow_mut().map_err(|_| ProxyError::Setup {
                    what: "the CM is in use".into(),
                    error: io::Error::other("borrowed"),
                })?;
                Channel::Cm(Box::new(setup(
                    "opening the channel",
                    AlfChannel::open(&mut c, to),
                )?))
            }
            Transport::Udp => {
                let s = setup("binding", UdpSocket::bind(any))?;
                setup("connecting", s.connect(to))?;
                setup("non-blocking", s.set_nonblocking(true))?;
                Channel::Udp(s)
            }
        };
        let depth = 2 * (cfg.frame_bytes + DATA_HEADER_LEN);
        let now = Instant::now();
        Ok(VatSender {
            cm: SharedCm::clone(cm),
            buffer: MaxQueue::new(cfg.buffer, cfg.overflow),
            policer: Policer::new(cfg.policer_window, depth),
            channel,
            start: now,
            next_frame: now,
            seq: 0,
            report: SenderReport::default(),
            waits_ms: Samples::new(),
            ends: 0,
            emptied: None,
            cfg,
        })
    }

    /// Whether the source has made its last frame.
    pub fn done(&self) -> bool {
        self.next_frame.saturating_duration_since(self.start) >= self.cfg.duration
    }

    /// What it has done so far.
    pub fn report(&self) -> SenderReport {
        let mut r = self.report.clone();
        let q = self.buffer.stats();
        r.buffer_drops = q.dropped;
        r.left = self.buffer.len() as u64;
        r.mean_buffer_ms = q.mean_wait().map_or(0.0, |d| d.as_secs_f64() * 1e3);
        r.p95_buffer_ms = self.waits_ms.stats().p95_ms;
        if let Channel::Cm(c) = &self.channel {
            let s = c.counters();
            (r.acked, r.lost, r.timeouts) = (s.acked, s.lost, s.timeouts);
            r.policer_rate = self.policer.rate();
        }
        r
    }

    /// Make the frames that are due; through the CM, police and buffer them.
    fn make_frames(&mut self) -> Result<(), ProxyError> {
        let now = Instant::now();
        while self.next_frame <= now && !self.done() {
            let late = now.saturating_duration_since(self.next_frame);
            let made_ns = crate::unix_ns().saturating_sub(late.as_nanos() as u64);
            let frame = Frame {
                seq: self.seq,
                made_ns,
            }
            .encode(self.cfg.frame_bytes);
            self.seq += 1;
            self.report.made += 1;
            self.next_frame += self.cfg.frame_interval;
            match &mut self.channel {
                Channel::Udp(s) => match s.send(&frame) {
                    Ok(_) => self.report.sent += 1,
                    // A full socket buffer or an ICMP error: the frame is lost.
                    Err(e) if is_transient(&e) => {}
                    Err(e) => return Err(e.into()),
                },
                Channel::Cm(c) => {
                    let rate = self
                        .cm
                        .borrow_mut()
                        .query(c.flow())?
                        .rate
                        .map(|r| r.bytes_per_sec() as f64);
                    self.policer.observe(cm_clock::now(), rate);
                    if self.cfg.policer && !self.policer.admit(frame.len() + DATA_HEADER_LEN) {
                        self.report.policed += 1;
                        continue;
                    }
                    // A full buffer drops (head or tail: `VatConfig::check`
                    // refuses `Block`); the queue counts it.
                    let _ = self.buffer.push(cm_clock::now(), frame);
                }
            }
        }
        Ok(())
    }

    /// Serve the channel: at each grant send frames from the buffer's head
    /// while the grant has room (declining if the buffer emptied), and keep
    /// a request outstanding while the buffer holds a frame. At the end,
    /// send the [`End`] message: through the CM one copy per drive, each
    /// at a grant; over plain UDP all copies at once.
    fn feed(&mut self) -> Result<(), ProxyError> {
        let end = self.ending().then_some(End {
            made: self.report.made,
        });
        let Channel::Cm(c) = &mut self.channel else {
            if let (Channel::Udp(s), Some(e)) = (&self.channel, end) {
                let bytes = e.encode();
                for _ in 0..END_COPIES {
                    match s.send(&bytes) {
                        Ok(_) => {}
                        Err(e) if is_transient(&e) => {}
                        Err(e) => return Err(e.into()),
                    }
                }
                self.ends = END_COPIES;
            }
            return Ok(());
        };
        let mut cm = self.cm.borrow_mut();
        let (buffer, sent, waits) = (&mut self.buffer, &mut self.report.sent, &mut self.waits_ms);
        // One end message per drive, so that the copies go at different
        // grants rather than back to back.
        let (mut end, ends) = (end, &mut self.ends);
        c.drive(&mut cm, |_, room| {
            let Some(front) = buffer.front() else {
                let e = end.take().filter(|_| room >= super::END_BYTES)?;
                *ends += 1;
                return Some(e.encode());
            };
            // Every frame is one size, so one that does not fit ends the
            // grant; the next still goes first (the buffer keeps its order).
            if front.len() > room {
                return None;
            }
            let (frame, wait) = buffer.pop(cm_clock::now())?;
            *sent += 1;
            waits.push(wait.as_micros() as f64 / 1e3);
            Some(frame)
        })?;
        if !self.buffer.is_empty() || ends_due(self.ends, self.emptied) {
            c.request(&mut cm)?;
        }
        Ok(())
    }

    /// Whether the source is done, the buffer empty, and end messages are
    /// still to be sent (within [`END_WAIT`]).
    fn ending(&mut self) -> bool {
        if !(self.done() && self.buffer.is_empty()) {
            return false;
        }
        self.emptied.get_or_insert_with(Instant::now);
        ends_due(self.ends, self.emptied)
    }
}

/// End messages remain to be sent (`ends` of [`END_COPIES`]) and
/// [`END_WAIT`] has not passed since the buffer was found empty at the end
/// (`emptied`).
fn ends_due(ends: u8, emptied: Option<Instant>) -> bool {
    ends < END_COPIES && emptied.is_some_and(|t| t.elapsed() < END_WAIT)
}

/// Errors that lose one datagram, not the session.
pub(crate) fn is_transient(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::ConnectionRefused
    ) || e.raw_os_error() == Some(rustix::io::Errno::NOBUFS.raw_os_error())
}

impl Relay for VatSender {
    fn step(&mut self) -> Result<(), ProxyError> {
        self.make_frames()?;
        self.feed()
    }

    fn wake(&mut self) -> Result<Duration, ProxyError> {
        let mut t = if self.done() {
            // Only grants (and the end messages' deadline) remain.
            Duration::from_millis(20)
        } else {
            self.next_frame.saturating_duration_since(Instant::now())
        };
        if let Channel::Cm(c) = &self.channel {
            if let Some(d) = c.next_timeout() {
                t = t.min(d);
            }
        }
        Ok(t)
    }

    /// The last frame is made, the buffer is empty, and the end messages
    /// are sent (or [`END_WAIT`] passed trying).
    fn finished(&self) -> bool {
        self.done()
            && self.buffer.is_empty()
            && self.emptied.is_some()
            && !ends_due(self.ends, self.emptied)
    }

    fn fds(&self) -> Vec<BorrowedFd<'_>> {
        match &self.channel {
            Channel::Cm(c) => vec![c.as_fd()],
            Channel::Udp(s) => vec![s.as_fd()],
        }
    }
}
