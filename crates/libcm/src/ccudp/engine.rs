//! The socket's engine: serving the CM's grants, telling the accounting
//! and the prober what left, reading acks, data and protocol datagrams,
//! and waiting for the next of them.

use std::io;
use std::os::fd::AsFd;
use std::time::{Duration as StdDuration, Instant as StdInstant};

use cm_core::Instant;
use cm_udp::RecvBatch;
use rustix::event::{PollFd, PollFlags, Timespec, poll};

use super::proto::{Departed, Inbound};
use super::receiver::Arrival;
use super::socket::{CcUdpSocket, READ_BATCH, cm_err};
use super::wire::{self, Packet};
use crate::{Cm, Mode};

impl CcUdpSocket {
    pub(super) fn drive_with(&mut self, cm: &mut Cm) -> io::Result<()> {
        self.sync_departures(cm)?;
        self.read_all(cm)?;
        // Probe responses' feedback reaches the CM before grants are
        // served, so the window it opens is used in this call, as acks'
        // feedback is (read_all reports it at once). Left for the end, the
        // grants it raises would wait for the next wakeup (a timer or a
        // datagram: up to half an RTT between probes), and every datagram
        // would be resolved that much later.
        self.flush_proto(cm)?;
        // Serve grants (of every buffered flow of this Cm) without taking
        // other flows' events from the application.
        match cm.poll_event() {
            Ok(Some(ev)) => cm.events.push_front(ev),
            Ok(None) => {}
            Err(e) => return Err(cm_err(e)),
        }
        self.sync_departures(cm)?;
        let now = cm_clock::now();
        let negotiated = self
            .proto
            .prober
            .as_ref()
            .is_some_and(|p| p.state() == cm_proto::PeerState::Negotiated);
        if let Some(p) = &mut self.peer {
            if let Some(mut fb) = p.acct.handle_timeout(now) {
                // Once the peer is negotiated no CC-UDP datagram follows the
                // last ones of the handshake, so a loss among those can only
                // end in this timeout: a loss, not evidence of persistent
                // congestion while probes are being answered.
                if negotiated && fb.loss == cm_core::LossMode::Persistent {
                    fb.loss = cm_core::LossMode::Transient;
                }
                cm.update(p.flow, fb).map_err(cm_err)?;
            }
        }
        if let Some(pr) = &mut self.proto.prober {
            if pr.poll_timeout().is_some_and(|t| t <= now) {
                pr.handle_timeout(now);
            }
        }
        self.flush_proto_at(cm, now)
    }

    /// Sends the protocol's control packets and reports its feedback.
    pub(super) fn flush_proto(&mut self, cm: &mut Cm) -> io::Result<()> {
        self.flush_proto_at(cm, cm_clock::now())
    }

    /// [`flush_proto`](Self::flush_proto) with the clock read by the
    /// caller (`now` dates the peer's state for `cm stat` and an RTT seed:
    /// a reading some microseconds old does for both).
    pub(super) fn flush_proto_at(&mut self, cm: &mut Cm, now: Instant) -> io::Result<()> {
        // A prober without an RTT sample (its SYN was sent again) starts
        // from the macroflow's.
        if let (Some(pr), Some(p)) = (&mut self.proto.prober, &self.peer) {
            if pr.state() == cm_proto::PeerState::Negotiated && pr.srtt().is_none() {
                if let Some(srtt) = cm.query(p.flow).ok().and_then(|e| e.srtt) {
                    pr.seed_rtt(now, srtt);
                }
            }
        }
        let (mut out, mut reports) = (Vec::new(), Vec::new());
        self.proto.take_output(&mut out, &mut reports);
        for pkt in out {
            // Control packets are small and not congestion controlled (like
            // acks); a dropped one is retried by the protocol's timers.
            if self.sock.send(&pkt).is_err() {
                self.stats.acks_dropped += 1;
            }
        }
        let Some(flow) = self.peer.as_ref().map(|p| p.flow) else {
            return Ok(());
        };
        for r in reports {
            self.feedback(cm, r.feedback)?;
            if let Some(h) = r.hint.filter(|h| h.weight > 0) {
                cm.set_weight(flow, u32::from(h.weight)).map_err(cm_err)?;
            }
        }
        self.flush_feedback(cm)?;
        if let Some(lag) = self.proto.lag_change() {
            cm.set_feedback_lag(flow, lag).map_err(cm_err)?;
        }
        if let Some(p) = self.proto.peer_report(now) {
            cm.set_peer(flow, Some(p)).map_err(cm_err)?;
        }
        Ok(())
    }

    /// Feedback for the flow, folded with the rest of the receive batch's
    /// into one `cm_update` (`Feedback::absorb`: losses go on their own).
    fn feedback(&mut self, cm: &mut Cm, fb: cm_core::Feedback) -> io::Result<()> {
        if self.folded.as_mut().is_some_and(|p| p.absorb(&fb)) {
            return Ok(());
        }
        match self.folded.replace(fb) {
            Some(p) => self.report(cm, p),
            None => Ok(()),
        }
    }

    /// Send the folded feedback to the CM.
    pub(super) fn flush_feedback(&mut self, cm: &mut Cm) -> io::Result<()> {
        match self.folded.take() {
            Some(fb) => self.report(cm, fb),
            None => Ok(()),
        }
    }

    fn report(&mut self, cm: &mut Cm, fb: cm_core::Feedback) -> io::Result<()> {
        match &self.peer {
            Some(p) => cm.update(p.flow, fb).map_err(cm_err),
            None => Ok(()),
        }
    }

    /// Tell the accounting which queued datagrams left the socket, and when.
    pub(super) fn sync_departures(&mut self, cm: &mut Cm) -> io::Result<()> {
        let Some(p) = &self.peer else { return Ok(()) };
        let flow = p.flow;
        let Ok(sent) = cm.buffered_sent(flow) else {
            return Ok(());
        };
        // Datagrams of one send call share their time: convert it once.
        let mut last: Option<(std::time::Instant, Instant)> = None;
        while self.departed < sent {
            let at = match cm.buffered_send_time(flow, self.departed) {
                Some(t) => match last {
                    Some((s, at)) if s == t => at,
                    _ => {
                        let at = cm_clock::from_std(t);
                        last = Some((t, at));
                        at
                    }
                },
                None => cm_clock::now(),
            };
            let (d, k) = self.proto.departed_run(at, sent - self.departed);
            match d {
                Departed::CcUdp => {
                    if let Some(p) = &mut self.peer {
                        p.acct.on_departed(at);
                    }
                }
                Departed::Counted => {}
                Departed::Orphan(fb) => cm.update(flow, fb).map_err(cm_err)?,
            }
            self.departed += k;
        }
        Ok(())
    }

    /// Read what the kernel holds (a batch at most: `recvmmsg`, with UDP
    /// GRO where the kernel has it), handling acks and data; acknowledge
    /// what arrived.
    pub(super) fn read_all(&mut self, cm: &mut Cm) -> io::Result<()> {
        let Some(mut batch) = self.rbatch.take() else {
            return Ok(());
        };
        let r = self.read_batches(cm, &mut batch);
        self.rbatch = Some(batch);
        let flushed = self.flush_feedback(cm);
        r?;
        flushed?;
        let now = cm_clock::now();
        self.send_ack(now);
        Ok(())
    }

    fn read_batches(&mut self, cm: &mut Cm, batch: &mut RecvBatch) -> io::Result<()> {
        let mut read = 0;
        while read < READ_BATCH {
            match self.rio.recv(batch) {
                Ok(n) => read += n.max(1),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
                    self.stats.icmp_errors += 1;
                    // Nothing listens at the peer: no receiver CM either.
                    if let Some(pr) = &mut self.proto.prober {
                        pr.on_unreachable(cm_clock::now());
                    }
                    read += 1;
                    continue;
                }
                Err(e) => return Err(e),
            }
            let now = cm_clock::now();
            for (_, data) in batch.iter() {
                self.on_datagram(cm, now, data)?;
            }
            // A short batch: the socket was empty; no second call.
            if !batch.filled_all() {
                break;
            }
        }
        Ok(())
    }

    /// One datagram from the peer: the CM protocol's, an ack, or data.
    fn on_datagram(&mut self, cm: &mut Cm, now: Instant, data: &[u8]) -> io::Result<()> {
        let n = data.len();
        if data.first() == Some(&cm_proto::wire::MAGIC) {
            match self.proto.on_datagram(now, now, data) {
                Inbound::NotProtocol => self.stats.malformed += 1,
                Inbound::Refused | Inbound::Control => {}
                Inbound::Duplicate => self.stats.duplicates += 1,
                Inbound::Answer(a) => {
                    if self.sock.send(&a).is_ok() {
                        self.stats.acks_sent += 1;
                    } else {
                        self.stats.acks_dropped += 1;
                    }
                }
                Inbound::Data(off) => {
                    if self.inbox.push(data.get(off..).unwrap_or(&[])) {
                        self.stats.received += 1;
                    } else {
                        self.stats.recv_queue_drops += 1;
                    }
                }
            }
            return Ok(());
        }
        match wire::decode(data) {
            Err(_) => self.stats.malformed += 1,
            Ok(Packet::Ack(ack)) => {
                self.stats.acks_received += 1;
                let Some(p) = &mut self.peer else {
                    return Ok(());
                };
                if ack.session != p.session {
                    self.stats.foreign_acks += 1;
                    return Ok(());
                }
                if let Some(fb) = p.acct.on_ack(now, &ack) {
                    self.feedback(cm, fb)?;
                }
            }
            Ok(Packet::Data { header, payload }) => {
                if self.inbox.is_full() {
                    self.stats.recv_queue_drops += 1;
                    return Ok(());
                }
                if self.rx.on_data(&header, n, now) == Arrival::New && self.inbox.push(payload) {
                    self.stats.received += 1;
                }
                if self.rx.ack_due() {
                    self.send_ack(now);
                }
            }
        }
        Ok(())
    }

    pub(super) fn send_ack(&mut self, now: Instant) {
        let Some(ack) = self.rx.take_ack(now) else {
            return;
        };
        match self.sock.send(&ack.encode()) {
            Ok(_) => self.stats.acks_sent += 1,
            // Acks are cumulative: a dropped one is covered by the next.
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
                self.stats.icmp_errors += 1;
                self.stats.acks_dropped += 1;
            }
            Err(_) => self.stats.acks_dropped += 1,
        }
    }

    pub(super) fn timeout_with(&mut self, cm: &mut Cm) -> Option<StdDuration> {
        // Events of other flows wait for the application; they must not
        // make this socket spin.
        let others = std::mem::take(&mut cm.events);
        let cm_t = cm.next_timeout();
        let fresh = std::mem::replace(&mut cm.events, others);
        cm.events.extend(fresh);
        let now = cm_clock::now();
        let until = |t: Instant| StdDuration::from_micros(t.saturating_since(now).as_micros());
        let acct_t = self.peer.as_ref().and_then(|p| p.acct.poll_timeout());
        let proto_t = self.proto.prober.as_ref().and_then(|p| p.poll_timeout());
        let ack_t = match (acct_t, proto_t) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
        .map(until);
        match (cm_t, ack_t) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Sleep until the socket is readable, the CM may have work, a timer
    /// is due, or `deadline`.
    pub(super) fn wait_with(
        &mut self,
        cm: &mut Cm,
        deadline: Option<StdInstant>,
    ) -> io::Result<()> {
        let mut t = self.timeout_with(cm);
        if let Some(d) = deadline {
            let left = d.saturating_duration_since(StdInstant::now());
            t = Some(t.map_or(left, |x| x.min(left)));
        }
        if t == Some(StdDuration::ZERO) {
            return Ok(());
        }
        let ts = t.map(|d| Timespec {
            tv_sec: i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
            tv_nsec: i64::from(d.subsec_nanos()),
        });
        let mode = cm.mode();
        let sock_fd = self.sock.as_fd();
        let r = if mode == Mode::Daemon {
            let cm_fd = cm.pollable_fd().map_err(cm_err)?;
            let mut fds = [
                PollFd::new(&sock_fd, PollFlags::IN),
                PollFd::new(&cm_fd, PollFlags::IN),
            ];
            poll(&mut fds, ts.as_ref())
        } else {
            let mut fds = [PollFd::new(&sock_fd, PollFlags::IN)];
            poll(&mut fds, ts.as_ref())
        };
        match r {
            Ok(_) | Err(rustix::io::Errno::INTR) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}
