//! The NACK-based video server: an [`AlfChannel`] on a macroflow running
//! the configured controller, asking for its grants a bunch at a time
//! (iscc §VI-B) and choosing each packet at the grant: a NACKed base
//! packet, else a due base packet, else enhancement data up to the top
//! rate. The client's reports bring the NACKs and the capacity samples.

use std::collections::VecDeque;
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsFd, BorrowedFd};
use std::time::{Duration, Instant};

use cm_core::{BurstSchedule, Bytes, Rate};
use cm_force::proxy::{ProxyError, Relay, setup};
use cm_transport::ccudp::wire::DATA_HEADER_LEN;
use libcm::ccudp::SharedCm;
use serde::Serialize;

use super::{Kind, PIECE_HEADER, Piece, Report, VideoConfig};
use crate::alf::{AlfChannel, REQUEST_RETRY};

/// The pause between bunches when the CM has no rate yet.
const NO_RATE_GAP: Duration = Duration::from_millis(100);

/// What the server did.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct VideoServerReport {
    /// Base packets sent the first time.
    pub base: u64,
    /// Base packets sent again after a NACK.
    pub resent: u64,
    /// NACKs that came too late to help (past the playout deadline).
    pub late_nacks: u64,
    /// Enhancement packets sent.
    pub enhancement: u64,
    /// Capacity samples the client returned.
    pub samples: u64,
    /// Client datagrams that were neither acks nor reports.
    pub malformed: u64,
    /// Datagrams the acknowledgements resolved as received.
    pub acked: u64,
    /// Datagrams the acknowledgements resolved as lost.
    pub lost: u64,
    /// Retransmission timeouts (no feedback for an RTO).
    pub timeouts: u64,
    /// The macroflow's capacity estimate at the end, bit/s.
    pub capacity_bps: Option<f64>,
    /// The CM's rate at the end, bit/s.
    pub rate_bps: Option<f64>,
}

/// The server; drive it with [`cm_force::proxy::run_all`] until
/// [`Relay::finished`].
pub struct VideoServer {
    cm: SharedCm,
    channel: AlfChannel,
    /// When the last bunch was asked for, once it is complete (`None`:
    /// one is under way, or none was yet).
    last_burst: Option<Instant>,
    /// When the next bunch may be asked for, at the CM's rate now.
    next_burst: Option<Instant>,
    /// When the bunch under way was asked for.
    asked: Option<Instant>,
    source: Source,
    /// `(seconds since the start, cm_query's rate in bit/s)` every
    /// [`TRACE_EVERY`] (0 before the CM has a rate).
    trace: Vec<(f64, f64)>,
}

/// How often the server records `cm_query`'s rate.
const TRACE_EVERY: Duration = Duration::from_millis(50);

/// The layered source and its bunch numbering.
struct Source {
    cfg: VideoConfig,
    bursts: BurstSchedule,
    start: Instant,
    start_ns: u64,
    interval: Duration,
    /// Base packets made so far.
    made: u32,
    nacks: VecDeque<u32>,
    /// Enhancement bytes the top rate allows now, and when it was refilled.
    credit: (f64, Instant),
    payload: usize,
    report: VideoServerReport,
}

impl VideoServer {
    /// A server streaming to `to` on a new flow of `cm`, whose macroflow
    /// it switches to `cfg.controller`.
    pub fn connect(
        cm: &SharedCm,
        to: SocketAddr,
        cfg: VideoConfig,
    ) -> Result<VideoServer, ProxyError> {
        let invalid = |e: String| ProxyError::Setup {
            what: "video settings".into(),
            error: io::Error::new(io::ErrorKind::InvalidInput, e),
        };
        cfg.check().map_err(invalid)?;
        let bursts = BurstSchedule::new(cfg.burst).map_err(|e| invalid(e.to_string()))?;
        let mut c = cm.try_borrow_mut().map_err(|_| ProxyError::Setup {
            what: "the CM is in use".into(),
            error: io::Error::other("borrowed"),
        })?;
        let mut channel = setup("opening the channel", AlfChannel::open(&mut c, to))?;
        if let Some(hold) = cfg.feedback_hold {
            channel.set_feedback_hold(hold);
        }
        // The client acknowledges on its own clock, once per RTT.
        channel.set_acks_once_per_rtt();
        setup(
            "setting the controller",
            c.set_controller(channel.flow(), &cfg.controller)
                .map_err(io::Error::other),
        )?;
        drop(c);
        let payload = channel.max_payload().saturating_sub(PIECE_HEADER);
        let interval =
            Duration::from_secs_f64((payload + PIECE_HEADER) as f64 * 8.0 / cfg.base_bps);
        let now = Instant::now();
        Ok(VideoServer {
            cm: SharedCm::clone(cm),
            channel,
            last_burst: None,
            next_burst: Some(now),
            asked: None,
            trace: Vec::new(),
            source: Source {
                cfg,
                bursts,
                start: now,
                start_ns: crate::unix_ns(),
                interval,
                made: 0,
                nacks: VecDeque::new(),
                credit: (0.0, now),
                payload,
                report: VideoServerReport::default(),
            },
        })
    }

    /// The rate the CM reported for the flow, every 50 ms:
    /// `(seconds since the start, bit/s)`, 0 before it has one
    /// (cm-implementation-linux Fig 10's "reported bandwidth").
    pub fn rate_trace(&self) -> &[(f64, f64)] {
        &self.trace
    }

    /// What it has done so far.
    pub fn report(&self) -> VideoServerReport {
        let mut r = self.source.report.clone();
        let s = self.channel.counters();
        (r.acked, r.lost, r.timeouts) = (s.acked, s.lost, s.timeouts);
        if let Ok(mut cm) = self.cm.try_borrow_mut() {
            let flow = self.channel.flow();
            r.rate_bps = cm
                .query(flow)
                .ok()
                .and_then(|q| q.rate)
                .map(|r| r.bytes_per_sec() as f64 * 8.0);
            let mf = cm.macroflow_of(flow).ok();
            r.capacity_bps = cm.stat().ok().and_then(|s| {
                s.macroflows
                    .into_iter()
                    .find(|m| Some(m.id) == mf.map(|m| m.to_u64()))
                    .and_then(|m| m.capacity)
                    .map(|c| c as f64 * 8.0)
            });
        }
        r
    }

    /// Reports from the client: samples to the CM, NACKs to the queue.
    fn read_reports(&mut self) -> Result<(), ProxyError> {
        let src = &mut self.source;
        while let Some(d) = self.channel.take_datagram() {
            let Some(r) = Report::decode(&d) else {
                src.report.malformed += 1;
                continue;
            };
            let mut cm = self.cm.borrow_mut();
            for s in r.samples {
                src.report.samples += 1;
                cm.capacity_sample(self.channel.flow(), Rate::from_bytes_per_sec(s))?;
            }
            for i in r.nacks {
                if i < src.made && !src.nacks.contains(&i) {
                    src.nacks.push_back(i);
                }
            }
        }
        Ok(())
    }

    /// Serve grants; when a bunch is complete (or the source ran dry in
    /// it), pause one burst interval at the CM's rate.
    fn serve(&mut self) -> Result<(), ProxyError> {
        let mut cm = self.cm.borrow_mut();
        let src = &mut self.source;
        let mut short = false;
        let rtt = self.channel.srtt();
        self.channel.drive(&mut cm, |_, room| {
            // Pieces are all of one size: one that does not fit the rest
            // of the grant is not made yet.
            if src.payload + PIECE_HEADER > room {
                return None;
            }
            let p = src.next_piece(Instant::now(), rtt);
            short |= p.is_none();
            p
        })?;
        let now = Instant::now();
        if short {
            src.bursts.cut();
        }
        let rate = cm.query(self.channel.flow())?.rate;
        let t = now.duration_since(src.start).as_secs_f64();
        let due = self.trace.len() as f64 * TRACE_EVERY.as_secs_f64();
        if t >= due && t < src.cfg.duration.as_secs_f64() {
            let bps = rate.map_or(0.0, |r| r.bytes_per_sec() as f64 * 8.0);
            self.trace.push((t, bps));
        }
        if self.asked.is_some() && src.bursts.starts_burst() {
            self.last_burst = self.asked.take();
        }
        if let Some(from) = self.last_burst {
            // The pause runs at the rate the CM gives now (it may have
            // grown since the bunch: the first ones go out before any
            // feedback). The source's own top rate paces the bunches when
            // it is the lower: a bunch must find a whole bunch of data.
            let top = Rate::from_bytes_per_sec((src.cfg.top_bps / 8.0) as u64);
            let mtu = Bytes((src.payload + PIECE_HEADER + DATA_HEADER_LEN + 28) as u64);
            let gap = rate
                .map(|r| r.min(top))
                .and_then(|r| src.bursts.burst_interval(r, mtu))
                .map_or(NO_RATE_GAP, |d| Duration::from_micros(d.as_micros()));
            self.next_burst = Some((from + gap).max(now));
        }
        let open = now < src.start + src.cfg.duration;
        let stale = self.asked.is_some_and(|t| t.elapsed() >= REQUEST_RETRY);
        if open && (self.next_burst.is_some_and(|t| t <= now) || stale) {
            let k = u32::from(src.bursts.remaining());
            self.channel.request_mtus(&mut cm, k)?;
            self.asked = Some(now);
            self.last_burst = None;
            self.next_burst = None;
        }
        Ok(())
    }
}

impl Source {
    /// The playout deadline of base packet `i`.
    fn deadline(&self, i: u32) -> Instant {
        self.start + self.interval * i + self.cfg.playout
    }

    /// The next packet for a grant, if the source has one; `rtt` is
    /// the channel's smoothed RTT.
    fn next_piece(&mut self, now: Instant, rtt: Option<Duration>) -> Option<Vec<u8>> {
        let due = self.start + self.interval * self.made;
        let kind = loop {
            match self.nacks.pop_front() {
                Some(i) if self.deadline(i) > now => break Kind::Resent(i),
                Some(_) => self.report.late_nacks += 1,
                None if now >= due && now < self.start + self.cfg.duration => {
                    self.made += 1;
                    break Kind::Base(self.made - 1);
                }
                None => {
                    let (credit, at) = self.credit;
                    let enh_bps = self.cfg.top_bps - self.cfg.base_bps;
                    let cap = f64::from(self.cfg.burst) * 2.0 * self.payload as f64;
                    let credit = (credit + now.duration_since(at).as_secs_f64() * enh_bps / 8.0)
                        .min(cap.max(self.payload as f64));
                    self.credit = (credit, now);
                    if credit < self.payload as f64 {
                        return None;
                    }
                    self.credit.0 -= self.payload as f64;
                    break Kind::Enhancement;
                }
            }
        };
        match kind {
            Kind::Base(_) => self.report.base += 1,
            Kind::Resent(_) => self.report.resent += 1,
            Kind::Enhancement => self.report.enhancement += 1,
        }
        let piece = Piece {
            kind,
            made: self.made,
            tag: self.bursts.next_packet(),
            start_ns: self.start_ns,
            interval_us: self.interval.as_micros().clamp(1, u128::from(u32::MAX)) as u32,
            rtt_us: rtt.map_or(0, |r| r.as_micros().min(u128::from(u32::MAX)) as u32),
        };
        Some(piece.encode(self.payload))
    }
}

impl Relay for VideoServer {
    fn step(&mut self) -> Result<(), ProxyError> {
        self.read_reports()?;
        self.serve()
    }

    fn wake(&mut self) -> Result<Duration, ProxyError> {
        let now = Instant::now();
        let mut t = Duration::from_millis(20);
        if let Some(b) = self.next_burst {
            t = t.min(b.saturating_duration_since(now));
        }
        if let Some(d) = self.channel.next_timeout() {
            t = t.min(d);
        }
        Ok(t)
    }

    /// The stream's time is over.
    fn finished(&self) -> bool {
        self.source.start.elapsed() >= self.source.cfg.duration
    }

    fn fds(&self) -> Vec<BorrowedFd<'_>> {
        vec![self.channel.as_fd()]
    }
}
