//! The layered server: ALF (the layer from `cm_query` at each grant) or
//! rate callbacks (the layer from the last `cmapp_update`, frames on the
//! server's clock into a bounded buffer).

use std::collections::VecDeque;
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsFd, BorrowedFd};
use std::time::{Duration, Instant};

use cm_core::Thresholds;
use cm_force::proxy::{ProxyError, Relay, setup};
use libcm::CmEvent;
use libcm::ccudp::{CcUdpSocket, SharedCm};
use serde::Serialize;

use super::{Api, Layers, PACKET_HEADER, Piece};
use crate::alf::AlfChannel;

/// A late ALF server skips to the current frame when it is this many
/// frames behind (the client could not play them in time).
const MAX_LAG_FRAMES: u32 = 12;
/// How long after the stream's end the server still sends what is left.
const DRAIN: Duration = Duration::from_secs(2);
/// The rate server's buffer (a kernel socket buffer's order of size).
const RATE_BUFFER_BYTES: usize = 64 * 1024;
/// The rate server's `cm_thresh`: a callback when the rate falls to 3/4
/// or rises by 4/3 (RTT changes alone are ignored).
const RATE_THRESHOLDS: Thresholds = Thresholds {
    rate_down: 4.0 / 3.0,
    rate_up: 4.0 / 3.0,
    rtt_down: 1e6,
    rtt_up: 1e6,
};

/// What the server did.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ServerReport {
    /// Frames started.
    pub frames: u64,
    /// Packets handed to the network (ALF) or to the buffer (rate).
    pub packets: u64,
    /// Payload bytes in them.
    pub bytes: u64,
    /// Frames skipped because the server fell behind (ALF).
    pub skipped: u64,
    /// Packets the full buffer refused (rate).
    pub buffer_drops: u64,
    /// Changes of layer from one frame to the next.
    pub switches: u64,
    /// Rate callbacks received (rate).
    pub updates: u64,
    /// `(seconds since start, layer)` of every frame.
    pub layers: Vec<(f64, u8)>,
    /// Datagrams the client's acknowledgements reported received.
    pub acked: u64,
    /// Datagrams reported lost to the CM.
    pub lost: u64,
    /// Of those, acknowledged later (reordering or ack loss).
    pub spurious: u64,
    /// Retransmission timeouts of the channel (persistent-loss reports).
    pub timeouts: u64,
}

enum Mode {
    Alf {
        ch: Box<AlfChannel>,
        /// The current frame and its pieces not sent yet (layer order).
        frame: u32,
        pending: VecDeque<(Piece, usize)>,
        frame_layer: Option<u8>,
    },
    Rate {
        cc: Box<CcUdpSocket>,
        layer: usize,
        next_frame: u32,
    },
}

/// The server: one stream to one client; drive it with
/// [`cm_force::proxy::run_all`] until [`Relay::finished`].
pub struct StreamServer {
    cm: SharedCm,
    layers: Layers,
    start: Instant,
    duration: Duration,
    mode: Mode,
    report: ServerReport,
    piece_bytes: usize,
    /// How far ahead of its time the ALF server may send a frame (`None`:
    /// as far ahead as the CM lets it).
    ahead: Option<Duration>,
}

/// The pieces of `frame` at layers `from..=to`.
fn pieces(
    layers: &Layers,
    frame: u32,
    from: usize,
    to: usize,
    piece_bytes: usize,
) -> Vec<(Piece, usize)> {
    let mut v = Vec::new();
    for l in from..=to.min(layers.len().saturating_sub(1)) {
        let bytes = layers.frame_bytes(l);
        let chunks = bytes.div_ceil(piece_bytes).max(1);
        for c in 0..chunks {
            let size = (bytes - c * piece_bytes).min(piece_bytes);
            let p = Piece {
                frame,
                layer: l as u8,
                chunk: c as u16,
                chunks: chunks as u16,
                sent_ns: 0,
            };
            v.push((p, size));
        }
    }
    v
}

impl StreamServer {
    /// A server streaming `layers` to `to` for `duration` with `api`.
    pub fn connect(
        cm: &SharedCm,
        to: SocketAddr,
        layers: Layers,
        api: Api,
        duration: Duration,
    ) -> Result<StreamServer, ProxyError> {
        if layers.is_empty() || layers.fps <= 0.0 {
            return Err(ProxyError::Setup {
                what: "stream layers".into(),
                error: io::Error::new(io::ErrorKind::InvalidInput, "no layers or no frame rate"),
            });
        }
        let (mode, max_payload) = match api {
            Api::Alf => {
                let ch = setup(
                    "opening the channel",
                    AlfChannel::open(&mut cm.borrow_mut(), to),
                )?;
                let m = ch.max_payload();
                let mode = Mode::Alf {
                    ch: Box::new(ch),
                    frame: 0,
                    pending: VecDeque::new(),
                    frame_layer: None,
                };
                (mode, m)
            }
            Api::Rate => {
                let any = if to.is_ipv4() { "0.0.0.0:0" } else { "[::]:0" };
                let mut cc = setup("opening the channel", CcUdpSocket::bind(cm, any))?;
                cc.set_cm_protocol(false);
                setup("connecting", cc.connect(to))?;
                setup("non-blocking", cc.set_nonblocking(true))?;
                setup("the buffer", cc.set_send_queue_limit(RATE_BUFFER_BYTES))?;
                let flow = cc.flow().ok_or_else(|| ProxyError::Setup {
                    what: "the channel's flow".into(),
                    error: io::Error::other("not connected"),
                })?;
                cm.borrow_mut().thresh(flow, RATE_THRESHOLDS)?;
                let m = setup("the channel's MTU", cc.max_payload())?;
                (
                    Mode::Rate {
                        cc: Box::new(cc),
                        layer: 0,
                        next_frame: 0,
                    },
                    m,
                )
            }
        };
        Ok(StreamServer {
            cm: SharedCm::clone(cm),
            layers,
            start: Instant::now(),
            duration,
            mode,
            report: ServerReport::default(),
            piece_bytes: max_payload.saturating_sub(PACKET_HEADER).max(1),
            ahead: Some(Duration::ZERO),
        })
    }

    /// How far ahead of its time the ALF server may send a frame.
    ///
    /// By default (`Some(Duration::ZERO)`) it sends each frame at its
    /// time, as a live source must. `None` sends "as rapidly as possible
    /// to allow its client to buffer more data" (cm-implementation-linux
    /// §4, Fig 8): a stored stream at the rate the CM grants, each packet
    /// at the layer that rate carries. `Some(d)` bounds what the client
    /// buffers to `d` of frames. The rate server is self-clocked and
    /// ignores it.
    pub fn send_ahead(&mut self, ahead: Option<Duration>) {
        self.ahead = ahead;
    }

    /// The last frame the ALF server may send when frame `due` is due.
    fn sendable(&self, due: u32) -> u32 {
        match self.ahead {
            None => u32::MAX,
            Some(d) => due.saturating_add((d.as_secs_f64() * self.layers.fps) as u32),
        }
    }

    /// What it has done so far.
    pub fn report(&self) -> ServerReport {
        let mut r = self.report.clone();
        (r.acked, r.lost, r.spurious, r.timeouts) = match &self.mode {
            Mode::Alf { ch, .. } => {
                let c = ch.counters();
                (c.acked, c.lost, c.spurious, c.timeouts)
            }
            Mode::Rate { cc, .. } => {
                let s = cc.stats();
                (s.acked, s.lost, s.spurious, s.timeouts)
            }
        };
        r
    }

    /// The frame due now.
    fn due(&self) -> u32 {
        (self.start.elapsed().as_secs_f64() * self.layers.fps) as u32
    }

    fn last_frame(&self) -> u32 {
        (self.duration.as_secs_f64() * self.layers.fps).ceil() as u32
    }

    fn record(report: &mut ServerReport, start: Instant, layer: u8) {
        if report.layers.last().is_some_and(|&(_, l)| l != layer) {
            report.switches += 1;
        }
        report.frames += 1;
        report.layers.push((start.elapsed().as_secs_f64(), layer));
    }

    fn step_alf(&mut self) -> Result<(), ProxyError> {
        let (due, last) = (self.due(), self.last_frame());
        let sendable = self.sendable(due);
        let Mode::Alf {
            ch,
            frame,
            pending,
            frame_layer,
        } = &mut self.mode
        else {
            return Ok(());
        };
        let mut cm = self.cm.borrow_mut();
        let flow = ch.flow();
        let (layers, report, start, piece_bytes) =
            (&self.layers, &mut self.report, self.start, self.piece_bytes);
        ch.drive(&mut cm, |cm, room| {
            // At each grant: the rate now, and the layer it carries.
            let rate = cm
                .query(flow)
                .ok()
                .and_then(|e| e.rate)
                .map_or(0.0, |r| r.bytes_per_sec() as f64);
            let l = layers.layer_for(rate) as u8;
            loop {
                if let Some(&(p, size)) = pending.front() {
                    if p.layer > l {
                        // The frame ends at the layers below.
                        pending.clear();
                        continue;
                    }
                    if PACKET_HEADER + size > room {
                        // The rest of the grant is too small for it.
                        return None;
                    }
                    pending.pop_front();
                    let mut p = p;
                    *frame_layer = Some(frame_layer.map_or(p.layer, |f| f.max(p.layer)));
                    p.sent_ns = crate::unix_ns();
                    report.packets += 1;
                    report.bytes += size as u64;
                    return Some(p.encode(size));
                }
                if let Some(f) = frame_layer.take() {
                    Self::record(report, start, f);
                    *frame += 1;
                }
                if *frame + MAX_LAG_FRAMES < due {
                    report.skipped += u64::from(due - *frame);
                    *frame = due;
                }
                if *frame > sendable || *frame > last {
                    return None;
                }
                *pending = pieces(layers, *frame, 0, layers.len() - 1, piece_bytes).into();
            }
        })?;
        let work = !pending.is_empty() || (*frame <= sendable && *frame <= last);
        if work {
            ch.request(&mut cm)?;
        }
        Ok(())
    }

    fn step_rate(&mut self) -> Result<(), ProxyError> {
        let (due, last) = (self.due(), self.last_frame());
        let Mode::Rate {
            cc,
            layer,
            next_frame,
        } = &mut self.mode
        else {
            return Ok(());
        };
        if let Some(flow) = cc.flow() {
            let mut cm = self.cm.borrow_mut();
            while let Some(ev) = cm.poll_event_for(flow)? {
                if let CmEvent::Update { estimate, .. } = ev {
                    self.report.updates += 1;
                    let rate = estimate.rate.map_or(0.0, |r| r.bytes_per_sec() as f64);
                    *layer = self.layers.layer_for(rate);
                }
            }
        }
        cc.drive()?;
        while *next_frame <= due && *next_frame <= last {
            Self::record(&mut self.report, self.start, *layer as u8);
            for (mut p, size) in pieces(&self.layers, *next_frame, 0, *layer, self.piece_bytes) {
                p.sent_ns = crate::unix_ns();
                match cc.send(&p.encode(size)) {
                    Ok(_) => {
                        self.report.packets += 1;
                        self.report.bytes += size as u64;
                    }
                    // The kernel-like buffer is full: the rest of the frame
                    // is lost here.
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        self.report.buffer_drops += 1;
                    }
                    Err(e) => return Err(e.into()),
                }
            }
            *next_frame += 1;
        }
        let mut buf = [0u8; 2048];
        loop {
            match cc.recv(&mut buf) {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }

    fn until_next_frame(&self) -> Duration {
        let (next, ahead) = match &self.mode {
            Mode::Alf { frame, .. } => (*frame, self.ahead.unwrap_or(Duration::MAX)),
            Mode::Rate { next_frame, .. } => (*next_frame, Duration::ZERO),
        };
        let at = Duration::from_secs_f64(f64::from(next) / self.layers.fps);
        at.saturating_sub(ahead)
            .saturating_sub(self.start.elapsed())
    }
}

impl Relay for StreamServer {
    fn step(&mut self) -> Result<(), ProxyError> {
        match self.mode {
            Mode::Alf { .. } => self.step_alf(),
            Mode::Rate { .. } => self.step_rate(),
        }
    }

    fn wake(&mut self) -> Result<Duration, ProxyError> {
        let mut t = self.until_next_frame().max(Duration::from_micros(100));
        let timeout = match &mut self.mode {
            Mode::Alf { ch, .. } => ch.next_timeout(),
            Mode::Rate { cc, .. } => cc.next_timeout()?,
        };
        if let Some(d) = timeout {
            t = t.min(d);
        }
        Ok(t)
    }

    fn fds(&self) -> Vec<BorrowedFd<'_>> {
        match &self.mode {
            Mode::Alf { ch, .. } => vec![ch.as_fd()],
            Mode::Rate { cc, .. } => vec![cc.as_fd()],
        }
    }

    /// Every frame is sent (or, rate, handed to the buffer and gone), or
    /// the stream ended 2 s ago (what is left would be too late).
    fn finished(&self) -> bool {
        if self.start.elapsed() >= self.duration + DRAIN {
            return true;
        }
        let last = self.last_frame();
        match &self.mode {
            Mode::Alf { frame, pending, .. } => *frame > last && pending.is_empty(),
            Mode::Rate { cc, next_frame, .. } => *next_frame > last && cc.stats().queued == 0,
        }
    }
}
