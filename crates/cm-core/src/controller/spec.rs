//! The text form of a [`ControllerConfig`], shared by `cmd.toml`, scenario
//! files, the C API (`cm_set_controller`) and the command line:
//!
//! ```text
//! NAME[:KEY=VALUE[,KEY=VALUE...]]
//!
//! aimd                      the papers' window-based AIMD (the default)
//! binomial:k=1,l=0          any binomial scheme (iscc §II eq. 3)
//! iiad, sqrt, aimd:...      the presets; with keys, aimd is the binomial preset
//! iscc[:l=2,m_d=2,m_i=20]   ISCC(l) (iscc §V-D)
//! tfrc[:s=180]              TFRC (RFC 5348)
//!
//! keys of binomial, iiad, sqrt, aimd:
//!   k, l, alpha, beta       the powers and window-notation constants
//!   mode=rate|window        rate-based (default) or ACK-clocked window
//!   mtu_rtt=5000            fixed MTU/RTT in bit/s (k, M, G suffixes) for eq. 4
//!   interval=100ms          control interval R (default: the smoothed RTT)
//!   min_rate, initial_rate  bit/s
//!   slow_start=true|false
//! keys of iscc: l, m_d, m_i, capacity (bit/s, until an estimate arrives),
//!   interval, min_rate, initial_rate, slow_start
//! keys of tfrc: s (the equation's packet size in bytes, iscc §VI-C's
//!   "TFRC MTU"), t_mbi (seconds, default 64), history (loss intervals, 8),
//!   min_rate (bit/s, an application floor such as a base layer)
//! ```
//!
//! ```
//! use cm_core::controller::ControllerConfig;
//! let c: ControllerConfig = "iscc:l=2,m_i=20".parse().unwrap();
//! assert_eq!(c.to_string(), "iscc:l=2,m_d=2,m_i=20");
//! assert!("iscc:l=0.5".parse::<ControllerConfig>().is_err());
//! ```

use core::fmt;
use core::str::FromStr;

use crate::controller::{BinomialConfig, ControllerConfig, IsccConfig, Mode, TfrcConfig};
use crate::time::Duration;
use crate::units::Bytes;
use crate::units::Rate;

/// Why a controller spec does not parse.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("controller {spec:?}: {why}")]
pub struct SpecError {
    /// The text given.
    pub spec: String,
    /// What is wrong with it.
    pub why: String,
}

/// The controller names the text form knows.
pub const NAMES: &[&str] = &["aimd", "binomial", "iiad", "sqrt", "iscc", "tfrc"];

fn num(key: &str, v: &str) -> Result<f64, String> {
    v.trim()
        .parse::<f64>()
        .ok()
        .filter(|x| x.is_finite())
        .ok_or_else(|| format!("{key}={v:?} is not a number"))
}

/// A rate in bit/s with an optional k, M or G suffix (and optional "bit/s").
fn rate(key: &str, v: &str) -> Result<Rate, String> {
    let t = v.trim().trim_end_matches("bit/s").trim_end_matches("bps");
    let (n, mul) = match t.char_indices().last() {
        Some((i, 'k' | 'K')) => (&t[..i], 1e3),
        Some((i, 'M')) => (&t[..i], 1e6),
        Some((i, 'G')) => (&t[..i], 1e9),
        _ => (t, 1.0),
    };
    let bits = num(key, n)? * mul;
    if !(8.0..=1e13).contains(&bits) {
        return Err(format!(
            "{key}={v:?} is out of range (8 bit/s to 10 Tbit/s)"
        ));
    }
    Ok(Rate::from_bits_per_sec(bits as u64))
}

/// A duration: `100ms`, `0.1s`, `250us`, or a bare number of milliseconds.
fn duration(key: &str, v: &str) -> Result<Duration, String> {
    let t = v.trim();
    let (n, us_per) = if let Some(n) = t.strip_suffix("us") {
        (n, 1.0)
    } else if let Some(n) = t.strip_suffix("ms") {
        (n, 1e3)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1e6)
    } else {
        (t, 1e3)
    };
    let us = num(key, n)? * us_per;
    if !(1.0..=3.6e9).contains(&us) {
        return Err(format!("{key}={v:?} is out of range (1 µs to 1 h)"));
    }
    Ok(Duration::from_micros(us as u64))
}

fn boolean(key: &str, v: &str) -> Result<bool, String> {
    match v.trim() {
        "true" | "on" | "yes" | "1" => Ok(true),
        "false" | "off" | "no" | "0" => Ok(false),
        _ => Err(format!("{key}={v:?} is not true or false")),
    }
}

fn binomial_key(c: &mut BinomialConfig, k: &str, v: &str) -> Result<(), String> {
    match k {
        "k" => c.k = num(k, v)?,
        "l" => c.l = num(k, v)?,
        "alpha" => c.alpha = num(k, v)?,
        "beta" => c.beta = num(k, v)?,
        "mode" => {
            c.mode = match v.trim() {
                "rate" => Mode::Rate,
                "window" => Mode::Window,
                _ => return Err(format!("mode={v:?}: use rate or window")),
            }
        }
        "mtu_rtt" => c.mtu_per_rtt = Some(rate(k, v)?),
        "interval" => c.interval = Some(duration(k, v)?),
        "min_rate" => c.min_rate = Some(rate(k, v)?),
        "initial_rate" => c.initial_rate = Some(rate(k, v)?),
        "slow_start" => c.slow_start = boolean(k, v)?,
        _ => return Err(format!("unknown key {k:?} for a binomial scheme")),
    }
    Ok(())
}

fn iscc_key(c: &mut IsccConfig, k: &str, v: &str) -> Result<(), String> {
    match k {
        "l" => c.l = num(k, v)?,
        "m_d" => c.m_d = num(k, v)?,
        "m_i" => c.m_i = num(k, v)?,
        "capacity" => c.capacity = Some(rate(k, v)?),
        "interval" => c.interval = Some(duration(k, v)?),
        "min_rate" => c.min_rate = Some(rate(k, v)?),
        "initial_rate" => c.initial_rate = Some(rate(k, v)?),
        "slow_start" => c.slow_start = boolean(k, v)?,
        _ => return Err(format!("unknown key {k:?} for iscc")),
    }
    Ok(())
}

fn tfrc_key(c: &mut TfrcConfig, k: &str, v: &str) -> Result<(), String> {
    match k {
        "s" => {
            let b = num(k, v)?;
            if !(1.0..=65_535.0).contains(&b) {
                return Err(format!("s={v:?} must be 1..=65535 bytes"));
            }
            c.equation_packet_size = Some(Bytes(b as u64));
        }
        "t_mbi" => c.t_mbi = duration(k, &format!("{v}s"))?,
        "history" => {
            let n = num(k, v)?;
            if !(1.0..=1024.0).contains(&n) {
                return Err(format!("history={v:?} must be 1..=1024"));
            }
            c.history_len = n as usize;
        }
        "min_rate" => c.min_rate = Some(rate(k, v)?),
        _ => return Err(format!("unknown key {k:?} for tfrc")),
    }
    Ok(())
}

fn parse(spec: &str) -> Result<ControllerConfig, String> {
    let spec = spec.trim();
    let (name, rest) = spec.split_once(':').unwrap_or((spec, ""));
    let pairs: Vec<(&str, &str)> = rest
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(|p| {
            p.split_once('=')
                .ok_or_else(|| format!("{p:?} is not KEY=VALUE"))
        })
        .collect::<Result<_, _>>()?;
    let cfg = match name.trim() {
        "aimd" if pairs.is_empty() => return Ok(ControllerConfig::default()),
        n @ ("aimd" | "binomial" | "iiad" | "sqrt") => {
            let mut c = match n {
                "iiad" => BinomialConfig::iiad(),
                "sqrt" => BinomialConfig::sqrt(),
                _ => BinomialConfig::aimd(),
            };
            let has = |key: &str| pairs.iter().any(|(k, _)| k.trim() == key);
            if n == "binomial" && !(has("k") && has("l")) {
                return Err("binomial needs k and l (e.g. binomial:k=1,l=0)".into());
            }
            for (k, v) in pairs {
                binomial_key(&mut c, k.trim(), v)?;
            }
            ControllerConfig::Binomial(c)
        }
        "iscc" => {
            let mut c = IsccConfig::default();
            let mut m_d_given = false;
            for (k, v) in pairs {
                m_d_given |= k.trim() == "m_d";
                iscc_key(&mut c, k.trim(), v)?;
            }
            if !m_d_given {
                c.m_d = c.m_d.max(c.l);
            }
            ControllerConfig::Iscc(c)
        }
        "tfrc" => {
            let mut c = TfrcConfig::default();
            for (k, v) in pairs {
                tfrc_key(&mut c, k.trim(), v)?;
            }
            ControllerConfig::Tfrc(c)
        }
        other => {
            return Err(format!(
                "unknown controller {other:?} (known: {})",
                NAMES.join(", ")
            ));
        }
    };
    cfg.validate()?;
    Ok(cfg)
}

impl FromStr for ControllerConfig {
    type Err = SpecError;

    fn from_str(s: &str) -> Result<Self, SpecError> {
        parse(s).map_err(|why| SpecError {
            spec: s.to_string(),
            why,
        })
    }
}

fn push_opt_rate(out: &mut Vec<String>, key: &str, r: Option<Rate>) {
    if let Some(r) = r {
        out.push(format!("{key}={}", r.bits_per_sec()));
    }
}

fn push_opt_interval(out: &mut Vec<String>, d: Option<Duration>) {
    if let Some(d) = d {
        out.push(format!("interval={}us", d.as_micros()));
    }
}

impl fmt::Display for ControllerConfig {
    /// The canonical text form: parsing it gives back an equal config
    /// (rates are held in whole bytes per second, intervals in µs).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut keys = Vec::new();
        let name = match self {
            ControllerConfig::Aimd(_) => "aimd",
            ControllerConfig::Binomial(c) => {
                keys.push(format!("k={}", c.k));
                keys.push(format!("l={}", c.l));
                keys.push(format!("alpha={}", c.alpha));
                keys.push(format!("beta={}", c.beta));
                if c.mode == Mode::Window {
                    keys.push("mode=window".into());
                }
                push_opt_rate(&mut keys, "mtu_rtt", c.mtu_per_rtt);
                push_opt_interval(&mut keys, c.interval);
                push_opt_rate(&mut keys, "min_rate", c.min_rate);
                push_opt_rate(&mut keys, "initial_rate", c.initial_rate);
                if !c.slow_start {
                    keys.push("slow_start=false".into());
                }
                "binomial"
            }
            ControllerConfig::Iscc(c) => {
                keys.push(format!("l={}", c.l));
                keys.push(format!("m_d={}", c.m_d));
                keys.push(format!("m_i={}", c.m_i));
                push_opt_rate(&mut keys, "capacity", c.capacity);
                push_opt_interval(&mut keys, c.interval);
                push_opt_rate(&mut keys, "min_rate", c.min_rate);
                push_opt_rate(&mut keys, "initial_rate", c.initial_rate);
                if !c.slow_start {
                    keys.push("slow_start=false".into());
                }
                "iscc"
            }
            ControllerConfig::Tfrc(c) => {
                if let Some(b) = c.equation_packet_size {
                    keys.push(format!("s={}", b.get()));
                }
                if c.t_mbi != TfrcConfig::default().t_mbi {
                    keys.push(format!("t_mbi={}", c.t_mbi.as_secs_f64()));
                }
                if c.history_len != TfrcConfig::default().history_len {
                    keys.push(format!("history={}", c.history_len));
                }
                push_opt_rate(&mut keys, "min_rate", c.min_rate);
                "tfrc"
            }
        };
        if keys.is_empty() {
            f.write_str(name)
        } else {
            write!(f, "{name}:{}", keys.join(","))
        }
    }
}
