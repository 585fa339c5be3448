//! [`ReceiverHost`]: TCP receivers, CBR sinks and audio receivers on one
//! simulated host.

use std::any::Any;
use std::collections::BTreeMap;

use cm_core::{Duration, Instant};
use cm_sim::{Ctx, FlowTag, Host, NodeId, Packet};
use cm_transport::{
    AudioReceiver, AudioReceiverConfig, CbrSink, Datagram, Flags, TcpReceiver, TcpReceiverConfig,
};

use super::sender::min_opt;
use super::{Pkt, reverse_tag};

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

    /// The audio receiver of flow `tag`.
    pub fn audio(&self, tag: FlowTag) -> Option<&AudioReceiver> {
        self.audio.get(&tag).map(|(_, r)| r)
    }

    fn flush(&mut self, now: Instant, ctx: &mut Ctx<'_, Pkt>) {
        let mut out = Vec::new();
        for (&(tag, _), e) in &mut self.tcp {
            while let Some(seg) = e.rx.poll_transmit(now) {
                out.push((e.peer, reverse_tag(tag), Datagram::Tcp(seg)));
            }
        }
        for (&tag, (peer, r)) in &mut self.audio {
            while let Some(fb) = r.poll_transmit(now) {
                out.push((*peer, reverse_tag(tag), Datagram::AudioFeedback(fb)));
            }
        }
        for (dst, tag, d) in out {
            // A missing route back is a topology bug; nothing to do here.
            let _ = ctx.send(dst, tag, Pkt(d));
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
        match pkt.payload.0 {
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
            Datagram::Cbr(p) => self.cbr.entry(tag).or_default().handle_packet(now, &p),
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
