//! The sending host: one `CongestionManager` driven by the real clock, and
//! always-backlogged ALF flows that send exactly when granted
//! (request → `cmapp_send` grant → send → `cm_notify`), learn of losses and
//! round-trip times from the receivers' acks and report them with
//! `cm_update` (cm-implementation-linux §3.5).

use std::collections::VecDeque;
use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration as StdDuration, Instant as StdInstant};

use anyhow::{Context, Result};
use cm_core::{
    Bytes, CongestionManager, Duration, Event, Feedback, FlowId, Instant, LossMode, OpenParams,
};

use super::wire::{Ack, Data};

/// Packets this far behind an acknowledged one are declared lost (the
/// duplicate-ACK threshold of RFC 5681 §3.2).
const REORDER_THRESHOLD: u64 = 3;

/// One application flow.
pub struct App {
    pub dst: SocketAddr,
    pub start: StdDuration,
    pub id: Option<FlowId>,
    next_seq: u64,
    outstanding: VecDeque<Sent>,
    pub acked: u64,
    pub lost: u64,
    /// Bytes acknowledged when the measurement window opened.
    pub acked_at_mark: u64,
}

#[derive(Clone, Copy, Debug)]
struct Sent {
    seq: u64,
    bytes: u64,
    sent_us: u64,
}

impl App {
    /// A flow to `dst` that starts `start` after the run begins.
    pub fn new(dst: SocketAddr, start: StdDuration) -> Self {
        App {
            dst,
            start,
            id: None,
            next_seq: 0,
            outstanding: VecDeque::new(),
            acked: 0,
            lost: 0,
            acked_at_mark: 0,
        }
    }
}

/// The sender's event loop state.
pub struct Sender {
    pub cm: CongestionManager,
    pub apps: Vec<App>,
    sock: UdpSocket,
    epoch: StdInstant,
    client: cm_core::ClientId,
    buf: Vec<u8>,
}

impl Sender {
    /// A sender on an ephemeral port of `ip`.
    pub fn new(
        cm: CongestionManager,
        apps: Vec<App>,
        epoch: StdInstant,
        ip: std::net::IpAddr,
    ) -> Result<Self> {
        let sock = UdpSocket::bind((ip, 0)).context("binding sender socket")?;
        sock.set_nonblocking(true)?;
        let mut cm = cm;
        let client = cm.register_client(Instant::ZERO)?;
        Ok(Sender {
            cm,
            apps,
            sock,
            epoch,
            client,
            buf: vec![0; 65_536],
        })
    }

    /// The real clock as the core's time.
    pub fn now(&self) -> Instant {
        Instant::from_micros(u64::try_from(self.epoch.elapsed().as_micros()).unwrap_or(u64::MAX))
    }

    /// Run one turn of the loop: start due flows, run due timers, act on
    /// grants, then wait for an ack until `deadline` or the next timer.
    pub fn turn(&mut self, deadline: Instant) -> Result<()> {
        let now = self.now();
        self.start_flows(now)?;
        if self.cm.poll_timeout().is_some_and(|t| t <= now) {
            self.cm.handle_timeout(now);
        }
        self.check_timeouts(now)?;
        self.serve_grants()?;
        let mut wake = deadline;
        if let Some(t) = self.cm.poll_timeout() {
            wake = wake.min(t);
        }
        let now = self.now();
        let wait = (wake - now).as_micros().clamp(1, 20_000);
        if crate::wait::readable(&self.sock, StdDuration::from_micros(wait))? {
            // Drain every ack that is waiting before acting on grants.
            loop {
                match self.sock.recv_from(&mut self.buf) {
                    Ok((n, _)) => {
                        if let Some(ack) = Ack::decode(&self.buf[..n]) {
                            self.on_ack(ack)?;
                        }
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                    Err(e) => return Err(e).context("sender recv"),
                }
            }
        }
        self.serve_grants()
    }

    fn start_flows(&mut self, now: Instant) -> Result<()> {
        let elapsed = StdDuration::from_micros(now.as_micros());
        for app in &mut self.apps {
            if app.id.is_none() && elapsed >= app.start {
                let f = self.cm.open(now, self.client, OpenParams::to(app.dst))?;
                app.id = Some(f);
                self.cm.request(now, f)?; // cm_request: keep one request pending
            }
        }
        Ok(())
    }

    /// `cmapp_send`: send one datagram per grant, notify, and ask again.
    fn serve_grants(&mut self) -> Result<()> {
        while let Some(ev) = self.cm.poll_event() {
            let Event::Grant { flow, bytes } = ev else {
                continue;
            };
            let now = self.now();
            let Some(i) = self.apps.iter().position(|a| a.id == Some(flow)) else {
                continue;
            };
            let app = &mut self.apps[i];
            let seq = app.next_seq;
            let d = Data {
                flow: i as u32,
                seq,
                sent_us: now.as_micros(),
            };
            d.encode(bytes.get() as usize, &mut self.buf);
            let sent = match self.sock.send_to(&self.buf, app.dst) {
                Ok(n) => n as u64,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => 0,
                Err(e) => return Err(e).context("sender send"),
            };
            if sent > 0 {
                app.next_seq += 1;
                app.outstanding.push_back(Sent {
                    seq,
                    bytes: sent,
                    sent_us: now.as_micros(),
                });
            }
            self.cm.notify(now, flow, Bytes(sent))?; // cm_notify (0 declines)
            self.cm.request(now, flow)?;
        }
        Ok(())
    }

    /// `cm_update` from an ack: the packet arrived (with an RTT sample);
    /// packets `REORDER_THRESHOLD` or more behind it were lost.
    fn on_ack(&mut self, ack: Ack) -> Result<()> {
        let now = self.now();
        let Some(app) = self.apps.get_mut(ack.flow as usize) else {
            return Ok(());
        };
        let Some(flow) = app.id else { return Ok(()) };
        let mut lost = 0;
        while let Some(s) = app.outstanding.front() {
            if s.seq + REORDER_THRESHOLD > ack.seq {
                break;
            }
            lost += s.bytes;
            app.outstanding.pop_front();
        }
        let Some(pos) = app.outstanding.iter().position(|s| s.seq == ack.seq) else {
            // Already declared lost by a timeout: the CM was told then.
            return self.report_loss(ack.flow as usize, lost, LossMode::Transient);
        };
        let Some(s) = app.outstanding.remove(pos) else {
            return Ok(());
        };
        app.acked += s.bytes;
        let rtt = Duration::from_micros(now.as_micros().saturating_sub(ack.echo_us).max(1));
        self.cm.update(now, flow, Feedback::acked(s.bytes, rtt))?;
        self.report_loss(ack.flow as usize, lost, LossMode::Transient)
    }

    fn report_loss(&mut self, i: usize, lost: u64, mode: LossMode) -> Result<()> {
        if lost == 0 {
            return Ok(());
        }
        let now = self.now();
        let app = &mut self.apps[i];
        app.lost += lost;
        if let Some(flow) = app.id {
            self.cm.update(now, flow, Feedback::lossy(lost, 0, mode))?;
        }
        Ok(())
    }

    /// Nothing heard for a retransmission timeout: everything outstanding is
    /// lost, which is persistent congestion (RFC 3124 §5.1.1, a TCP timeout).
    fn check_timeouts(&mut self, now: Instant) -> Result<()> {
        for i in 0..self.apps.len() {
            let app = &self.apps[i];
            let (Some(flow), Some(oldest)) = (app.id, app.outstanding.front()) else {
                continue;
            };
            let q = self.cm.query(flow)?;
            let rto = match (q.srtt, q.rttvar) {
                (Some(s), Some(v)) => (s + v.saturating_mul(4)).max(Duration::from_millis(200)),
                _ => Duration::from_secs(1),
            };
            if now.as_micros().saturating_sub(oldest.sent_us) >= rto.as_micros() {
                let lost: u64 = app.outstanding.iter().map(|s| s.bytes).sum();
                self.apps[i].outstanding.clear();
                self.report_loss(i, lost, LossMode::Persistent)?;
            }
        }
        Ok(())
    }
}
