//! The layered client: takes the server's packets through a `CcUdpSocket`
//! (its acknowledgements are the server CM's feedback) and plays the
//! frames out after a startup buffer, reporting per second the layer
//! played, the goodput and the frozen frames.

use std::collections::BTreeMap;
use std::io;
use std::net::SocketAddr;
use std::os::fd::BorrowedFd;
use std::time::{Duration, Instant};

use cm_force::proxy::{ProxyError, Relay};
use libcm::ccudp::{Accepting, SharedCm};
use serde::Serialize;

use super::{Layers, Piece};

/// The most the client holds ahead of its play position: a packet for a
/// later frame is counted as malformed.
pub const MAX_AHEAD: Duration = Duration::from_secs(300);

/// The client's settings.
#[derive(Clone, Debug)]
pub struct ClientConfig {
    /// Where to listen.
    pub listen: SocketAddr,
    /// The source's layers (for the frame rate).
    pub layers: Layers,
    /// How long to buffer before playing the first frame.
    pub startup: Duration,
    /// Stop when nothing has arrived for this long after the first packet.
    pub idle: Duration,
}

/// One second of playout.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct StreamSecond {
    /// Seconds since the first packet.
    pub t: u32,
    /// Frames played (frozen ones included).
    pub frames: u32,
    /// Frames whose base layer was incomplete at their play time.
    pub frozen: u32,
    /// Mean layer of the frames that played (−1 when none did).
    pub mean_layer: f64,
    /// Payload bits per second that arrived in this second.
    pub goodput_bps: f64,
}

/// The client's report.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct StreamReport {
    /// Packets that arrived.
    pub packets: u64,
    /// Datagrams that were not stream packets, or were for a frame more
    /// than [`MAX_AHEAD`] ahead of the one playing.
    pub malformed: u64,
    /// Frames played.
    pub played: u64,
    /// Of those, frozen.
    pub frozen: u64,
    /// Layer changes between consecutive played frames.
    pub switches: u64,
    /// Per second.
    pub seconds: Vec<StreamSecond>,
}

#[derive(Default)]
struct FrameState {
    /// Per layer: pieces received and pieces expected.
    layers: BTreeMap<u8, (u16, u16)>,
}

impl FrameState {
    /// The highest layer complete together with every layer under it.
    fn playable(&self) -> Option<u8> {
        let mut best = None;
        for l in 0u8.. {
            match self.layers.get(&l) {
                Some(&(got, of)) if got >= of => best = Some(l),
                _ => return best,
            }
        }
        best
    }
}

/// The client; drive it with [`cm_force::proxy::run_all`].
pub struct StreamClient {
    cm: SharedCm,
    cfg: ClientConfig,
    socket: Accepting,
    frames: BTreeMap<u32, FrameState>,
    first: Option<(Instant, u32)>,
    next_play: u32,
    /// The highest frame a packet has arrived for.
    highest: u32,
    last_layer: Option<u8>,
    last_packet: Option<Instant>,
    report: StreamReport,
    layer_sums: Vec<f64>,
    buf: Vec<u8>,
}

impl StreamClient {
    /// Listen on `cfg.listen`.
    pub fn bind(cm: &SharedCm, cfg: ClientConfig) -> Result<StreamClient, ProxyError> {
        let socket = Accepting::bind(cfg.listen).map_err(|source| ProxyError::Setup {
            what: format!("binding {}", cfg.listen),
            error: source,
        })?;
        Ok(StreamClient {
            cm: SharedCm::clone(cm),
            cfg,
            socket,
            frames: BTreeMap::new(),
            first: None,
            next_play: 0,
            highest: 0,
            last_layer: None,
            last_packet: None,
            report: StreamReport::default(),
            layer_sums: Vec::new(),
            buf: vec![0u8; 65_536],
        })
    }

    /// Where it listens.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.socket.local_addr()
    }

    /// The report so far.
    pub fn report(&self) -> StreamReport {
        let mut r = self.report.clone();
        for (i, s) in r.seconds.iter_mut().enumerate() {
            s.t = i as u32;
            let played = s.frames - s.frozen;
            s.mean_layer = if played == 0 {
                -1.0
            } else {
                self.layer_sums[i] / f64::from(played)
            };
        }
        r
    }

    fn second(&mut self, at: Instant) -> Option<usize> {
        let (t0, _) = self.first?;
        let i = at.saturating_duration_since(t0).as_secs() as usize;
        if self.report.seconds.len() <= i {
            self.report
                .seconds
                .resize_with(i + 1, StreamSecond::default);
            self.layer_sums.resize(i + 1, 0.0);
        }
        Some(i)
    }

    fn take(&mut self, n: usize) {
        let Some(p) = Piece::decode(&self.buf[..n]) else {
            self.report.malformed += 1;
            return;
        };
        let ahead = (MAX_AHEAD.as_secs_f64() * self.cfg.layers.fps) as u32;
        if self.first.is_some() && p.frame > self.next_play.saturating_add(ahead) {
            // No server sends that far ahead; holding it would keep the
            // client waiting to play up to it.
            self.report.malformed += 1;
            return;
        }
        let now = Instant::now();
        self.report.packets += 1;
        self.last_packet = Some(now);
        if self.first.is_none() {
            self.first = Some((now, p.frame));
            self.next_play = p.frame;
        }
        self.highest = self.highest.max(p.frame);
        if let Some(i) = self.second(now) {
            self.report.seconds[i].goodput_bps += ((n - super::PACKET_HEADER) * 8) as f64;
        }
        if p.frame < self.next_play {
            return; // too late to play
        }
        let e = self
            .frames
            .entry(p.frame)
            .or_default()
            .layers
            .entry(p.layer)
            .or_insert((0, p.chunks));
        e.0 = e.0.saturating_add(1);
    }

    /// Play every frame whose time has come, up to the highest that
    /// anything arrived for: a frame that is late while later ones have
    /// arrived is frozen; frames after the last that arrived are not
    /// played (the stream may have ended) until later ones arrive.
    fn play(&mut self) {
        let Some((t0, f0)) = self.first else { return };
        let now = Instant::now();
        while self.next_play <= self.highest {
            let at = t0 + self.cfg.startup + self.cfg.layers.interval() * (self.next_play - f0);
            if at > now {
                return;
            }

            let layer = self
                .frames
                .remove(&self.next_play)
                .and_then(|f| f.playable());
            self.next_play += 1;
            let Some(i) = self.second(at) else { return };
            self.report.played += 1;
            self.report.seconds[i].frames += 1;
            match layer {
                None => {
                    self.report.frozen += 1;
                    self.report.seconds[i].frozen += 1;
                }
                Some(l) => {
                    if self.last_layer.is_some_and(|p| p != l) {
                        self.report.switches += 1;
                    }
                    self.last_layer = Some(l);
                    self.layer_sums[i] += f64::from(l);
                }
            }
        }
    }
}

impl Relay for StreamClient {
    fn step(&mut self) -> Result<(), ProxyError> {
        if self.socket.poll(&self.cm)? {
            self.report.malformed += 1;
        }
        while let Some(cc) = self.socket.socket() {
            match cc.recv(&mut self.buf) {
                Ok(n) => self.take(n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => return Err(e.into()),
            }
        }
        self.play();
        Ok(())
    }

    fn wake(&mut self) -> Result<Duration, ProxyError> {
        let t = match self.socket.socket() {
            Some(cc) => cc.next_timeout()?.unwrap_or(Duration::from_millis(200)),
            None => Duration::from_millis(200),
        };
        // The next frame's play time.
        Ok(t.min(self.cfg.layers.interval()))
    }

    fn fds(&self) -> Vec<BorrowedFd<'_>> {
        self.socket.fd().into_iter().collect()
    }

    /// Nothing arrived for [`ClientConfig::idle`], and every frame that
    /// arrived has been played (a server that sent ahead has stopped
    /// sending long before its last frames are due).
    fn finished(&self) -> bool {
        self.next_play > self.highest
            && self
                .last_packet
                .is_some_and(|t| t.elapsed() >= self.cfg.idle)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;
    use std::rc::Rc;

    fn client() -> StreamClient {
        let cm: SharedCm = Rc::new(RefCell::new(
            libcm::Cm::embedded(libcm::Config::default()).unwrap_or_else(|e| panic!("{e}")),
        ));
        let cfg = ClientConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            layers: Layers::default(),
            startup: Duration::from_millis(10),
            idle: Duration::ZERO,
        };
        StreamClient::bind(&cm, cfg).unwrap_or_else(|e| panic!("{e}"))
    }

    fn deliver(c: &mut StreamClient, frame: u32) {
        let p = Piece {
            frame,
            layer: 0,
            chunk: 0,
            chunks: 1,
            sent_ns: 0,
        }
        .encode(10);
        c.buf[..p.len()].copy_from_slice(&p);
        c.take(p.len());
    }

    /// Frames sent ahead are held until they have played; a packet for a
    /// frame absurdly far ahead is refused, so it cannot keep the client
    /// waiting to play up to it.
    #[test]
    fn frames_ahead_are_played_before_the_end_and_absurd_ones_refused() {
        let mut c = client();
        deliver(&mut c, 0);
        deliver(&mut c, 2);
        deliver(&mut c, 100_000);
        assert_eq!(c.report.malformed, 1);
        assert_eq!(c.highest, 2);
        assert!(!c.finished(), "frames 0–2 have not played");
        std::thread::sleep(Duration::from_millis(150));
        c.play();
        assert_eq!((c.report.played, c.report.frozen), (3, 1));
        assert!(c.finished());
    }
}
