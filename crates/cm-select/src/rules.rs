//! The decision: requirements in, [`Choice`] or [`SelectError`] out (the
//! rule table is in the crate docs).

use cm_core::{Duration, Rate};

use crate::choice::{Buffering, Choice, Controller, Transport};
use crate::error::SelectError;
use crate::props::{Feedback, Preference, RateShape, Requirements};
use crate::tuning;

const RAW_UDP_REFUSED: &str = "raw UDP refused because congestion control is not prohibited";

/// Pick and tune a transport for `req` (rule table: crate docs).
pub fn select(req: &Requirements) -> Result<Choice, SelectError> {
    validate(req)?;
    use Preference::*;
    let all_prohibited = [
        req.reliability,
        req.preserve_order,
        req.preserve_msg_boundaries,
        req.congestion_control,
    ]
    .iter()
    .all(|p| *p == Prohibit);
    if all_prohibited {
        return Err(SelectError::EverythingProhibited);
    }
    if req.congestion_control == Prohibit {
        return raw_udp(req);
    }
    let mut notes = Vec::new();
    if req.congestion_control == Avoid {
        notes.push(
            "congestionControl Avoid not honoured: only raw UDP runs without it, and only \
             when Prohibited (RFC 8085 §3.1)"
                .to_owned(),
        );
    }
    let reliable = match req.reliability {
        Require => true,
        Prefer if req.target_delay.is_some() => {
            notes.push(
                "reliability Preferred but dropped for the delay target (a retransmission \
                 costs at least one RTT)"
                    .to_owned(),
            );
            false
        }
        Prefer => true,
        NoPreference => req.preserve_order.wanted() && req.target_delay.is_none(),
        Avoid | Prohibit => false,
    };
    if reliable {
        tcp(req, notes)
    } else {
        cc_udp(req, notes)
    }
}

fn validate(req: &Requirements) -> Result<(), SelectError> {
    let bad = |s: String| Err(SelectError::Invalid(s));
    if req.target_delay.is_some_and(Duration::is_zero) {
        return bad("the one-way delay target is zero".into());
    }
    for (name, r) in [("minimum", req.min_rate), ("target", req.target_rate)] {
        if r.is_some_and(|r| r == Rate::ZERO) {
            return bad(format!("the {name} rate is zero"));
        }
    }
    if let (Some(min), Some(target)) = (req.min_rate, req.target_rate)
        && min > target
    {
        return bad(format!(
            "the minimum rate {min} is above the target rate {target}"
        ));
    }
    match &req.behaviour.shape {
        RateShape::Continuous => {}
        RateShape::Steps(s) => {
            if s.is_empty() {
                return bad("rate steps given but empty".into());
            }
            if s.contains(&Rate::ZERO) {
                return bad("a rate step is zero".into());
            }
            if s.windows(2).any(|w| w[0] >= w[1]) {
                return bad("rate steps must be strictly ascending".into());
            }
            if let Some(t) = req.target_rate
                && !s.contains(&t)
            {
                return bad(format!("the target rate {t} is not one of the rate steps"));
            }
        }
        RateShape::Bounds { min, max } => {
            if *min == Rate::ZERO || min > max {
                return bad(format!(
                    "rate bounds {min}..{max} are empty or start at zero"
                ));
            }
            if let Some(t) = req.target_rate
                && (t < *min || t > *max)
            {
                return bad(format!(
                    "the target rate {t} is outside the bounds {min}..{max}"
                ));
            }
        }
    }
    if let (Some(min), Some(top)) = (req.min_rate, top_rate(req))
        && min > top
    {
        return bad(format!(
            "the minimum rate {min} is above the highest usable rate {top}"
        ));
    }
    if let Some(oo) = req.behaviour.on_off
        && (oo.on.is_zero() || oo.off.is_zero())
    {
        return bad("on/off pattern with a zero on or off duration".into());
    }
    Ok(())
}

fn top_rate(req: &Requirements) -> Option<Rate> {
    match &req.behaviour.shape {
        RateShape::Continuous => None,
        RateShape::Steps(s) => s.last().copied(),
        RateShape::Bounds { max, .. } => Some(*max),
    }
}

fn raw_udp(req: &Requirements) -> Result<Choice, SelectError> {
    use Preference::*;
    if req.reliability == Require {
        return Err(SelectError::ReliableWithoutCongestionControl);
    }
    if req.preserve_order == Require {
        return Err(SelectError::OrderWithoutReliability);
    }
    if req.preserve_msg_boundaries == Prohibit {
        return Err(SelectError::UnreliableStream);
    }
    let mut notes = Vec::new();
    if req.reliability.wanted() {
        notes.push("reliability Preferred but unavailable without congestion control".into());
    }
    let (packet, delay_note) = packet_size(req, 0)?;
    notes.extend(delay_note);
    Ok(Choice {
        transport: Transport::Udp,
        controller: None,
        packet_size: Some(packet),
        buffering: delay_buffering(req),
        nodelay: false,
        why: "congestionControl explicitly Prohibited (RFC 9622 §6.2.9), so unresponsive \
              UDP; it can starve TCP and cause congestion collapse (paper §3, RFC 8085 §3.1)"
            .into(),
        notes,
    })
}

fn tcp(req: &Requirements, mut notes: Vec<String>) -> Result<Choice, SelectError> {
    use Preference::*;
    if req.preserve_msg_boundaries == Require {
        return Err(SelectError::NeedsSctp(
            "reliable delivery with preserved message boundaries (TCP is a byte stream; set \
             preserveMsgBoundaries to prefer to accept TCP and frame messages yourself)"
                .into(),
        ));
    }
    if req.preserve_order == Prohibit {
        return Err(SelectError::NeedsSctp("reliable unordered delivery".into()));
    }
    if req.preserve_msg_boundaries == Prefer {
        notes.push("message boundaries Preferred but not kept (byte stream)".into());
    }
    if req.preserve_order == Avoid {
        notes.push("delivered in order anyway".into());
    }
    let nodelay = req.target_delay.is_some();
    let buffering = on_off_buffering(req);
    let why = if nodelay {
        "a reliable ordered stream needs TCP (RFC 9293, paper §2.1); delay-sensitive, so \
         Nagle off"
    } else if matches!(buffering, Buffering::Bytes(_)) {
        "a reliable ordered stream needs TCP (RFC 9293, paper §2.1); the send buffer \
         carries the on/off sender through its pauses against cwnd decay (RFC 2861, paper §4.1)"
    } else {
        "a reliable ordered stream needs TCP (RFC 9293, paper §2.1)"
    };
    Ok(Choice {
        transport: Transport::LinuxTcp,
        controller: None,
        packet_size: None,
        buffering,
        nodelay,
        why: why.into(),
        notes,
    })
}

fn cc_udp(req: &Requirements, mut notes: Vec<String>) -> Result<Choice, SelectError> {
    if req.preserve_order == Preference::Require {
        return Err(SelectError::OrderWithoutReliability);
    }
    if req.preserve_msg_boundaries == Preference::Prohibit {
        return Err(SelectError::UnreliableStream);
    }
    let (packet, delay_note) = packet_size(req, tuning::CCUDP_HEADER)?;
    let (controller, why) = controller_for(req);
    let buffering = match delay_buffering(req) {
        Buffering::Default => on_off_buffering(req),
        b => b,
    };
    notes.extend(delay_note);
    notes.push(RAW_UDP_REFUSED.into());
    Ok(Choice {
        transport: Transport::CcUdp,
        controller: Some(controller),
        packet_size: Some(packet),
        buffering,
        nodelay: false,
        why,
        notes,
    })
}

/// The controller rule for unreliable congestion-controlled traffic, first
/// match wins (crate docs).
fn controller_for(req: &Requirements) -> (Controller, String) {
    let b = &req.behaviour;
    if req.feedback == Feedback::Nack {
        return (
            Controller::Iscc,
            "NACK-based real-time streaming needs packet loss that grows little with the \
             number of flows: ISCC is designed for it (iscc §V-D), and on an emulated T1 \
             its loss grew the least of four controllers as flows were added (docs/apps.md)"
                .into(),
        );
    }
    if let Some(d) = req.target_delay {
        return (
            Controller::Tfrc,
            format!(
                "unreliable, delay-sensitive (target {} ms) media needs a smooth TCP-friendly \
                 rate (RFC 5348)",
                d.as_micros() / 1000
            ),
        );
    }
    match &b.shape {
        RateShape::Steps(s) => {
            return (
                Controller::Sqrt,
                format!(
                    "layered media ({} rate steps) needs gentle decreases so layers switch \
                     rarely (binomial SQRT, Bansal & Balakrishnan 2001; paper §4.1)",
                    s.len()
                ),
            );
        }
        RateShape::Bounds { .. } => {
            return (
                Controller::Iiad,
                "rate-bounded adaptive media needs the smallest rate decreases (binomial \
                 IIAD, Bansal & Balakrishnan 2001; paper §4.1)"
                    .into(),
            );
        }
        RateShape::Continuous => {}
    }
    if !b.greedy && req.target_rate.is_some() {
        return (
            Controller::Tfrc,
            "an application-limited unreliable stream needs a smooth TCP-friendly rate \
             (RFC 5348 §1)"
                .into(),
        );
    }
    (
        Controller::Aimd,
        "greedy unreliable bulk data: the CM's window AIMD takes what the path gives, \
         TCP-friendly (sigcomm1999 §4.1, RFC 5681)"
            .into(),
    )
}

/// The payload size (tuning module docs) behind `header` bytes of
/// transport header, and a note when it could not be tuned for delay.
fn packet_size(req: &Requirements, header: usize) -> Result<(usize, Option<String>), SelectError> {
    let max = tuning::MTU_PAYLOAD - header;
    let Some(delay) = req.target_delay else {
        return Ok((max, None));
    };
    let Some(rate) = req.expected_rate() else {
        return Ok((
            max,
            Some("no rate given: MTU-sized packets, delay not tuned".into()),
        ));
    };
    match tuning::payload_for_delay(delay, rate, max) {
        Some(s) => Ok((s, None)),
        None => {
            let num = u128::from(delay.as_micros()) * u128::from(rate.bytes_per_sec()) * 2;
            Err(SelectError::DelayUnreachable {
                delay_ms: delay.as_micros() / 1000,
                rate_bps: rate.bits_per_sec(),
                payload: u64::try_from(num / 15_000_000).unwrap_or(u64::MAX),
                min: tuning::MIN_PAYLOAD,
            })
        }
    }
}

fn delay_buffering(req: &Requirements) -> Buffering {
    if req.target_delay.is_some() {
        Buffering::Packets(1)
    } else {
        Buffering::Default
    }
}

fn on_off_buffering(req: &Requirements) -> Buffering {
    match (req.behaviour.on_off, req.expected_rate(), req.target_delay) {
        (Some(oo), Some(rate), None) if req.behaviour.greedy || req.target_rate.is_some() => {
            Buffering::Bytes(tuning::on_off_buffer(rate, oo.on, oo.off))
        }
        _ => Buffering::Default,
    }
}
