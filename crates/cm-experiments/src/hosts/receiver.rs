//! [`ReceiverHost`]: TCP receivers, CBR sinks, audio receivers and the
//! receiving end of congestion-forcing proxies (CC-UDP acks) on one
//! simulated host.

use std::any::Any;
use std::collections::BTreeMap;

use cm_core::{Duration, Instant};
use cm_sim::{Ctx, FlowTag, Host, NodeId, Packet};
use cm_transport::{
    AudioReceiver, AudioReceiverConfig, CbrPacket, CbrSink, Datagram, Flags, TcpReceiver,
    TcpReceiverConfig,
};

use cm_transport::ccudp::receiver::{AckPolicy, AckState, Arrival};

use super::sender::min_opt;
use super::{Pkt, reverse_tag};

/// What arrived of one CBR or proxied flow: payload bytes per second and
/// the one-way delay from the application's send time.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Arrivals {
    /// Distinct packets received.
    pub packets: u64,
    /// Their payload bytes.
    pub bytes: u64,
    /// Sum of their one-way delays (arrival − the application's send
    /// time), µs.
    pub delay_sum_us: u128,
    /// Payload bytes received in each whole second of the run (index = s).
    pub per_second: Vec<u64>,
}

impl Arrivals {
    fn record(&mut self, now: Instant, p: &CbrPacket) {
        self.packets += 1;
        self.bytes += u64::from(p.len);
        self.delay_sum_us += u128::from(now.saturating_since(p.sent_at).as_micros());
        let s = usize::try_from(now.as_micros() / 1_000_000).unwrap_or(usize::MAX);
        if s < 1 << 24 {
            if self.per_second.len() <= s {
                self.per_second.resize(s + 1, 0);
            }
            self.per_second[s] += u64::from(p.len);
        }
    }

    /// Mean one-way delay, s.
    pub fn mean_delay_s(&self) -> Option<f64> {
        (self.packets > 0).then(|| self.delay_sum_us as f64 / self.packets as f64 / 1e6)
    }
}

#[derive(Debug)]
struct TcpEnd {
    peer: NodeId,
    rx: TcpReceiver,
}

/// Receives everything sent towards it: a TCP receiver per `(flow tag,
/// sender port)` created when the SYN arrives, a CBR sink per tag and an
/// audio receiver per tag.
#[derive(Debug, Default)]
pub struct ReceiverHost {
    tcp: BTreeMap<(FlowTag, u16), TcpEnd>,
    cbr: BTreeMap<FlowTag, CbrSink>,
    audio: BTreeMap<FlowTag, (NodeId, AudioReceiver)>,
    proxied: BTreeMap<FlowTag, (NodeId, AckState)>,
    arrivals: BTreeMap<FlowTag, Arrivals>,
    delayed_ack: BTreeMap<FlowTag, Duration>,
    audio_cfg: AudioReceiverConfig,
    rcv_wnd: Option<u32>,
    next: Option<Instant>,
}

impl ReceiverHost {
    /// A receiver that ACKs every segment, with default windows.
    pub fn new() -> Self {
        Self::default()
    }

    /// Use delayed ACKs (RFC 5681 §4.2) with this timeout for flow `tag`.
    pub fn delayed_ack(&mut self, tag: FlowTag, timeout: Duration) {
        self.delayed_ack.insert(tag, timeout);
    }

    /// The advertised window of every TCP receiver (default 64 KB).
    pub fn set_rcv_wnd(&mut self, bytes: u32) {
        self.rcv_wnd = Some(bytes);
    }

    /// Report settings of audio receivers.
    pub fn set_audio_config(&mut self, cfg: AudioReceiverConfig) {
        self.audio_cfg = cfg;
    }

    /// In-order bytes delivered by every TCP connection of flow `tag`.
    pub fn tcp_bytes(&self, tag: FlowTag) -> u64 {
        self.tcp
            .range((tag, 0)..=(tag, u16::MAX))
            .map(|(_, e)| e.rx.bytes_delivered())
            .sum()
    }

    /// The CBR sink of flow `tag`.
    pub fn cbr(&self, tag: FlowTag) -> Option<&CbrSink> {
        self.cbr.get(&tag)
    }

    /// What arrived of CBR or proxied flow `tag`.
    pub fn arrivals(&self, tag: FlowTag) -> Option<&Arrivals> {
        self.arrivals.get(&tag)
    }

    /// The audio receiver of flow `tag`.
    pub fn audio(&self, tag: FlowTag) -> Option<&AudioReceiver> {
        self.audio.get(&tag).map(|(_, r)| r)
    }

    fn flush(&mut self, now: Instant, ctx: &mut Ctx<'_, Pkt>) {
        let mut out = Vec::new();
        for (&(tag, _), e) in &mut self.tcp {
            while let Some(seg) = e.rx.poll_transmit(now) {
                out.push((e.peer, reverse_tag(tag), Pkt::Net(Datagram::Tcp(seg))));
            }
        }
        for (&tag, (peer, r)) in &mut self.audio {
            while let Some(fb) = r.poll_transmit(now) {
                out.push((
                    *peer,
                    reverse_tag(tag),
                    Pkt::Net(Datagram::AudioFeedback(fb)),
                ));
            }
        }
        for (dst, tag, d) in out {
            // A missing route back is a topology bug; nothing to do here.
            let _ = ctx.send(dst, tag, d);
        }
        let mut t = None;
        for e in self.tcp.values() {
            t = min_opt(t, e.rx.poll_timeout());
        }
        for (_, r) in self.audio.values() {
            t = min_opt(t, r.poll_timeout());
        }
        self.next = t;
    }
}

impl Host<Pkt> for ReceiverHost {
    fn on_packet(&mut self, now: Instant, pkt: Packet<Pkt>, ctx: &mut Ctx<'_, Pkt>) {
        let tag = pkt.flow;
        let d = match pkt.payload {
            Pkt::Net(d) => d,
            Pkt::ProxyData(p) => {
                let (_, acks) = self
                    .proxied
                    .entry(tag)
                    .or_insert_with(|| (pkt.src, AckState::new(AckPolicy::Every(1))));
                if acks.on_data(&p.header, p.len() as usize, now) == Arrival::New {
                    self.arrivals.entry(tag).or_default().record(now, &p.app);
                }
                if let Some(ack) = acks.take_ack(now) {
                    let _ = ctx.send(pkt.src, reverse_tag(tag), Pkt::ProxyAck(ack));
                }
                return;
            }
            Pkt::ProxyAck(_) => return,
        };
        match d {
            Datagram::Tcp(seg) => {
                let key = (tag, seg.src_port);
                if !self.tcp.contains_key(&key) && seg.flags.contains(Flags::SYN) {
                    let mut cfg = TcpReceiverConfig {
                        src_port: seg.dst_port,
                        dst_port: seg.src_port,
                        delayed_ack: self.delayed_ack.get(&tag).copied(),
                        ..TcpReceiverConfig::default()
                    };
                    if let Some(w) = self.rcv_wnd {
                        cfg.rcv_wnd = w;
                    }
                    if let Ok(rx) = TcpReceiver::new(cfg) {
                        self.tcp.insert(key, TcpEnd { peer: pkt.src, rx });
                    }
                }
                if let Some(e) = self.tcp.get_mut(&key) {
                    e.rx.handle_segment(now, &seg);
                }
            }
            Datagram::Cbr(p) => {
                let sink = self.cbr.entry(tag).or_default();
                let before = sink.packets();
                sink.handle_packet(now, &p);
                if sink.packets() > before {
                    self.arrivals.entry(tag).or_default().record(now, &p);
                }
            }
            Datagram::Audio(p) => {
                let cfg = self.audio_cfg;
                self.audio
                    .entry(tag)
                    .or_insert_with(|| (pkt.src, AudioReceiver::new(cfg)))
                    .1
                    .handle_packet(now, &p);
            }
            Datagram::AudioFeedback(_) => {}
        }
        self.flush(now, ctx);
    }

    fn on_timer(&mut self, now: Instant, ctx: &mut Ctx<'_, Pkt>) {
        for e in self.tcp.values_mut() {
            if e.rx.poll_timeout().is_some_and(|t| t <= now) {
                e.rx.handle_timeout(now);
            }
        }
        self.flush(now, ctx);
    }

    fn next_timer(&self) -> Option<Instant> {
        self.next
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
