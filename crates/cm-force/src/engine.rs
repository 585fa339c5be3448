//! The sender side of forced congestion control: an unmodified program's
//! datagrams, taken from its sockets, wait in a MAXQ queue per flow and
//! leave when the CM grants (request/callback, sigcomm1999 §3.1), with
//! feedback from the destination's receiver CM by counting
//! ([`cm_proto::counted`], §4.2.2).
//!
//! The engine owns a [`Cm`] (the daemon's when one runs, so the program's
//! flows share macroflows with every other CM flow on the host, else one
//! embedded in the process), a duplicate of each wrapped socket (the
//! datagrams leave from the program's own address and port, so replies
//! reach it as before), and one [`CountProber`] per destination host. It
//! never blocks the program: a datagram that finds its flow's queue full
//! is dropped by the queue's policy, as the paper's VoIP proxy drops
//! (transport-selection-middleware §4.3).
//!
//! The `cm-wrap` `LD_PRELOAD` library feeds it from its hooks through an
//! [`Inbox`](crate::Inbox); tests feed it directly.

use std::collections::HashMap;
use std::io;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, UdpSocket};
use std::os::fd::{AsFd, OwnedFd};
use std::time::Duration as StdDuration;

use cm_core::{FlowId, Instant};
use cm_proto::counted::{CountProber, flow_id};
use cm_transport::maxq::MaxQueue;
use libcm::{Cm, CmEvent};
use rustix::net::{SendFlags, sendto};

use crate::config::WrapConfig;
use crate::report::{FlowReport, Report};

/// Flows kept at most; datagrams for more pass through unqueued (and
/// are counted as such).
pub const MAX_FLOWS: usize = 1024;

/// A flow with nothing queued and nothing sent for this long is closed.
const IDLE: u64 = 60_000_000;

/// One datagram the program sent.
#[derive(Debug)]
pub struct Offer {
    /// The program's descriptor number (the flow's key with `dst`).
    pub fd: i32,
    /// A duplicate of the program's socket, with the first datagram the
    /// engine sees from this descriptor (the hook makes one per socket).
    pub sock: Option<OwnedFd>,
    /// Where it goes.
    pub dst: SocketAddrV4,
    /// The datagram.
    pub payload: Vec<u8>,
}

struct Flow {
    dst: SocketAddrV4,
    cm: FlowId,
    id: u32,
    queue: MaxQueue<Vec<u8>>,
    requested: bool,
    last_active: Instant,
    sent_bytes: u64,
    send_errors: u64,
}

/// The forcing engine.
pub struct Engine {
    cfg: WrapConfig,
    cm: Cm,
    flows: HashMap<(i32, SocketAddrV4), Flow>,
    /// Duplicates of the program's sockets, by its descriptor number.
    socks: HashMap<i32, OwnedFd>,
    by_cm: HashMap<FlowId, (i32, SocketAddrV4)>,
    by_id: HashMap<(Ipv4Addr, u32), (i32, SocketAddrV4)>,
    probers: HashMap<Ipv4Addr, CountProber>,
    probe_sock: UdpSocket,
    closed: Vec<FlowReport>,
    /// Datagrams that passed unqueued (flow table full, or the CM refused
    /// the flow).
    pub passed: u64,
    seed: u64,
    /// When idle flows were last looked for.
    last_gc: Instant,
}

impl Engine {
    /// An engine with `cm` and a probe socket of its own.
    pub fn new(cfg: WrapConfig, cm: Cm) -> io::Result<Engine> {
        let probe_sock = UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0))?;
        probe_sock.set_nonblocking(true)?;
        let seed = u64::from(std::process::id()) ^ cm_clock::now().as_micros().rotate_left(17);
        Ok(Engine {
            cfg,
            cm,
            flows: HashMap::new(),
            socks: HashMap::new(),
            by_cm: HashMap::new(),
            by_id: HashMap::new(),
            probers: HashMap::new(),
            probe_sock,
            closed: Vec::new(),
            passed: 0,
            seed,
            last_gc: Instant::ZERO,
        })
    }

    /// Take one datagram of the program's.
    pub fn offer(&mut self, now: Instant, offer: Offer) {
        let key = (offer.fd, offer.dst);
        if let Some(sock) = offer.sock {
            self.socks.insert(offer.fd, sock);
        }
        if !self.flows.contains_key(&key) && !self.open(now, key) {
            // No flow: send it as the program asked, unqueued.
            self.passed += 1;
            if let Some(sock) = self.socks.get(&offer.fd) {
                let _ = sendto(
                    sock,
                    &offer.payload,
                    SendFlags::DONTWAIT,
                    &SocketAddr::V4(offer.dst),
                );
            }
            return;
        }
        let Some(f) = self.flows.get_mut(&key) else {
            return;
        };
        f.last_active = now;
        // A full queue drops by its policy; the counts are in its stats.
        let _ = f.queue.push(now, offer.payload);
        if !f.requested {
            f.requested = self.cm.request(f.cm).is_ok();
        }
    }

    fn open(&mut self, now: Instant, key: (i32, SocketAddrV4)) -> bool {
        let Some(sock) = self.socks.get(&key.0) else {
            return false;
        };
        if self.flows.len() >= MAX_FLOWS {
            return false;
        }
        let dst = key.1;
        let local = |s: &OwnedFd| {
            rustix::net::getsockname(s)
                .ok()
                .and_then(|a| SocketAddr::try_from(a).ok())
        };
        // An unbound socket is bound at its first send; bind it now, as
        // that send would, so the flow's source port is known.
        if local(sock).is_none_or(|a| a.port() == 0) {
            let any = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0));
            let _ = rustix::net::bind(sock, &any);
        }
        let src = local(sock);
        let src_port = src.map_or(0, |a| a.port());
        let Ok(cm_flow) = self.cm.open(src, SocketAddr::V4(dst)) else {
            return false;
        };
        if let Some(c) = &self.cfg.controller {
            // A macroflow another flow already set keeps its controller.
            let _ = self.cm.set_controller(cm_flow, c);
        }
        let id = flow_id(src_port, dst.port());
        let peer = *dst.ip();
        self.seed = next_seed(self.seed);
        let seed = self.seed;
        self.probers
            .entry(peer)
            .or_insert_with(|| CountProber::new(seed));
        self.by_cm.insert(cm_flow, key);
        self.by_id.insert((peer, id), key);
        self.flows.insert(
            key,
            Flow {
                dst,
                cm: cm_flow,
                id,
                queue: MaxQueue::new(self.cfg.maxq, self.cfg.overflow),
                requested: false,
                last_active: now,
                sent_bytes: 0,
                send_errors: 0,
            },
        );
        true
    }

    /// The program closed descriptor `fd`: its flows end, and what they
    /// still queue is discarded (a closed UDP socket's queue is gone too).
    pub fn close_fd(&mut self, fd: i32) {
        let keys: Vec<_> = self.flows.keys().filter(|k| k.0 == fd).copied().collect();
        for k in keys {
            self.remove(k);
        }
        self.socks.remove(&fd);
    }

    fn remove(&mut self, key: (i32, SocketAddrV4)) {
        let Some(f) = self.flows.remove(&key) else {
            return;
        };
        self.by_cm.remove(&f.cm);
        self.by_id.remove(&(*f.dst.ip(), f.id));
        if let Some(p) = self.probers.get_mut(f.dst.ip()) {
            p.remove(f.id);
        }
        let _ = self.cm.close(f.cm);
        self.closed.push(flow_report(&f));
        if self.closed.len() > 256 {
            self.closed.remove(0);
        }
    }

    /// Serve what is ready: grants, responses, probes, silence, idle flows.
    pub fn drive(&mut self, now: Instant) {
        while let Ok(Some(ev)) = self.cm.poll_event() {
            match ev {
                CmEvent::Send { flow, bytes } => self.on_grant(now, flow, bytes.0),
                CmEvent::FlowReclaimed { flow, .. } => {
                    if let Some(k) = self.by_cm.get(&flow).copied() {
                        self.remove(k);
                    }
                }
                _ => {}
            }
        }
        let mut buf = [0u8; 2048];
        while let Ok((n, from)) = self.probe_sock.recv_from(&mut buf) {
            let SocketAddr::V4(from) = from else { continue };
            if from.port() != self.cfg.receiver_port {
                continue;
            }
            let Some(p) = self.probers.get_mut(from.ip()) else {
                continue;
            };
            if let Some(fbs) = p.on_datagram(now, &buf[..n]) {
                self.feedback(*from.ip(), fbs);
            }
        }
        let peers: Vec<Ipv4Addr> = self.probers.keys().copied().collect();
        for peer in peers {
            let Some(p) = self.probers.get_mut(&peer) else {
                continue;
            };
            let silent = p.poll_silence(now);
            let probe = p.poll_probe(now);
            self.feedback(peer, silent);
            if let Some(probe) = probe {
                let to = SocketAddrV4::new(peer, self.cfg.receiver_port);
                let _ = self.probe_sock.send_to(&probe, to);
            }
        }
        // Idle flows are looked for once a second, not on every wake-up.
        if now.saturating_since(self.last_gc).as_micros() < 1_000_000 {
            return;
        }
        self.last_gc = now;
        let idle: Vec<_> = self
            .flows
            .iter()
            .filter(|(_, f)| {
                f.queue.is_empty() && now.saturating_since(f.last_active).as_micros() > IDLE
            })
            .map(|(k, _)| *k)
            .collect();
        for k in idle {
            self.remove(k);
        }
    }

    fn feedback(&mut self, peer: Ipv4Addr, fbs: Vec<(u32, cm_core::Feedback)>) {
        for (id, fb) in fbs {
            if let Some(f) = self.by_id.get(&(peer, id)).and_then(|k| self.flows.get(k)) {
                let _ = self.cm.update(f.cm, fb);
            }
        }
    }

    fn on_grant(&mut self, now: Instant, flow: FlowId, _bytes: u64) {
        let Some(key) = self.by_cm.get(&flow).copied() else {
            let _ = self.cm.notify(flow, 0);
            return;
        };
        let Some(f) = self.flows.get_mut(&key) else {
            return;
        };
        f.requested = false;
        let Some((payload, _wait)) = f.queue.pop(now) else {
            let _ = self.cm.notify(flow, 0);
            return;
        };
        let Some(sock) = self.socks.get(&key.0) else {
            let _ = self.cm.notify(flow, 0);
            return;
        };
        let sent = match sendto(sock, &payload, SendFlags::DONTWAIT, &SocketAddr::V4(f.dst)) {
            Ok(n) => n as u64,
            Err(_) => {
                f.send_errors += 1;
                0
            }
        };
        f.last_active = now;
        f.sent_bytes += sent;
        let _ = self.cm.notify(flow, sent);
        if sent > 0 {
            if let Some(p) = self.probers.get_mut(f.dst.ip()) {
                p.on_send(f.id, sent as u32);
            }
        }
        if !f.queue.is_empty() {
            f.requested = self.cm.request(flow).is_ok();
        }
    }

    /// How long the caller may sleep before [`Engine::drive`] has work
    /// that no descriptor will announce.
    pub fn next_timeout(&mut self, now: Instant) -> StdDuration {
        let mut t = self.cm.next_timeout().unwrap_or(StdDuration::from_secs(1));
        for p in self.probers.values() {
            if let Some(at) = p.next_timeout() {
                t = t.min(StdDuration::from_micros(
                    at.saturating_since(now).as_micros(),
                ));
            }
        }
        t.min(StdDuration::from_secs(1))
    }

    /// The descriptors whose readiness means work: the probe socket and
    /// the CM's (see [`libcm::Cm::pollable_fd`]). Calls `f` with them.
    pub fn with_fds<R>(&mut self, f: impl FnOnce(&[std::os::fd::BorrowedFd<'_>]) -> R) -> R {
        let probe = self.probe_sock.as_fd();
        match self.cm.pollable_fd() {
            Ok(cm) => f(&[probe, cm]),
            Err(_) => f(&[probe]),
        }
    }

    /// What every flow offered, sent and dropped so far.
    pub fn report(&self) -> Report {
        let mut flows: Vec<FlowReport> = self.closed.clone();
        flows.extend(self.flows.values().map(flow_report));
        let probers = self.probers.values();
        let (mut responses, mut silent, mut losses) = (0, 0, 0);
        for p in probers {
            responses += p.responses;
            silent += p.silent;
            losses += p.decreases;
        }
        Report {
            pid: std::process::id(),
            mode: format!("{:?}", self.cm.mode()),
            maxq: self.cfg.maxq,
            drop: self.cfg.overflow.name().to_owned(),
            passed: self.passed,
            inbox_overflow: 0,
            responses,
            silent_intervals: silent,
            loss_events: losses,
            flows,
        }
    }
}

fn flow_report(f: &Flow) -> FlowReport {
    let s = f.queue.stats();
    FlowReport {
        dst: f.dst.to_string(),
        src_port: (f.id >> 16) as u16,
        offered: s.offered,
        sent: s.sent,
        dropped: s.dropped,
        sent_bytes: f.sent_bytes,
        send_errors: f.send_errors,
        mean_wait_ms: s.mean_wait().map_or(0.0, |d| d.as_micros() as f64 / 1000.0),
        max_wait_ms: s.max_wait_us as f64 / 1000.0,
    }
}

/// The next probe-number seed (splitmix64): unguessable enough from off
/// the path, which is all the probe number must be.
fn next_seed(mut s: u64) -> u64 {
    s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = s;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}
