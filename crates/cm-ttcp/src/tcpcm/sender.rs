//! The TCP/CM sender: one event loop driving any number of [`TcpSender`]s
//! (`CcMode::Cm`), each on its own connected UDP socket and CM flow, all on
//! one [`Cm`] (cm-implementation-linux §3.2).

use std::collections::HashMap;

use std::time::{Duration, Instant};

use cm_core::FlowId;
use cm_transport::{CcMode, CmCall, TcpConfig, TcpSegment, TcpSender};
use cm_udp::{MAX_BATCH, Offload, RecvBatch, UdpIo};
use libcm::{Cm, CmError, CmEvent, Mode};
use rustix::event::{PollFd, PollFlags, poll};

use crate::TCPCM_MSS;
use crate::error::{Result, TtcpError};
use crate::net::{connected_udp, timespec};
use crate::outbox::Run;
use crate::payload::Source;
use crate::spec::{Observer, SendSpec};
use crate::summary::{ProgressSample, Summary, TcpCmDetail};
use crate::tcpcm::coalesce;
use crate::tcpcm::conn::{Conn, call_cm, flush, transmit};

/// One transfer to run at `t0 + at`.
pub(crate) struct Job {
    pub index: usize,
    pub at: Duration,
    pub spec: SendSpec,
}

/// Full segments of one UDP GSO call.
pub(crate) const RUN_MTUS: u32 = (cm_udp::MAX_GSO_BYTES / crate::UDP_PAYLOAD_MAX) as u32;

/// MTUs asked per `cm_request`, at most: two GSO calls' worth.
pub(crate) const GRANT_MTUS: u32 = 2 * RUN_MTUS;

/// The longest single wait: the loop re-checks its deadlines at least this
/// often even if every timer computation were wrong.
const MAX_WAIT: Duration = Duration::from_millis(250);

/// The loop's state: live connections by slot, flows to slots.
struct Engine<'c, 'o> {
    cm: &'c mut Cm,
    conns: Vec<Option<Conn>>,
    by_flow: HashMap<FlowId, usize>,
    results: Vec<(usize, Result<Summary>)>,
    /// Receive buffers shared by the connections (ACKs are small: no GRO).
    rx: RecvBatch,
    observer: Option<Observer<'o>>,
}

/// Run `jobs` (each starting `at` after now) on one loop sharing `cm`;
/// results by job index.
pub(crate) fn run(
    cm: &mut Cm,
    mut jobs: Vec<Job>,
    observer: Option<Observer<'_>>,
) -> Result<Vec<(usize, Result<Summary>)>> {
    // Latest first, so the next job to start is at the end.
    jobs.sort_by(|a, b| b.at.cmp(&a.at).then(b.index.cmp(&a.index)));
    let t0 = Instant::now();
    // Calls made while handling one batch of input go to the daemon in one
    // write (flushed before every wait); embedded mode has nothing to batch.
    cm.set_autoflush(false);
    let mut eng = Engine {
        cm,
        conns: Vec::new(),
        by_flow: HashMap::new(),
        results: Vec::new(),
        rx: RecvBatch::new(MAX_BATCH, 2048),
        observer,
    };
    let r = eng.run(t0, &mut jobs);
    // Whatever happened, give the flows back to the CM.
    for slot in 0..eng.conns.len() {
        if let Some(c) = eng.conns[slot].take() {
            let _ = eng.cm.close(c.flow);
            eng.results.push((
                c.index,
                Err(TtcpError::Invalid("transfer abandoned".into())),
            ));
        }
    }
    eng.cm.set_autoflush(true);
    let _ = eng.cm.flush();
    r?;
    Ok(eng.results)
}

impl Engine<'_, '_> {
    fn run(&mut self, t0: Instant, jobs: &mut Vec<Job>) -> Result<()> {
        let daemon = self.cm.mode() == Mode::Daemon;
        loop {
            let now = Instant::now();
            let pass_start = now;
            while jobs.last().is_some_and(|j| t0 + j.at <= now) {
                if let Some(job) = jobs.pop() {
                    let index = job.index;
                    if let Err(e) = self.start(job) {
                        if matches!(e, TtcpError::Cm(CmError::Disconnected)) {
                            return Err(e);
                        }
                        self.results.push((index, Err(e)));
                    }
                }
            }
            if jobs.is_empty() && self.conns.iter().all(Option::is_none) {
                return Ok(());
            }
            let mut got = false;
            for slot in 0..self.conns.len() {
                got |= self.receive(slot)?;
            }
            self.timers(Instant::now())?;
            self.events()?;
            self.finish(Instant::now());
            // This pass's segments leave together.
            for c in self.conns.iter_mut().flatten() {
                c.detail.passes += 1;
                flush(c)?;
            }
            // Wake-up coalescing: with data in flight, the next pass comes
            // no sooner than `coalesce_gap` after this one began, so that a
            // pass handles several ACKs and sends a run of segments. While
            // ACKs keep coming, the next pass follows the sleep at once (its
            // non-blocking receive finds them); otherwise the loop waits in
            // `poll` as usual.
            if let Some(gap) = self.coalesce_gap() {
                coalesce::sleep_until(pass_start, gap);
                if got {
                    continue;
                }
            }

            // Sleep until the earliest deadline or input.
            let now = Instant::now();
            let mut until = now + MAX_WAIT;
            if let Some(j) = jobs.last() {
                until = until.min(t0 + j.at);
            }
            for c in self.conns.iter().flatten() {
                if let Some(t) = c.tcp.poll_timeout() {
                    until = until.min(cm_clock::to_std(t));
                }
                if let Some(t) = c.next_sample {
                    until = until.min(t);
                }
                let limit = if c.tcp.is_established() {
                    c.progressed + c.spec.idle_timeout
                } else {
                    c.started + c.spec.connect_timeout
                };
                until = until.min(limit);
                if let Some(t) = c.spec.time_limit {
                    until = until.min(c.started + t);
                }
            }
            let mut wait = until.saturating_duration_since(now);
            if let Some(d) = self.cm.next_timeout() {
                wait = wait.min(d);
            }
            if wait.is_zero() {
                continue;
            }
            let cm_fd = if daemon {
                Some(self.cm.pollable_fd()?)
            } else {
                None
            };
            let mut fds: Vec<PollFd<'_>> = self
                .conns
                .iter()
                .flatten()
                .map(|c| PollFd::new(c.io.socket(), PollFlags::IN))
                .collect();
            if let Some(fd) = cm_fd {
                fds.push(PollFd::from_borrowed_fd(fd, PollFlags::IN));
            }
            match poll(&mut fds, Some(&timespec(wait))) {
                Ok(_) | Err(rustix::io::Errno::INTR) => {}
                Err(e) => return Err(TtcpError::errno("poll", e)),
            }
        }
    }

    /// The least time between two passes of the loop while segments are
    /// in flight (`coalesce`): by the shortest smoothed RTT; none when
    /// nothing is in flight.
    fn coalesce_gap(&self) -> Option<Duration> {
        self.conns
            .iter()
            .flatten()
            .filter(|c| c.tcp.bytes_outstanding() > 0)
            .filter_map(|c| c.tcp.stats().srtt)
            .map(cm_clock::to_std_duration)
            .min()
            .and_then(coalesce::sender_gap)
    }

    /// Open the connection: socket, CM flow, SYN.
    fn start(&mut self, job: Job) -> Result<()> {
        let spec = job.spec;
        let source = Source::open(spec.file.as_deref())?;
        let sock = connected_udp(spec.dst, spec.bind)?;
        // ACKs are small and of mixed sizes: batched receives, no GRO.
        let offload = spec.offload()?;
        let io = UdpIo::with_offload(
            sock,
            Offload {
                gro: false,
                ..offload
            },
        )
        .map_err(|e| TtcpError::io("UDP socket", e))?;
        let local = io
            .socket()
            .local_addr()
            .map_err(|e| TtcpError::io("local address", e))?;
        let started = Instant::now();
        let cpu0 = cm_clock::thread_cpu();
        // cm-implementation-linux §3.2 "Connection creation": connect()
        // calls cm_open() to associate the connection with a CM flow.
        let flow = self.cm.open(Some(local), spec.dst)?;
        let setup = (|| -> Result<(u32, u32, TcpCmDetail)> {
            // The CM's MTU bounds the TCP MSS: grants are in payload bytes.
            let cm_mtu = self.cm.mtu(flow)?;
            let mss = TCPCM_MSS.min(cm_mtu);
            let macroflow = self.cm.macroflow_of(flow)?.to_u64();
            let window_at_open = self
                .cm
                .stat()?
                .macroflows
                .iter()
                .find(|m| m.id == macroflow)
                .map(|m| m.window);
            Ok((
                mss,
                cm_mtu,
                TcpCmDetail {
                    flow: flow.to_u64(),
                    macroflow,
                    window_at_open,
                    mss,
                    ..TcpCmDetail::default()
                },
            ))
        })();
        let (mss, cm_mtu, detail) = match setup {
            Ok(v) => v,
            Err(e) => {
                let _ = self.cm.close(flow);
                return Err(e);
            }
        };
        let cfg = TcpConfig {
            src_port: local.port(),
            dst_port: spec.dst.port(),
            mss,
            total: Some(spec.bytes),
            send_fin: true,
            cc: CcMode::Cm,
            // cm-implementation-linux §3.2 "TCP input": RTT samples from
            // RFC 1323 timestamps, passed to the CM with cm_update().
            timestamps: true,
            sack: spec.sack,
            // A grant of up to two GSO runs of segments (cm-udp), in the
            // CM's MTUs: through a daemon, one request and one grant per
            // two system calls of data.
            grant_mtus: GRANT_MTUS,
            grant_unit: cm_mtu,
            ..TcpConfig::default()
        };
        let tcp = match TcpSender::new(cfg, cm_clock::from_std(started)) {
            Ok(t) => t,
            Err(e) => {
                let _ = self.cm.close(flow);
                return Err(TtcpError::Invalid(format!("tcp configuration: {e}")));
            }
        };
        let next_sample = spec.progress_interval.map(|d| started + d);
        let conn = Conn {
            index: job.index,
            io,
            out: Run::default(),
            local,
            tcp,
            flow,
            detail,
            started,
            start_unix: cm_clock::unix_now(),
            cpu0,
            progressed: started,
            acked: 0,
            next_sample,
            samples: Vec::new(),
            refused: false,
            source,
            spec,
        };
        let slot = match self.conns.iter().position(Option::is_none) {
            Some(s) => s,
            None => {
                self.conns.push(None);
                self.conns.len() - 1
            }
        };
        self.conns[slot] = Some(conn);
        self.by_flow.insert(flow, slot);
        self.drain(slot, cm_clock::from_std(started))
    }

    /// Every segment and CM call the connection has queued: segments go on
    /// the socket, calls go to the CM for its flow, in order.
    fn drain(&mut self, slot: usize, now: cm_core::Instant) -> Result<()> {
        let Some(c) = self.conns[slot].as_mut() else {
            return Ok(());
        };
        while let Some(seg) = c.tcp.poll_transmit(now) {
            transmit(c, &seg)?;
        }
        // The feedback of one receive batch (consecutive updates without
        // loss) goes to the CM as one `cm_update` (`Feedback::absorb`).
        let mut folded: Option<cm_core::Feedback> = None;
        while let Some(call) = c.tcp.poll_cm() {
            if let CmCall::Update(fb) = call {
                if folded.as_mut().is_some_and(|p| p.absorb(&fb)) {
                    continue;
                }
                if let Some(p) = folded.replace(fb) {
                    call_cm(self.cm, c, CmCall::Update(p))?;
                }
                continue;
            }
            if let Some(p) = folded.take() {
                call_cm(self.cm, c, CmCall::Update(p))?;
            }
            call_cm(self.cm, c, call)?;
        }
        if let Some(p) = folded {
            call_cm(self.cm, c, CmCall::Update(p))?;
        }
        Ok(())
    }

    /// Every datagram waiting on the connection's socket ("processing all
    /// readable ACKs before polling again"); whether a segment came.
    fn receive(&mut self, slot: usize) -> Result<bool> {
        let Some(c) = self.conns[slot].as_mut() else {
            return Ok(false);
        };
        let mut got = false;
        loop {
            match c.io.recv(&mut self.rx) {
                Ok(_) => {
                    let now = cm_clock::now();
                    for (_, bytes) in self.rx.iter() {
                        // Not a segment: not ours to act on.
                        if let Ok(seg) = TcpSegment::decode(bytes) {
                            c.tcp.handle_segment(now, &seg);
                            got = true;
                        }
                    }
                    // A short batch: the socket was empty; no second call.
                    if !self.rx.filled_all() {
                        break;
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => c.refused = true,
                Err(e) => {
                    let index = c.index;
                    self.fail(slot, index, TtcpError::io("receive", e));
                    return Ok(false);
                }
            }
        }
        if got {
            let acked = c.tcp.stats().bytes_acked;
            if acked > c.acked {
                c.acked = acked;
                c.progressed = Instant::now();
            }
            self.drain(slot, cm_clock::now())?;
        }
        Ok(got)
    }

    /// Retransmission timers, connect and idle limits, progress samples.
    fn timers(&mut self, now: Instant) -> Result<()> {
        let t = cm_clock::from_std(now);
        for slot in 0..self.conns.len() {
            let Some(c) = self.conns[slot].as_mut() else {
                continue;
            };
            if c.tcp.poll_timeout().is_some_and(|at| at <= t) {
                c.tcp.handle_timeout(t);
                self.drain(slot, t)?;
            }
            let Some(c) = self.conns[slot].as_mut() else {
                continue;
            };
            if let Some(at) = c.next_sample.filter(|&at| at <= now) {
                let sample = ProgressSample {
                    t: at.saturating_duration_since(c.started).as_secs_f64(),
                    bytes: c.tcp.stats().bytes_acked,
                };
                c.samples.push(sample);
                if let Some(obs) = self.observer.as_mut() {
                    obs(c.index, &sample);
                }
                let step = c.spec.progress_interval.unwrap_or(Duration::from_secs(1));
                let mut next = at + step;
                while next <= now {
                    next += step;
                }
                c.next_sample = Some(next);
            }
            let err = if !c.tcp.is_established() {
                (now >= c.started + c.spec.connect_timeout).then(|| TtcpError::Unreachable {
                    dst: c.spec.dst,
                    secs: c.spec.connect_timeout.as_secs_f64(),
                    detail: if c.refused {
                        "; connection refused (ICMP port unreachable)".into()
                    } else {
                        String::new()
                    },
                })
            } else {
                (now >= c.progressed + c.spec.idle_timeout).then_some(TtcpError::Stalled {
                    dst: c.spec.dst,
                    secs: c.spec.idle_timeout.as_secs_f64(),
                    acked: c.acked,
                    total: c.spec.bytes,
                })
            };
            if let Some(e) = err {
                let index = c.index;
                self.fail(slot, index, e);
            }
        }
        Ok(())
    }

    /// Grants and other CM events ("cmapp_send", cm-implementation-linux §3.2).
    fn events(&mut self) -> Result<()> {
        while let Some(ev) = self.cm.poll_event()? {
            let now = cm_clock::now();
            match ev {
                CmEvent::Send { flow, bytes } => {
                    let Some(&slot) = self.by_flow.get(&flow) else {
                        // A grant for a flow already closed: decline it.
                        let _ = self.cm.notify(flow, 0);
                        continue;
                    };
                    let Some(c) = self.conns[slot].as_mut() else {
                        continue;
                    };
                    // cmapp_send for TCP: a retransmission first, else up
                    // to one MSS of new data; on_grant queues cm_notify.
                    if let Some(seg) = c.tcp.on_grant(now, bytes) {
                        c.detail.grants += 1;
                        transmit(c, &seg)?;
                    } else {
                        c.detail.grants_empty += 1;
                    }
                    self.drain(slot, now)?;
                }
                CmEvent::GrantExpired { flow, bytes } => {
                    // The CM withdrew a grant the sender never answered: its
                    // MTUs are no longer requested, and the sender asks
                    // again if it has work (no notify: the CM holds no
                    // grant to answer).
                    let Some(&slot) = self.by_flow.get(&flow) else {
                        continue;
                    };
                    let Some(c) = self.conns[slot].as_mut() else {
                        continue;
                    };
                    c.tcp.on_grant_expired(bytes);
                    self.drain(slot, now)?;
                }
                CmEvent::Status { .. } => {
                    // The handle moved between the daemon and an embedded
                    // CM, which holds none of the requests made before.
                    for slot in 0..self.conns.len() {
                        if let Some(c) = self.conns[slot].as_mut() {
                            c.tcp.cm_requests_lost();
                            self.drain(slot, now)?;
                        }
                    }
                }
                CmEvent::FlowReclaimed { flow } => {
                    if let Some(&slot) = self.by_flow.get(&flow) {
                        if let Some(index) = self.conns[slot].as_ref().map(|c| c.index) {
                            self.fail(
                                slot,
                                index,
                                TtcpError::Invalid("the CM reclaimed the flow".into()),
                            );
                        }
                    }
                }
                CmEvent::Error { flow, .. } => {
                    let Some(&slot) = self.by_flow.get(&flow) else {
                        continue;
                    };
                    if let Some(c) = self.conns[slot].as_mut() {
                        c.detail.cm_errors += 1;
                        // A refused call may have been a request: count
                        // none as outstanding and ask again (at worst one
                        // grant is declined).
                        c.tcp.cm_requests_lost();
                        self.drain(slot, now)?;
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Completed connections, and connections at their time limit: close
    /// the flow (the macroflow lingers with what it learned,
    /// cm-implementation-linux §4.3), record the summary.
    fn finish(&mut self, now: Instant) {
        for slot in 0..self.conns.len() {
            let Some(c) = self.conns[slot].as_ref() else {
                continue;
            };
            let complete = c.tcp.is_complete();
            let timed_out = c.spec.time_limit.is_some_and(|t| now >= c.started + t);
            if !complete && !timed_out {
                continue;
            }
            if let Some(mut c) = self.conns[slot].take() {
                self.by_flow.remove(&c.flow);
                let _ = self.cm.close(c.flow);
                if c.spec.progress_interval.is_some() {
                    let sample = ProgressSample {
                        t: now.saturating_duration_since(c.started).as_secs_f64(),
                        bytes: c.tcp.stats().bytes_acked,
                    };
                    c.samples.push(sample);
                    if let Some(obs) = self.observer.as_mut() {
                        obs(c.index, &sample);
                    }
                }
                self.results.push((c.index, Ok(c.summary(now, complete))));
            }
        }
    }

    fn fail(&mut self, slot: usize, index: usize, e: TtcpError) {
        if let Some(c) = self.conns[slot].take() {
            self.by_flow.remove(&c.flow);
            let _ = self.cm.close(c.flow);
        }
        self.results.push((index, Err(e)));
    }
}
