//! The TCP/CM receiver: one UDP socket, connections demultiplexed by peer
//! address, each a [`TcpReceiver`].

use std::collections::HashMap;
use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use cm_transport::{Flags, TcpReceiver, TcpReceiverConfig, TcpSegment};
use cm_udp::{Offload, RecvBatch, UdpIo};
use rustix::event::PollFlags;

use crate::error::{Result, TtcpError};
use crate::net::{SOCKET_BUFFER, big_buffers, wait_fd};
use crate::outbox::Mixed;
use crate::payload::Sink;
use crate::spec::{ReceiverOptions, Until};
use crate::summary::{ProgressSample, Role, Summary, Transport, throughput};
use crate::tcpcm::coalesce;

/// A finished connection keeps answering retransmitted FINs this long.
const KEEP_FINISHED: Duration = Duration::from_secs(10);

struct RConn {
    rx: TcpReceiver,
    started: Instant,
    start_unix: f64,
    cpu0: Duration,
    last: Instant,
    /// When the last in-order byte (or the FIN) arrived.
    end: Instant,
    reported: bool,
    next_sample: Option<Instant>,
    samples: Vec<ProgressSample>,
    /// Where the data goes (nowhere, or a file).
    sink: Sink,
}

pub(crate) struct UdpReceiver {
    io: UdpIo,
    /// ACKs queued while a receive batch is handled, sent together.
    acks: Mixed,
    local: SocketAddr,
    opts: ReceiverOptions,
    conns: HashMap<SocketAddr, RConn>,
    /// Connections started so far (names the output files).
    started: u64,
}

impl UdpReceiver {
    pub(crate) fn bind(addr: SocketAddr, mut opts: ReceiverOptions) -> Result<UdpReceiver> {
        let sock = UdpSocket::bind(addr).map_err(|e| TtcpError::io(format!("bind {addr}"), e))?;
        sock.set_nonblocking(true)
            .map_err(|e| TtcpError::io("set non-blocking", e))?;
        big_buffers(&sock, SOCKET_BUFFER);
        // Advertise no more than half the receive buffer the kernel gave
        // (its accounting counts buffer overhead too; Linux TCP's
        // tcp_adv_win_scale = 1 does the same): a window the buffer cannot
        // hold turns a receiver that falls behind into lost runs of
        // segments instead of flow control.
        if let Ok(buffer) = rustix::net::sockopt::socket_recv_buffer_size(&sock) {
            let half = u32::try_from(buffer / 2).unwrap_or(u32::MAX).max(65_536);
            opts.rcv_wnd = opts.rcv_wnd.min(half);
        }
        let offload = Offload::from_env().map_err(|e| TtcpError::Invalid(e.to_string()))?;
        let io = UdpIo::with_offload(sock, offload).map_err(|e| TtcpError::io("UDP socket", e))?;
        let local = io
            .socket()
            .local_addr()
            .map_err(|e| TtcpError::io("local address", e))?;
        Ok(UdpReceiver {
            io,
            acks: Mixed::default(),
            local,
            opts,
            conns: HashMap::new(),
            started: 0,
        })
    }

    pub(crate) fn local_addr(&self) -> SocketAddr {
        self.local
    }

    fn summary(local: SocketAddr, peer: SocketAddr, c: &RConn, complete: bool) -> Summary {
        let bytes = c.rx.bytes_delivered();
        let seconds = c.end.saturating_duration_since(c.started).as_secs_f64();
        Summary {
            transport: Transport::TcpCm,
            role: Role::Receiver,
            local: local.to_string(),
            peer: peer.to_string(),
            bytes,
            seconds,
            throughput_bps: throughput(bytes, seconds),
            retransmissions: c.rx.stats().duplicates,
            cpu_s: cm_clock::thread_cpu().saturating_sub(c.cpu0).as_secs_f64(),
            start_s: cm_clock::secs_since_epoch(c.started),
            end_s: cm_clock::secs_since_epoch(c.end),
            start_unix_s: c.start_unix,
            complete,
            progress: c.samples.clone(),
            tcpcm: None,
            ccudp: None,
        }
    }

    fn new_conn(&mut self, now: Instant, seg: &TcpSegment) -> Result<RConn> {
        self.started += 1;
        let sink = Sink::create(self.opts.output.as_deref(), self.started)?;
        let cfg = TcpReceiverConfig {
            src_port: seg.dst_port,
            dst_port: seg.src_port,
            rcv_wnd: self.opts.rcv_wnd,
            delayed_ack: self.opts.delayed_ack.map(|d| {
                cm_core::Duration::from_micros(d.as_micros().try_into().unwrap_or(u64::MAX))
            }),
        };
        let rx = TcpReceiver::new(cfg).map_err(|e| TtcpError::Invalid(format!("receiver: {e}")))?;
        Ok(RConn {
            rx,
            started: now,
            start_unix: cm_clock::unix_now(),
            cpu0: cm_clock::thread_cpu(),
            last: now,
            end: now,
            reported: false,
            next_sample: self.opts.progress_interval.map(|d| now + d),
            samples: Vec::new(),
            sink,
        })
    }

    pub(crate) fn serve(
        &mut self,
        until: &Until<'_>,
        on_done: &mut dyn FnMut(&Summary),
    ) -> Result<Vec<Summary>> {
        let mut out = Vec::new();
        // With GRO each slot holds up to 64 KiB of coalesced segments.
        let mut batch = RecvBatch::new(8, 2048);
        let mut linger_until: Option<Instant> = None;
        loop {
            let now = Instant::now();
            let pass_start = now;
            if until.stopped(now) || linger_until.is_some_and(|t| now >= t) {
                break;
            }
            if linger_until.is_none() && until.count.is_some_and(|n| out.len() >= n) {
                // Answer retransmitted FINs a little longer.
                linger_until = Some(now + Duration::from_millis(300));
            }
            // Receive everything waiting.
            loop {
                match self.io.recv(&mut batch) {
                    Ok(_) => {
                        for (peer, bytes) in batch.iter() {
                            let Some(peer) = peer else { continue };
                            let Ok(seg) = TcpSegment::decode(bytes) else {
                                continue;
                            };
                            // The payload is the datagram's last `len` bytes.
                            let payload = bytes
                                .get(bytes.len().saturating_sub(seg.len as usize)..)
                                .unwrap_or(&[]);
                            self.on_segment(peer, &seg, payload, &mut out, on_done)?;
                        }
                        // One batch's ACKs leave together.
                        self.acks.flush(&mut self.io)?;
                        // A short batch: the socket was empty.
                        if !batch.filled_all() {
                            break;
                        }
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                    Err(e)
                        if matches!(
                            e.kind(),
                            std::io::ErrorKind::Interrupted | std::io::ErrorKind::ConnectionRefused
                        ) => {}
                    Err(e) => return Err(TtcpError::io("receive", e)),
                }
            }
            self.timers(&mut out, on_done)?;
            self.acks.flush(&mut self.io)?;
            // Wake-up coalescing while data flows, as the sender does: the
            // ACKs of this pass are out; what arrives during the gap is
            // read by the next pass in one batch.
            if let Some(gap) = self.coalesce_gap() {
                coalesce::sleep_until(pass_start, gap);
            }
            let mut wait = Duration::from_millis(50);
            let now = Instant::now();
            for c in self.conns.values() {
                if let Some(t) = c.rx.poll_timeout() {
                    wait = wait.min(cm_clock::to_std(t).saturating_duration_since(now));
                }
                if let Some(t) = c.next_sample {
                    wait = wait.min(t.saturating_duration_since(now));
                }
            }
            if let Some(d) = until.deadline {
                wait = wait.min(d.saturating_duration_since(now));
            }
            if !wait.is_zero() {
                wait_fd(self.io.socket(), PollFlags::IN, wait)?;
            }
        }
        // Connections cut short by the stop: incomplete summaries.
        let peers: Vec<SocketAddr> = self.conns.keys().copied().collect();
        for peer in peers {
            if let Some(c) = self.conns.remove(&peer) {
                if !c.reported && c.rx.bytes_delivered() > 0 {
                    let s = Self::summary(self.local, peer, &c, false);
                    on_done(&s);
                    out.push(s);
                }
            }
        }
        Ok(out)
    }

    /// The least time between two passes while a transfer is under way
    /// (`coalesce`): by the shortest round trip the connections measured
    /// from timestamp echoes ([`TcpReceiver::rtt_estimate`]).
    fn coalesce_gap(&self) -> Option<Duration> {
        self.conns
            .values()
            .filter(|c| !c.reported)
            .filter_map(|c| c.rx.rtt_estimate())
            .map(cm_clock::to_std_duration)
            .min()
            .and_then(coalesce::receiver_gap)
    }

    fn on_segment(
        &mut self,
        peer: SocketAddr,
        seg: &TcpSegment,
        payload: &[u8],
        out: &mut Vec<Summary>,
        on_done: &mut dyn FnMut(&Summary),
    ) -> Result<()> {
        let now = Instant::now();
        if seg.flags.contains(Flags::SYN) {
            // A SYN from a peer whose connection finished (or got data and
            // was abandoned) starts a new connection.
            let stale = self
                .conns
                .get(&peer)
                .is_some_and(|c| c.reported || c.rx.bytes_delivered() > 0);
            if stale {
                if let Some(old) = self.conns.remove(&peer) {
                    if !old.reported {
                        let s = Self::summary(self.local, peer, &old, false);
                        on_done(&s);
                        out.push(s);
                    }
                }
            }
            if !self.conns.contains_key(&peer) {
                let c = self.new_conn(now, seg)?;
                self.conns.insert(peer, c);
            }
        }
        let Some(c) = self.conns.get_mut(&peer) else {
            return Ok(());
        };
        let t = cm_clock::from_std(now);
        if seg.len > 0 {
            // By stream offset: out-of-order and repeated data land in
            // place (data starts at sequence number 1).
            c.sink.write(seg.seq.saturating_sub(1), payload)?;
        }
        let before = c.rx.bytes_delivered();
        c.rx.handle_segment(t, seg);
        c.last = now;
        if c.rx.bytes_delivered() > before {
            c.end = now;
        }
        while let Some(ack) = c.rx.poll_transmit(t) {
            self.acks.push(&mut self.io, peer, |buf| ack.encode(buf))?;
        }
        if !c.reported && c.rx.fin_received() {
            c.reported = true;
            c.end = now;
            if self.opts.progress_interval.is_some() {
                c.samples.push(ProgressSample {
                    t: now.saturating_duration_since(c.started).as_secs_f64(),
                    bytes: c.rx.bytes_delivered(),
                });
            }
            let s = Self::summary(self.local, peer, c, true);
            on_done(&s);
            out.push(s);
        }
        Ok(())
    }

    /// Delayed-ACK timers, progress samples, forgetting old connections.
    fn timers(&mut self, out: &mut Vec<Summary>, on_done: &mut dyn FnMut(&Summary)) -> Result<()> {
        let now = Instant::now();
        let t = cm_clock::from_std(now);
        let mut gone = Vec::new();
        for (&peer, c) in &mut self.conns {
            if c.rx.poll_timeout().is_some_and(|at| at <= t) {
                c.rx.handle_timeout(t);
                while let Some(ack) = c.rx.poll_transmit(t) {
                    self.acks.push(&mut self.io, peer, |buf| ack.encode(buf))?;
                }
            }
            if let (Some(at), Some(step)) = (c.next_sample, self.opts.progress_interval) {
                if at <= now && !c.reported {
                    c.samples.push(ProgressSample {
                        t: at.saturating_duration_since(c.started).as_secs_f64(),
                        bytes: c.rx.bytes_delivered(),
                    });
                    let mut next = at + step;
                    while next <= now {
                        next += step;
                    }
                    c.next_sample = Some(next);
                }
            }
            let keep = if c.reported {
                KEEP_FINISHED
            } else {
                self.opts.idle_timeout
            };
            if now.saturating_duration_since(c.last) > keep {
                gone.push(peer);
            }
        }
        for peer in gone {
            if let Some(c) = self.conns.remove(&peer) {
                if !c.reported && c.rx.bytes_delivered() > 0 {
                    let s = Self::summary(self.local, peer, &c, false);
                    on_done(&s);
                    out.push(s);
                }
            }
        }
        Ok(())
    }
}
