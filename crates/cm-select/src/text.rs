//! The text form of [`Requirements`], shared by `cm select` and the C call
//! `cm_select`: whitespace-separated `key=value` tokens, applied in order
//! to TAPS's defaults ([`Requirements::stream`]).
//!
//! ```text
//! profile=stream|datagram          start again from Requirements::stream / ::datagram
//! reliability=LEVEL                LEVEL: require, prefer, no-preference, avoid, prohibit
//! preserve-order=LEVEL             (TAPS camelCase names are accepted too:
//! preserve-msg-boundaries=LEVEL     preserveOrder, preserveMsgBoundaries,
//! congestion-control=LEVEL          congestionControl)
//! delay=150ms | delay-ms=150       one-way delay target
//! rate=64k                         target rate, bit/s (k, M, G suffixes)
//! min-rate=32k                     minimum rate, bit/s
//! steps=32k,64k,128k               layered media: the usable rates
//! bounds=32k..256k                 adaptive media: the usable range
//! behaviour=greedy|app-limited|on-off:on=2s,off=1s  (join with +)
//! feedback=ack|nack                NACK: rate-based streaming, receivers report loss
//! ```
//!
//! ```
//! use cm_select::{Requirements, Preference};
//! let r: Requirements = "profile=datagram delay-ms=150 rate=64k behaviour=app-limited"
//!     .parse()
//!     .unwrap();
//! assert_eq!(r.reliability, Preference::Avoid);
//! assert_eq!(r.target_rate.unwrap().bits_per_sec(), 64_000);
//! assert!("reliability=maybe".parse::<Requirements>().is_err());
//! ```

use core::str::FromStr;

use cm_core::{Duration, Rate};
use cm_report::parse::Quantity;

use crate::props::{Behaviour, Feedback, OnOff, Preference, RateShape, Requirements};

/// Rates as the requirements write them: bit/s, with k, M or G.
const RATE: Quantity = Quantity {
    what: "rate",
    hint: "expected e.g. 64k, 1.5M, 800000",
    units: &[
        (&["", "bps", "bit/s"], 1.0),
        (&["k", "kbps", "kbit/s", "kbit"], 1e3),
        (&["m", "mbps", "mbit/s", "mbit"], 1e6),
        (&["g", "gbps", "gbit/s", "gbit"], 1e9),
    ],
};

/// Durations as the requirements write them, in µs.
const DURATION: Quantity = Quantity {
    what: "duration",
    hint: "expected a number and a unit: us, ms or s (e.g. 150ms)",
    units: &[(&["us"], 1.0), (&["ms"], 1e3), (&["s"], 1e6)],
};

/// A rate in bit/s with an optional k, M or G suffix (and optional
/// `bit/s` / `bps`), as the controller specs write them
/// ([`cm_report::parse`], the project's unit parser).
pub fn parse_rate(v: &str) -> Result<Rate, String> {
    let (bits, _) = RATE.parse(v).map_err(|e| e.to_string())?;
    if !(8.0..=1e13).contains(&bits) {
        return Err(format!("rate {v:?} is out of range (8 bit/s to 10 Tbit/s)"));
    }
    Ok(Rate::from_bits_per_sec(bits as u64))
}

/// A duration with a unit: `us`, `ms`, `s` (e.g. `150ms`, `1.5s`).
pub fn parse_duration(v: &str) -> Result<Duration, String> {
    let (us, _) = DURATION.parse(v).map_err(|e| e.to_string())?;
    if us > 86_400e6 {
        return Err(format!("duration {v:?} is over a day"));
    }
    Ok(Duration::from_micros(us as u64))
}

fn parse_list(v: &str) -> Result<Vec<Rate>, String> {
    v.split(',').map(parse_rate).collect()
}

fn parse_on_off(v: &str) -> Result<OnOff, String> {
    let (mut on, mut off) = (None, None);
    for kv in v.split(',') {
        match kv.split_once('=') {
            Some(("on", d)) => on = Some(parse_duration(d)?),
            Some(("off", d)) => off = Some(parse_duration(d)?),
            _ => return Err(format!("on-off takes on=DURATION,off=DURATION, not {kv:?}")),
        }
    }
    match (on, off) {
        (Some(on), Some(off)) => Ok(OnOff { on, off }),
        _ => Err("on-off needs both on= and off= (e.g. on-off:on=2s,off=1s)".into()),
    }
}

fn parse_behaviour(v: &str, b: &mut Behaviour) -> Result<(), String> {
    for part in v.split('+') {
        match part.trim() {
            "greedy" => b.greedy = true,
            "app-limited" | "application-limited" => b.greedy = false,
            p => match p.strip_prefix("on-off:") {
                Some(rest) => b.on_off = Some(parse_on_off(rest)?),
                None => {
                    return Err(format!(
                        "behaviour {p:?}: expected greedy, app-limited or on-off:on=2s,off=1s"
                    ));
                }
            },
        }
    }
    Ok(())
}

impl Requirements {
    /// Apply one `key=value` setting (module docs list the keys).
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
        let level = |v: &str| v.parse::<Preference>().map_err(|e| format!("{key}: {e}"));
        match key.trim() {
            "profile" => {
                *self = match value.trim() {
                    "stream" => Requirements::stream(),
                    "datagram" => Requirements::datagram(),
                    v => return Err(format!("profile {v:?}: expected stream or datagram")),
                }
            }
            "reliability" => self.reliability = level(value)?,
            "preserve-order" | "preserveOrder" => self.preserve_order = level(value)?,
            "preserve-msg-boundaries" | "preserveMsgBoundaries" => {
                self.preserve_msg_boundaries = level(value)?;
            }
            "congestion-control" | "congestionControl" => {
                self.congestion_control = level(value)?;
            }
            "delay" => self.target_delay = Some(parse_duration(value)?),
            "delay-ms" => {
                let ms = value
                    .trim()
                    .parse::<u64>()
                    .ok()
                    .filter(|ms| *ms <= 86_400_000)
                    .ok_or_else(|| format!("delay-ms {value:?} is not a whole number of ms"))?;
                self.target_delay = Some(Duration::from_millis(ms));
            }
            "rate" | "target-rate" => self.target_rate = Some(parse_rate(value)?),
            "min-rate" | "minSendRate" => self.min_rate = Some(parse_rate(value)?),
            "steps" => self.behaviour.shape = RateShape::Steps(parse_list(value)?),
            "bounds" => {
                let (lo, hi) = value.split_once("..").ok_or_else(|| {
                    format!("bounds {value:?}: expected MIN..MAX (e.g. 32k..256k)")
                })?;
                self.behaviour.shape = RateShape::Bounds {
                    min: parse_rate(lo)?,
                    max: parse_rate(hi)?,
                };
            }
            "behaviour" | "behavior" => parse_behaviour(value, &mut self.behaviour)?,
            "feedback" => {
                self.feedback = match value.trim() {
                    "ack" => Feedback::Ack,
                    "nack" => Feedback::Nack,
                    v => return Err(format!("feedback {v:?}: expected ack or nack")),
                }
            }
            k => return Err(format!("unknown requirement {k:?}")),
        }
        Ok(())
    }
}

impl FromStr for Requirements {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let mut r = Requirements::stream();
        for tok in s.split_whitespace() {
            let (k, v) = tok
                .split_once('=')
                .ok_or_else(|| format!("{tok:?}: expected key=value"))?;
            r.set(k, v)?;
        }
        Ok(r)
    }
}
