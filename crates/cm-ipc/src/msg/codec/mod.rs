//! The message codec: each message's tag and body layout, on top of the
//! bounds-checked field reader and writer in [`crate::field`]. Decoding
//! untrusted bytes never panics.

use cm_core::LossMode;

use super::{
    ErrorCode, Estimate, FlowStat, MAX_NAME, MAX_SPEC, MAX_WHY, MacroflowStat, PeerMode, PeerStat,
    ToClient, ToDaemon,
};
use crate::field::{DecodeError, Reader, Writer};

fn loss_to_u8(l: LossMode) -> u8 {
    match l {
        LossMode::None => 0,
        LossMode::Transient => 1,
        LossMode::Persistent => 2,
        LossMode::Ecn => 3,
        LossMode::NotCongestion => 4,
        // LossMode is non_exhaustive in spirit; a future kind is sent as
        // "no congestion signal" rather than invented.
        #[allow(unreachable_patterns)]
        _ => 0,
    }
}

fn loss_from_u8(v: u8) -> Result<LossMode, DecodeError> {
    Ok(match v {
        0 => LossMode::None,
        1 => LossMode::Transient,
        2 => LossMode::Persistent,
        3 => LossMode::Ecn,
        4 => LossMode::NotCongestion,
        _ => return Err(DecodeError::Invalid("loss mode")),
    })
}

fn put_estimate(w: &mut Writer<'_>, e: &Estimate) {
    w.i64(e.rate);
    w.i64(e.srtt_us);
    w.i64(e.rttvar_us);
    w.f64(e.loss);
}

fn put_peer(w: &mut Writer<'_>, p: &Option<PeerStat>) {
    w.bool(p.is_some());
    if let Some(p) = p {
        w.u8(p.mode.to_u8());
        w.opt_u64(p.probe_srtt_us);
        w.opt_u64(p.loss_ppm);
        w.u64(p.probes);
        w.u64(p.responses);
    }
}

fn get_peer(r: &mut Reader<'_>) -> Result<Option<PeerStat>, DecodeError> {
    if !r.bool()? {
        return Ok(None);
    }
    Ok(Some(PeerStat {
        mode: PeerMode::from_u8(r.u8()?).ok_or(DecodeError::Invalid("peer mode"))?,
        probe_srtt_us: r.opt_u64("probe srtt without its flag")?,
        loss_ppm: r.opt_u64("loss without its flag")?,
        probes: r.u64()?,
        responses: r.u64()?,
    }))
}

fn get_estimate(r: &mut Reader<'_>) -> Result<Estimate, DecodeError> {
    Ok(Estimate {
        rate: r.i64()?,
        srtt_us: r.i64()?,
        rttvar_us: r.i64()?,
        loss: r.f64()?,
    })
}

/// A message type the frame codec can carry.
pub trait Message: Sized {
    /// Write the body; return the tag.
    #[doc(hidden)]
    fn encode_body(&self, w: &mut Vec<u8>) -> u8;
    /// Read a body of the given tag (the whole slice is the body).
    #[doc(hidden)]
    fn decode_body(tag: u8, body: &[u8]) -> Result<Self, DecodeError>;
}

impl Message for ToDaemon {
    fn encode_body(&self, buf: &mut Vec<u8>) -> u8 {
        let mut w = Writer { buf };
        match *self {
            ToDaemon::Hello { version } => {
                w.u8(version);
                0x01
            }
            ToDaemon::Open { seq, src, dst } => {
                w.u32(seq);
                w.opt_sockaddr(src);
                w.sockaddr(dst);
                0x02
            }
            ToDaemon::Close { flow } => {
                w.u64(flow);
                0x03
            }
            ToDaemon::Request { flow, k } => {
                w.u64(flow);
                w.u32(k);
                0x04
            }
            ToDaemon::Notify { flow, nsent } => {
                w.u64(flow);
                w.u64(nsent);
                0x05
            }
            ToDaemon::Update {
                flow,
                nsent,
                nrecd,
                loss,
                rtt_us,
                lost_age_us,
            } => {
                w.u64(flow);
                w.u64(nsent);
                w.u64(nrecd);
                w.u8(loss_to_u8(loss));
                w.opt_u64(rtt_us);
                w.opt_u64(lost_age_us);
                0x06
            }
            ToDaemon::Query { seq, flow } => {
                w.u32(seq);
                w.u64(flow);
                0x07
            }
            ToDaemon::Mtu { seq, flow } => {
                w.u32(seq);
                w.u64(flow);
                0x08
            }
            ToDaemon::RateUpdates { flow, on } => {
                w.u64(flow);
                w.bool(on);
                0x09
            }
            ToDaemon::Thresh {
                flow,
                rate_down,
                rate_up,
                rtt_down,
                rtt_up,
            } => {
                w.u64(flow);
                w.f64(rate_down);
                w.f64(rate_up);
                w.f64(rtt_down);
                w.f64(rtt_up);
                0x0a
            }
            ToDaemon::GetMacroflow { seq, flow } => {
                w.u32(seq);
                w.u64(flow);
                0x0b
            }
            ToDaemon::SetMacroflow { seq, flow, target } => {
                w.u32(seq);
                w.u64(flow);
                w.opt_u64(target);
                0x0c
            }
            ToDaemon::SetWeight { flow, weight } => {
                w.u64(flow);
                w.u32(weight);
                0x0d
            }
            ToDaemon::Stat { seq } => {
                w.u32(seq);
                0x0e
            }
            ToDaemon::QueryHost { seq, dst } => {
                w.u32(seq);
                w.ip(dst);
                0x0f
            }
            ToDaemon::Ping { seq } => {
                w.u32(seq);
                0x10
            }
            ToDaemon::Attach { seq } => {
                w.u32(seq);
                0x11
            }
            ToDaemon::SocketDoorbell { on } => {
                w.bool(on);
                0x12
            }
            ToDaemon::SetController {
                seq,
                flow,
                ref spec,
            } => {
                w.u32(seq);
                w.u64(flow);
                w.text(spec, MAX_SPEC);
                0x13
            }
            ToDaemon::SetCapacity { flow, capacity } => {
                w.u64(flow);
                w.opt_u64(capacity);
                0x14
            }
            ToDaemon::CapacitySample { flow, sample } => {
                w.u64(flow);
                w.u64(sample);
                0x17
            }
            ToDaemon::SetPeer { flow, ref peer } => {
                w.u64(flow);
                put_peer(&mut w, peer);
                0x15
            }
            ToDaemon::SetFeedbackLag { flow, lag } => {
                w.u64(flow);
                w.opt_u64(lag.map(u64::from));
                0x16
            }
        }
    }

    fn decode_body(tag: u8, body: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(body);
        let m = match tag {
            0x01 => ToDaemon::Hello { version: r.u8()? },
            0x02 => ToDaemon::Open {
                seq: r.u32()?,
                src: r.opt_sockaddr()?,
                dst: r.sockaddr()?,
            },
            0x03 => ToDaemon::Close { flow: r.u64()? },
            0x04 => ToDaemon::Request {
                flow: r.u64()?,
                k: r.u32()?,
            },
            0x05 => ToDaemon::Notify {
                flow: r.u64()?,
                nsent: r.u64()?,
            },
            0x06 => ToDaemon::Update {
                flow: r.u64()?,
                nsent: r.u64()?,
                nrecd: r.u64()?,
                loss: loss_from_u8(r.u8()?)?,
                // One encoding per message: an absent sample is zero.
                rtt_us: r.opt_u64("rtt without its flag")?,
                lost_age_us: r.opt_u64("lost data's age without its flag")?,
            },
            0x07 => ToDaemon::Query {
                seq: r.u32()?,
                flow: r.u64()?,
            },
            0x08 => ToDaemon::Mtu {
                seq: r.u32()?,
                flow: r.u64()?,
            },
            0x09 => ToDaemon::RateUpdates {
                flow: r.u64()?,
                on: r.bool()?,
            },
            0x0a => ToDaemon::Thresh {
                flow: r.u64()?,
                rate_down: r.f64()?,
                rate_up: r.f64()?,
                rtt_down: r.f64()?,
                rtt_up: r.f64()?,
            },
            0x0b => ToDaemon::GetMacroflow {
                seq: r.u32()?,
                flow: r.u64()?,
            },
            0x0c => ToDaemon::SetMacroflow {
                seq: r.u32()?,
                flow: r.u64()?,
                target: r.opt_u64("target without its flag")?,
            },
            0x0d => ToDaemon::SetWeight {
                flow: r.u64()?,
                weight: r.u32()?,
            },
            0x0e => ToDaemon::Stat { seq: r.u32()? },
            0x0f => ToDaemon::QueryHost {
                seq: r.u32()?,
                dst: r.ip()?,
            },
            0x10 => ToDaemon::Ping { seq: r.u32()? },
            0x11 => ToDaemon::Attach { seq: r.u32()? },
            0x12 => ToDaemon::SocketDoorbell { on: r.bool()? },
            0x13 => ToDaemon::SetController {
                seq: r.u32()?,
                flow: r.u64()?,
                spec: r.text(MAX_SPEC, "controller spec too long or not UTF-8")?,
            },
            0x14 => ToDaemon::SetCapacity {
                flow: r.u64()?,
                capacity: r.opt_u64("capacity without its flag")?,
            },
            0x17 => ToDaemon::CapacitySample {
                flow: r.u64()?,
                sample: r.u64()?,
            },
            0x15 => ToDaemon::SetPeer {
                flow: r.u64()?,
                peer: get_peer(&mut r)?,
            },
            0x16 => ToDaemon::SetFeedbackLag {
                flow: r.u64()?,
                lag: match r.opt_u64("feedback lag without its flag")? {
                    None => None,
                    Some(v) => {
                        Some(u16::try_from(v).map_err(|_| DecodeError::Invalid("feedback lag"))?)
                    }
                },
            },
            t => return Err(DecodeError::UnknownTag(t)),
        };
        match r.remaining() {
            0 => Ok(m),
            n => Err(DecodeError::Trailing(n)),
        }
    }
}

impl Message for ToClient {
    fn encode_body(&self, buf: &mut Vec<u8>) -> u8 {
        let mut w = Writer { buf };
        match self {
            ToClient::Welcome {
                version,
                client,
                uid,
                mtu,
            } => {
                w.u8(*version);
                w.u64(*client);
                w.u32(*uid);
                w.u32(*mtu);
                0x81
            }
            ToClient::Grant { flow, bytes } => {
                w.u64(*flow);
                w.u64(*bytes);
                0x82
            }
            ToClient::RateUpdate { flow, estimate } => {
                w.u64(*flow);
                put_estimate(&mut w, estimate);
                0x83
            }
            ToClient::GrantExpired { flow, bytes } => {
                w.u64(*flow);
                w.u64(*bytes);
                0x84
            }
            ToClient::Opened { seq, flow } => {
                w.u32(*seq);
                w.u64(*flow);
                0x86
            }
            ToClient::Estimate { seq, estimate } => {
                w.u32(*seq);
                put_estimate(&mut w, estimate);
                0x87
            }
            ToClient::Mtu { seq, mtu } => {
                w.u32(*seq);
                w.u32(*mtu);
                0x88
            }
            ToClient::Macroflow { seq, id } => {
                w.u32(*seq);
                w.u64(*id);
                0x89
            }
            ToClient::Error { seq, flow, code } => {
                w.u32(*seq);
                w.u64(*flow);
                w.u16(code.to_u16());
                0x8a
            }
            ToClient::StatMacroflow { seq, stat } => {
                w.u32(*seq);
                w.u64(stat.id);
                w.opt_ip(stat.dst);
                w.u32(stat.uid);
                w.u64(stat.window);
                put_estimate(&mut w, &stat.estimate);
                w.u64(stat.in_flight);
                w.u32(stat.flows);
                w.text(&stat.controller, MAX_NAME);
                w.opt_u64(stat.capacity);
                w.u64(stat.reductions);
                w.u64(stat.timeouts);
                0x8b
            }
            ToClient::StatFlow { seq, stat } => {
                w.u32(*seq);
                w.u64(stat.id);
                w.u64(stat.macroflow);
                w.u32(stat.uid);
                w.u32(stat.pid);
                w.sockaddr(stat.dst);
                w.f64(stat.share);
                w.u64(stat.in_flight);
                w.u64(stat.sent);
                w.u64(stat.lost);
                put_estimate(&mut w, &stat.estimate);
                put_peer(&mut w, &stat.peer);
                w.opt_sockaddr(stat.kernel);
                0x8c
            }
            ToClient::StatEnd { seq } => {
                w.u32(*seq);
                0x8d
            }
            ToClient::Pong { seq } => {
                w.u32(*seq);
                0x8e
            }
            ToClient::Attached { seq, ring_bytes } => {
                w.u32(*seq);
                w.u32(*ring_bytes);
                0x8f
            }
            ToClient::Done { seq } => {
                w.u32(*seq);
                0x90
            }
            ToClient::Refused {
                seq,
                flow,
                code,
                why,
            } => {
                w.u32(*seq);
                w.u64(*flow);
                w.u16(code.to_u16());
                w.text(why, MAX_WHY);
                0x91
            }
        }
    }

    fn decode_body(tag: u8, body: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(body);
        let m = match tag {
            0x81 => ToClient::Welcome {
                version: r.u8()?,
                client: r.u64()?,
                uid: r.u32()?,
                mtu: r.u32()?,
            },
            0x82 => ToClient::Grant {
                flow: r.u64()?,
                bytes: r.u64()?,
            },
            0x83 => ToClient::RateUpdate {
                flow: r.u64()?,
                estimate: get_estimate(&mut r)?,
            },
            0x84 => ToClient::GrantExpired {
                flow: r.u64()?,
                bytes: r.u64()?,
            },
            0x86 => ToClient::Opened {
                seq: r.u32()?,
                flow: r.u64()?,
            },
            0x87 => ToClient::Estimate {
                seq: r.u32()?,
                estimate: get_estimate(&mut r)?,
            },
            0x88 => ToClient::Mtu {
                seq: r.u32()?,
                mtu: r.u32()?,
            },
            0x89 => ToClient::Macroflow {
                seq: r.u32()?,
                id: r.u64()?,
            },
            0x8a => ToClient::Error {
                seq: r.u32()?,
                flow: r.u64()?,
                code: ErrorCode::from_u16(r.u16()?).ok_or(DecodeError::Invalid("error code"))?,
            },
            0x8b => ToClient::StatMacroflow {
                seq: r.u32()?,
                stat: MacroflowStat {
                    id: r.u64()?,
                    dst: r.opt_ip()?,
                    uid: r.u32()?,
                    window: r.u64()?,
                    estimate: get_estimate(&mut r)?,
                    in_flight: r.u64()?,
                    flows: r.u32()?,
                    controller: r.text(MAX_NAME, "controller name too long or not UTF-8")?,
                    capacity: r.opt_u64("capacity without its flag")?,
                    reductions: r.u64()?,
                    timeouts: r.u64()?,
                },
            },
            0x8c => ToClient::StatFlow {
                seq: r.u32()?,
                stat: FlowStat {
                    id: r.u64()?,
                    macroflow: r.u64()?,
                    uid: r.u32()?,
                    pid: r.u32()?,
                    dst: r.sockaddr()?,
                    share: r.f64()?,
                    in_flight: r.u64()?,
                    sent: r.u64()?,
                    lost: r.u64()?,
                    estimate: get_estimate(&mut r)?,
                    peer: get_peer(&mut r)?,
                    kernel: r.opt_sockaddr()?,
                },
            },
            0x8d => ToClient::StatEnd { seq: r.u32()? },
            0x8e => ToClient::Pong { seq: r.u32()? },
            0x8f => ToClient::Attached {
                seq: r.u32()?,
                ring_bytes: r.u32()?,
            },
            0x90 => ToClient::Done { seq: r.u32()? },
            0x91 => ToClient::Refused {
                seq: r.u32()?,
                flow: r.u64()?,
                code: ErrorCode::from_u16(r.u16()?).ok_or(DecodeError::Invalid("error code"))?,
                why: r.text(MAX_WHY, "refusal text too long or not UTF-8")?,
            },
            t => return Err(DecodeError::UnknownTag(t)),
        };
        match r.remaining() {
            0 => Ok(m),
            n => Err(DecodeError::Trailing(n)),
        }
    }
}

#[cfg(test)]
mod tests;
