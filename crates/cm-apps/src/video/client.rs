//! The NACK-based video client: it acknowledges the server's CC-UDP data
//! about once per RTT (`AckState`), samples the bottleneck from the
//! server's packet bunches (`BunchSampler`, on the kernel's arrival stamps,
//! `cm_udp::recv_stamped`), NACKs
//! base packets that are missing before their playout deadline, and counts
//! the pictures that freeze (base packet late or lost, iscc §VI-C).

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::{AsFd, BorrowedFd};
use std::time::{Duration, Instant};

use cm_core::{BunchSampler, Bytes};
use cm_force::proxy::{ProxyError, Relay, setup};
use cm_transport::ccudp::receiver::{AckPolicy, AckState, Arrival};
use cm_transport::ccudp::wire::{self, Packet};
use serde::Serialize;

use super::{Kind, Piece, Report};

/// IP and UDP header bytes: the samples count IP-level bytes (iscc §VI-B).
const HEADERS: usize = 28;

/// The client's settings.
#[derive(Clone, Debug)]
pub struct VideoClientConfig {
    /// Where to listen.
    pub listen: SocketAddr,
    /// The longest time between its acknowledgements and reports; it
    /// reports once per the server's RTT when that is shorter (at most
    /// once per millisecond).
    pub report: Duration,
    /// Its playout delay (as the server's).
    pub playout: Duration,
    /// Stop when nothing has arrived for this long after the first packet.
    pub idle: Duration,
    /// Hold feedback back: acknowledge and report after this many new
    /// packets or after `report`, whichever comes first (the delayed
    /// feedback of cm-implementation-linux Fig 10, min(500 acks, 2 s));
    /// the server's RTT is then not used. `None`: about once per RTT.
    pub batch: Option<u32>,
}

/// One second of the stream.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct VideoSecond {
    /// Seconds since the first packet.
    pub t: u32,
    /// IP-level bits per second that arrived.
    pub goodput_bps: f64,
    /// Pictures (base packets) whose deadline fell in this second.
    pub pictures: u32,
    /// Of those, frozen.
    pub frozen: u32,
}

/// The client's report.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct VideoClientReport {
    /// Video packets that arrived (duplicates not counted).
    pub packets: u64,
    /// Datagrams that were not the session's video packets.
    pub malformed: u64,
    /// Data datagrams the server numbered up to the newest that arrived.
    pub expected: u64,
    /// Packet loss: 1 − packets / expected.
    pub loss: f64,
    /// Pictures whose deadline passed.
    pub pictures: u64,
    /// Of those, frozen (base packet missing at its deadline).
    pub frozen: u64,
    /// `frozen / pictures`.
    pub frozen_fraction: f64,
    /// Base packets that arrived only after a NACK.
    pub recovered: u64,
    /// NACKs sent.
    pub nacks: u64,
    /// Capacity samples taken and returned.
    pub samples: u64,
    /// The median sample, bit/s.
    pub median_sample_bps: Option<f64>,
    /// Per second.
    pub seconds: Vec<VideoSecond>,
}

/// The client; drive it with [`cm_force::proxy::run_all`].
pub struct VideoClient {
    cfg: VideoClientConfig,
    sock: UdpSocket,
    session: Option<u16>,
    acks: Option<AckState>,
    /// When the next ack and report are due, and the server's RTT.
    next_report: Option<Instant>,
    rtt: Duration,
    /// New packets since the last ack.
    unreported: u32,
    sampler: BunchSampler,
    /// Samples not yet reported, bytes/s; and all of them.
    samples: (Vec<u64>, Vec<u64>),
    /// Base packets arrived (index), not yet past their deadline.
    base: BTreeSet<u32>,
    /// When each missing base packet was last NACKed.
    nacked: BTreeMap<u32, Instant>,
    /// The next picture to judge, and the stream's clock from the headers.
    next_picture: u32,
    made: u32,
    clock: Option<(u64, u64)>,
    highest_seq: Option<u64>,
    first: Option<Instant>,
    last: Option<Instant>,
    /// Per second since the first packet: bytes, pictures, frozen.
    by_second: Vec<(u64, u32, u32)>,
    report: VideoClientReport,
    buf: Vec<u8>,
}

impl VideoClient {
    /// Listen on `cfg.listen`.
    pub fn bind(cfg: VideoClientConfig) -> Result<VideoClient, ProxyError> {
        let sock = setup(
            format!("binding {}", cfg.listen),
            UdpSocket::bind(cfg.listen),
        )?;
        setup("non-blocking", sock.set_nonblocking(true))?;
        setup("kernel timestamps", cm_udp::enable_timestamps(&sock))?;
        Ok(VideoClient {
            cfg,
            sock,
            session: None,
            acks: None,
            next_report: None,
            rtt: Duration::ZERO,
            unreported: 0,
            sampler: BunchSampler::new(),
            samples: (Vec::new(), Vec::new()),
            base: BTreeSet::new(),
            nacked: BTreeMap::new(),
            next_picture: 0,
            made: 0,
            clock: None,
            highest_seq: None,
            first: None,
            last: None,
            by_second: Vec::new(),
            report: VideoClientReport::default(),
            buf: vec![0u8; 65_536],
        })
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.sock.local_addr()
    }

    /// Every capacity sample it took, bit/s, in order (iscc Fig 5's
    /// estimates).
    pub fn samples_bps(&self) -> Vec<f64> {
        self.samples.1.iter().map(|&b| b as f64 * 8.0).collect()
    }

    /// What it has seen so far.
    pub fn report(&self) -> VideoClientReport {
        let mut r = self.report.clone();
        r.expected = self.highest_seq.map_or(0, |h| h + 1);
        r.loss = if r.expected > 0 {
            1.0 - (r.packets as f64 / r.expected as f64).min(1.0)
        } else {
            0.0
        };
        r.frozen_fraction = if r.pictures > 0 {
            r.frozen as f64 / r.pictures as f64
        } else {
            0.0
        };
        r.samples = self.samples.1.len() as u64;
        let mut s = self.samples.1.clone();
        s.sort_unstable();
        r.median_sample_bps = s.get(s.len() / 2).map(|&b| b as f64 * 8.0);
        r.seconds = self
            .by_second
            .iter()
            .enumerate()
            .map(|(t, &(bytes, pictures, frozen))| VideoSecond {
                t: t as u32,
                goodput_bps: bytes as f64 * 8.0,
                pictures,
                frozen,
            })
            .collect();
        r
    }

    fn receive(&mut self) -> Result<(), ProxyError> {
        loop {
            let (n, from, arrived_ns) = match cm_udp::recv_stamped(&self.sock, &mut self.buf) {
                Ok(d) => (d.len, d.from, d.arrived_ns),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => continue,
                Err(e) => return Err(e.into()),
            };
            let now = Instant::now();
            let Ok(Packet::Data { header, payload }) = wire::decode(&self.buf[..n]) else {
                self.report.malformed += 1;
                continue;
            };
            let Some(from) = from else {
                self.report.malformed += 1;
                continue;
            };
            let Some(piece) = Piece::decode(payload) else {
                self.report.malformed += 1;
                continue;
            };
            match self.session {
                None => {
                    // The first video packet names the server.
                    setup("connecting to the server", self.sock.connect(from))?;
                    self.session = Some(header.session);
                    // Acks on the client's own clock (`take_ack`), never
                    // by count.
                    self.acks = Some(AckState::new(AckPolicy::Every(u32::MAX)));
                    self.first = Some(now);
                    self.next_report = Some(now + self.period());
                }
                Some(s) if s != header.session => {
                    self.report.malformed += 1;
                    continue;
                }
                Some(_) => {}
            }
            let Some(acks) = self.acks.as_mut() else {
                continue;
            };
            if acks.on_data(&header, n, cm_clock::now()) == Arrival::Duplicate {
                continue;
            }
            self.last = Some(now);
            self.report.packets += 1;
            self.unreported = self.unreported.saturating_add(1);
            self.highest_seq = Some(self.highest_seq.map_or(header.seq, |h| h.max(header.seq)));
            self.second(now).0 += (n + HEADERS) as u64;
            let t = piece.tag;
            let wire_len = Bytes((n + HEADERS) as u64);
            // The kernel's arrival stamp, so the bunch's spacing does not
            // include this thread's wake-up latency.
            let at =
                cm_core::Instant::from_micros(arrived_ns.unwrap_or_else(crate::unix_ns) / 1_000);
            if let Some(s) = self
                .sampler
                .on_packet(at, t.burst, t.index, t.len, wire_len)
            {
                self.samples.0.push(s.bytes_per_sec());
                self.samples.1.push(s.bytes_per_sec());
            }
            self.clock = Some((piece.start_ns, u64::from(piece.interval_us) * 1_000));
            self.rtt = Duration::from_micros(u64::from(piece.rtt_us));
            self.made = self.made.max(piece.made);
            match piece.kind {
                // A base packet past its picture's judgement is of no use.
                Kind::Base(i) if i >= self.next_picture => {
                    self.base.insert(i);
                }
                Kind::Base(_) => {}
                Kind::Resent(i) => {
                    if i >= self.next_picture && self.base.insert(i) {
                        self.report.recovered += 1;
                    }
                }
                Kind::Enhancement => {}
            }
        }
    }

    /// The counters of the second `now` falls in.
    fn second(&mut self, now: Instant) -> &mut (u64, u32, u32) {
        let t = self
            .first
            .map_or(0, |f| now.duration_since(f).as_secs() as usize);
        if self.by_second.len() <= t {
            self.by_second.resize(t + 1, (0, 0, 0));
        }
        &mut self.by_second[t]
    }

    /// The time between reports: the server's RTT, within 1 ms and the
    /// configured period.
    fn period(&self) -> Duration {
        if self.rtt.is_zero() || self.cfg.batch.is_some() {
            return self.cfg.report;
        }
        self.rtt.clamp(
            Duration::from_millis(1),
            self.cfg.report.max(Duration::from_millis(1)),
        )
    }

    /// The playout deadline of picture `i`, ns since the Unix epoch.
    fn deadline_ns(&self, i: u32) -> Option<u64> {
        let (start, interval) = self.clock?;
        Some(start + u64::from(i) * interval + self.cfg.playout.as_nanos() as u64)
    }

    /// Judge the pictures whose deadline has passed.
    fn play(&mut self) {
        let now_ns = crate::unix_ns();
        while self.next_picture < self.made {
            let Some(d) = self.deadline_ns(self.next_picture) else {
                return;
            };
            if d > now_ns {
                return;
            }
            let i = self.next_picture;
            let frozen = !self.base.remove(&i);
            self.nacked.remove(&i);
            self.report.pictures += 1;
            self.report.frozen += u64::from(frozen);
            let sec = self.second(Instant::now());
            sec.1 += 1;
            sec.2 += u32::from(frozen);
            self.next_picture += 1;
        }
    }

    /// At each report period: the ack, then the NACKs and samples.
    fn send_reports(&mut self) -> Result<(), ProxyError> {
        let wall = Instant::now();
        let full = self.cfg.batch.is_some_and(|b| self.unreported >= b);
        if !full && self.next_report.is_none_or(|t| t > wall) {
            return Ok(());
        }
        self.next_report = Some(wall + self.period());
        self.unreported = 0;
        let Some(acks) = self.acks.as_mut() else {
            return Ok(());
        };
        let Some(ack) = acks.take_ack(cm_clock::now()) else {
            return Ok(());
        };
        send(&self.sock, &ack.encode())?;
        // Missing base packets, NACKed again no sooner than two periods on.
        let again = self.period() * 2;
        let nacks: Vec<u32> = (self.next_picture..self.made)
            .filter(|i| !self.base.contains(i))
            .filter(|i| {
                self.nacked
                    .get(i)
                    .is_none_or(|t| wall.duration_since(*t) >= again)
            })
            .take(super::REPORT_MAX)
            .collect();
        for &i in &nacks {
            self.nacked.insert(i, wall);
        }
        self.report.nacks += nacks.len() as u64;
        if !nacks.is_empty() || !self.samples.0.is_empty() {
            let r = Report {
                samples: std::mem::take(&mut self.samples.0),
                nacks,
            };
            send(&self.sock, &r.encode())?;
        }
        Ok(())
    }
}

/// Send on the connected socket; a full buffer or a refused port loses
/// the datagram, like the network would.
fn send(sock: &UdpSocket, b: &[u8]) -> Result<(), ProxyError> {
    match sock.send(b) {
        Ok(_) => Ok(()),
        Err(e) if crate::vat::is_transient(&e) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

impl Relay for VideoClient {
    fn step(&mut self) -> Result<(), ProxyError> {
        self.receive()?;
        self.play();
        self.send_reports()
    }

    fn wake(&mut self) -> Result<Duration, ProxyError> {
        let mut t = Duration::from_millis(20);
        if let Some(at) = self.next_report {
            t = t.min(at.saturating_duration_since(Instant::now()));
        }
        Ok(t)
    }

    /// Nothing has arrived for the idle time since the last packet.
    fn finished(&self) -> bool {
        self.last.is_some_and(|l| l.elapsed() >= self.cfg.idle)
    }

    fn fds(&self) -> Vec<BorrowedFd<'_>> {
        vec![self.sock.as_fd()]
    }
}
