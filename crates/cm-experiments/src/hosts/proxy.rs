//! Ramping CBR sources and the congestion-forcing proxy
//! (transport-selection-middleware §3.1 and §4.3) on a
//! [`CmHost`](super::CmHost).
//!
//! - [`RampSource`]: a CBR application whose rate starts at `rate_bps` and
//!   grows by `ramp_bps` every `ramp_every` (§3.1: 800 B/s, plus 800 B/s
//!   twice a second). With no ramp it is a plain CBR source.
//! - The proxy ([`ProxySpec`]): the application's packets enter a
//!   [`MaxQueue`] of MAXQ packets (drop-from-head by default, §4.3.1's
//!   `maxqueue_`) and leave it only as the host's CM grants: one request per
//!   waiting packet, one CC-UDP datagram ([`ProxyData`]) per grant, then
//!   `cm_notify` with its length. The receiver acks every datagram with
//!   CC-UDP's [`AckState`](cm_transport::ccudp::receiver::AckState); the
//!   sender's CC-UDP [`Accounting`] turns the acks (and its retransmission
//!   timeout, when nothing resolves for an RTO) into `cm_update` calls, as
//!   libcm's `CcUdpSocket` does. The proxy's flows share the host's CM, so
//!   proxies on one host to one destination share a macroflow.

use cm_core::{Bytes, Duration, FlowId, Instant};
use cm_sim::{Ctx, FlowTag, NodeId};
use cm_transport::ccudp::feedback::{Accounting, Counters};
use cm_transport::ccudp::wire::{self, Ack, DataHeader};
use cm_transport::maxq::{MaxQueue, Overflow, QueueStats};
use cm_transport::{CbrPacket, CmCall};

use super::Pkt;

/// IP + UDP header bytes of every datagram.
const UDP_IP_HEADER: u32 = 28;
/// Bytes a proxy ack takes on the wire: CC-UDP's ack plus IP and UDP.
pub const ACK_WIRE_LEN: u32 = wire::ACK_LEN as u32 + UDP_IP_HEADER;
/// CC-UDP's data header, bytes.
const DATA_HEADER: u32 = wire::DATA_HEADER_LEN as u32;

/// A CC-UDP datagram of a proxy: the CC-UDP header and the application's
/// packet (whose `sent_at` is the application's send time, for the
/// one-way delay at the sink).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProxyData {
    /// The CC-UDP header (`ts` is when the proxy sent it).
    pub header: DataHeader,
    /// The application's packet.
    pub app: CbrPacket,
}

impl ProxyData {
    /// The datagram's length as granted and notified: the application's
    /// payload plus CC-UDP's header.
    pub fn len(&self) -> u32 {
        self.app.len.saturating_add(DATA_HEADER)
    }

    /// Never empty (the header is always there); for clippy's `len`
    /// convention.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Bytes on the wire: [`ProxyData::len`] plus IP and UDP headers.
    pub fn wire_len(&self) -> u32 {
        self.len().saturating_add(UDP_IP_HEADER)
    }
}

/// A CBR application whose rate grows in steps.
#[derive(Clone, Copy, Debug)]
pub struct RampSpec {
    /// Receiver host.
    pub dst: NodeId,
    /// Flow tag.
    pub tag: FlowTag,
    /// Payload rate at `start`, bit/s (> 0).
    pub rate_bps: u64,
    /// Added to the rate every `ramp_every`, bit/s (0: constant rate).
    pub ramp_bps: u64,
    /// Step interval (ignored when `ramp_bps` is 0; > 0 otherwise).
    pub ramp_every: Duration,
    /// Payload bytes per packet (> 0).
    pub len: u32,
    /// First packet.
    pub start: Instant,
    /// No packet at or after this time.
    pub stop: Option<Instant>,
}

/// The packet clock of a [`RampSpec`]: each packet's gap is its length at
/// the rate in force when it is sent.
#[derive(Clone, Debug)]
pub struct RampSource {
    spec: RampSpec,
    next: Instant,
    next_seq: u64,
}

impl RampSource {
    /// A source following `spec` (rate and length at least 1).
    pub fn new(spec: RampSpec) -> Self {
        let mut spec = spec;
        spec.rate_bps = spec.rate_bps.max(1);
        spec.len = spec.len.max(1);
        RampSource {
            spec,
            next: spec.start,
            next_seq: 0,
        }
    }

    /// The rate in force at `t`, bit/s.
    pub fn rate_at(&self, t: Instant) -> u64 {
        let s = &self.spec;
        let every = s.ramp_every.as_micros();
        if s.ramp_bps == 0 || every == 0 {
            return s.rate_bps;
        }
        let steps = t.saturating_since(s.start).as_micros() / every;
        s.rate_bps.saturating_add(s.ramp_bps.saturating_mul(steps))
    }

    /// When the next packet is due (`None` once stopped).
    pub fn poll_timeout(&self) -> Option<Instant> {
        match self.spec.stop {
            Some(stop) if self.next >= stop => None,
            _ => Some(self.next),
        }
    }

    /// The next packet if it is due at `now`.
    pub fn poll_transmit(&mut self, now: Instant) -> Option<CbrPacket> {
        if self.poll_timeout()? > now {
            return None;
        }
        let p = CbrPacket {
            seq: self.next_seq,
            len: self.spec.len,
            sent_at: now,
        };
        self.next_seq += 1;
        let bits = u128::from(self.spec.len) * 8 * 1_000_000;
        let gap = bits / u128::from(self.rate_at(self.next).max(1));
        let gap = u64::try_from(gap).unwrap_or(u64::MAX).max(1);
        self.next += Duration::from_micros(gap);
        Some(p)
    }

    /// Packets produced so far.
    pub fn packets_sent(&self) -> u64 {
        self.next_seq
    }
}

/// A congestion-forcing proxy in front of a (ramping) CBR application.
#[derive(Clone, Copy, Debug)]
pub struct ProxySpec {
    /// The application.
    pub app: RampSpec,
    /// MAXQ: packets the proxy holds (at least 1).
    pub maxq: usize,
    /// What a full queue does with one more packet.
    pub overflow: Overflow,
}

/// What became of a proxy's packets.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProxyStats {
    /// The MAXQ queue's counters: offered, sent, dropped at the proxy, waits.
    pub queue: QueueStats,
    /// CC-UDP's view: datagrams acked and reported lost.
    pub ccudp: Counters,
}

#[derive(Clone, Debug)]
struct ProxyApp {
    spec: ProxySpec,
    source: RampSource,
    queue: MaxQueue<CbrPacket>,
    acct: Accounting,
    flow: Option<FlowId>,
    /// `cm_open` was tried (once: a refused flow is not retried, so no
    /// timer stays at a start that cannot happen).
    opened: bool,
    /// A request is outstanding (one per waiting packet, at most one).
    requested: bool,
}

#[derive(Clone, Debug)]
struct RampApp {
    spec: RampSpec,
    source: RampSource,
}

/// The CM calls the apps ask their host to make, in order.
pub(super) type Calls = Vec<(FlowId, CmCall)>;

/// The ramping sources and proxies of one host. They do not own the CM:
/// what they would tell it comes back as [`Calls`] for the host to make.
#[derive(Clone, Debug, Default)]
pub(super) struct ProxyApps {
    ramps: Vec<RampApp>,
    proxies: Vec<ProxyApp>,
}

impl ProxyApps {
    /// Adds a ramping CBR source.
    pub(super) fn add_ramp(&mut self, spec: RampSpec) -> usize {
        self.ramps.push(RampApp {
            spec,
            source: RampSource::new(spec),
        });
        self.ramps.len() - 1
    }

    /// Adds a proxy (its CM flow is opened by the host at `app.start`).
    pub(super) fn add_proxy(&mut self, spec: ProxySpec) -> usize {
        self.proxies.push(ProxyApp {
            spec,
            source: RampSource::new(spec.app),
            queue: MaxQueue::new(spec.maxq, spec.overflow),
            acct: Accounting::new(),
            flow: None,
            opened: false,
            requested: false,
        });
        self.proxies.len() - 1
    }

    /// Proxy `i`'s counters.
    pub(super) fn stats(&self, i: usize) -> Option<ProxyStats> {
        self.proxies.get(i).map(|p| ProxyStats {
            queue: p.queue.stats(),
            ccudp: p.acct.counters,
        })
    }

    /// The proxies whose start has come and whose flow the host must open
    /// now: (index, destination, source port). Each is returned once.
    pub(super) fn take_due_opens(&mut self, now: Instant) -> Vec<(usize, NodeId, u16)> {
        let mut out = Vec::new();
        for (i, p) in self.proxies.iter_mut().enumerate() {
            if !p.opened && p.spec.app.start <= now {
                p.opened = true;
                out.push((i, p.spec.app.dst, 6000 + (i as u16 % 1000)));
            }
        }
        out
    }

    /// Proxy `i`'s CM flow, opened.
    pub(super) fn set_flow(&mut self, i: usize, flow: FlowId) {
        if let Some(p) = self.proxies.get_mut(i) {
            p.flow = Some(flow);
        }
    }

    /// CC-UDP's retransmission timeouts that are due: when nothing
    /// resolves for an RTO, what is out is reported lost.
    pub(super) fn handle_timeouts(&mut self, now: Instant, calls: &mut Calls) {
        for p in &mut self.proxies {
            let (Some(flow), Some(t)) = (p.flow, p.acct.poll_timeout()) else {
                continue;
            };
            if t <= now {
                if let Some(fb) = p.acct.handle_timeout(now) {
                    calls.push((flow, CmCall::Update(fb)));
                }
            }
        }
    }

    /// Runs the ramping sources and feeds the proxies' queues, asking for
    /// a grant where a packet waits; returns whether anything happened.
    pub(super) fn pump(
        &mut self,
        now: Instant,
        ctx: &mut Ctx<'_, Pkt>,
        calls: &mut Calls,
        errors: &mut Vec<String>,
    ) -> bool {
        let mut busy = false;
        for r in &mut self.ramps {
            while let Some(p) = r.source.poll_transmit(now) {
                busy = true;
                let d = Pkt::Net(cm_transport::Datagram::Cbr(p));
                if let Err(e) = ctx.send(r.spec.dst, r.spec.tag, d) {
                    errors.push(format!("send: {e}"));
                }
            }
        }
        for p in &mut self.proxies {
            let Some(flow) = p.flow else { continue };
            while let Some(pkt) = p.source.poll_transmit(now) {
                busy = true;
                // A packet dropped here is counted by the queue.
                let _ = p.queue.push(now, pkt);
            }
            if !p.requested && !p.queue.is_empty() {
                p.requested = true;
                busy = true;
                calls.push((flow, CmCall::Request));
            }
        }
        busy
    }

    /// `cmapp_send` of proxy `i`: one waiting packet leaves as a CC-UDP
    /// datagram, the CM hears of it, and the next waiting one is requested.
    pub(super) fn on_grant(
        &mut self,
        i: usize,
        flow: FlowId,
        now: Instant,
        ctx: &mut Ctx<'_, Pkt>,
        calls: &mut Calls,
        errors: &mut Vec<String>,
    ) {
        let Some(p) = self.proxies.get_mut(i) else {
            calls.push((flow, CmCall::Notify(Bytes::ZERO)));
            return;
        };
        p.requested = false;
        let mut sent = Bytes::ZERO;
        if let Some((app, _wait)) = p.queue.pop(now) {
            let data = ProxyData {
                header: DataHeader {
                    session: (p.spec.app.tag.0 & 0xffff) as u16,
                    seq: p.acct.next_seq(),
                    ts: wire::timestamp(now),
                },
                app,
            };
            let len = data.len();
            match ctx.send(p.spec.app.dst, p.spec.app.tag, Pkt::ProxyData(data)) {
                Ok(_) => {
                    p.acct.on_queued(len as usize);
                    p.acct.on_departed(now);
                    sent = Bytes(u64::from(len));
                }
                Err(e) => errors.push(format!("proxy send: {e}")),
            }
        }
        calls.push((flow, CmCall::Notify(sent)));
        if !p.queue.is_empty() {
            p.requested = true;
            calls.push((flow, CmCall::Request));
        }
    }

    /// A CC-UDP ack for the proxy of flow `tag`: its feedback goes to
    /// `cm_update`.
    pub(super) fn on_ack(&mut self, now: Instant, tag: FlowTag, ack: &Ack, calls: &mut Calls) {
        let Some(p) = self.proxies.iter_mut().find(|p| p.spec.app.tag == tag) else {
            return;
        };
        let Some(flow) = p.flow else { return };
        if let Some(fb) = p.acct.on_ack(now, ack) {
            calls.push((flow, CmCall::Update(fb)));
        }
    }

    /// The earliest timer of the ramping sources and proxies.
    pub(super) fn poll_timeout(&self) -> Option<Instant> {
        let ramps = self.ramps.iter().filter_map(|r| r.source.poll_timeout());
        let proxies = self.proxies.iter().flat_map(|p| {
            let start = (!p.opened).then_some(p.spec.app.start);
            let source = p.flow.and(p.source.poll_timeout());
            let rto = p.flow.and(p.acct.poll_timeout());
            [start, source, rto].into_iter().flatten()
        });
        ramps.chain(proxies).min()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn spec(ramp_bps: u64) -> RampSpec {
        RampSpec {
            dst: NodeId(1),
            tag: FlowTag(1),
            rate_bps: 6400,
            ramp_bps,
            ramp_every: Duration::from_millis(500),
            len: 100,
            start: Instant::ZERO,
            stop: Some(Instant::from_micros(2_000_000)),
        }
    }

    fn count(mut s: RampSource) -> u64 {
        let mut t = Instant::ZERO;
        while let Some(due) = s.poll_timeout() {
            t = t.max(due);
            s.poll_transmit(t).unwrap();
        }
        s.packets_sent()
    }

    #[test]
    fn a_ramp_adds_its_step_every_interval() {
        let s = RampSource::new(spec(6400));
        assert_eq!(s.rate_at(Instant::from_micros(499_999)), 6400);
        assert_eq!(s.rate_at(Instant::from_micros(500_000)), 12_800);
        assert_eq!(s.rate_at(Instant::from_micros(1_999_999)), 4 * 6400);
        // 8 packets/s, then 16, 24, 32: 4 + 8 + 12 + 16 packets in 2 s.
        assert_eq!(count(RampSource::new(spec(0))), 16);
        assert_eq!(count(s), 40);
    }
}
