//! Path configuration, validation and parsing of human-friendly units.

use std::time::Duration;

use cm_report::parse::{ParseError, Quantity};
use serde::{Deserialize, Serialize};

/// Size of an MTU-sized packet used to convert a queue given in packets to bytes.
pub const PACKET_BYTES: u64 = 1500;

/// Size of the bottleneck queue (the `tbf` limit).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Queue {
    /// Queue limit in bytes.
    Bytes(u64),
    /// Queue limit in MTU-sized (1500-byte) packets.
    Packets(u64),
    /// One bandwidth-delay product: `rate × 2 × one-way delay` (at least 2 packets).
    Bdp,
}

impl Queue {
    /// The queue limit in bytes for a given configuration.
    pub fn bytes(&self, rate_bps: u64, one_way_delay: Duration) -> u64 {
        match *self {
            Queue::Bytes(n) => n,
            Queue::Packets(n) => n.saturating_mul(PACKET_BYTES),
            Queue::Bdp => {
                let bdp = rate_bps as f64 / 8.0 * 2.0 * one_way_delay.as_secs_f64();
                (bdp.round() as u64).max(2 * PACKET_BYTES)
            }
        }
    }
}

/// Everything that defines an emulated path.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PathConfig {
    /// Bottleneck rate sender → receiver, in bits per second (IP-level bytes).
    pub rate_bps: u64,
    /// One-way delay added in each direction by the delay box.
    pub one_way_delay: Duration,
    /// Bottleneck queue size.
    pub queue: Queue,
    /// Random loss probability at the receiver's ingress, in `[0, 1)`.
    pub loss: f64,
    /// Optional rate limit receiver → sender (same queue size); `None` = unlimited.
    pub reverse_rate_bps: Option<u64>,
    /// Probability, in `[0, 1]`, that the delay box holds a sender → receiver packet
    /// back by [`reorder_delay`](Self::reorder_delay) beyond the one-way delay, so
    /// packets behind it overtake it (reordering). Not serialized when 0.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub reorder: f64,
    /// Extra delay of a held-back packet; must be non-zero when `reorder` is.
    #[serde(default, skip_serializing_if = "Duration::is_zero")]
    pub reorder_delay: Duration,
    /// Probability, in `[0, 1]`, that the delay box writes a sender → receiver packet
    /// twice (duplication; the copy right after the original). Not serialized when 0.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub duplicate: f64,
    /// The bottleneck `tbf`'s bucket, bytes; `None`: [`crate::tbf_burst`]
    /// (a couple of MTUs or 1 ms of tokens). A bucket of one packet
    /// (1520 bytes) spaces packets that arrive back to back at the link's
    /// rate even after the link was idle, as a serial line does, which
    /// packet-bunch capacity measurements need (iscc §VI-B); a bigger one
    /// lets the first packets of a burst through together. Not serialized
    /// when `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burst_bytes: Option<u64>,
}

/// `skip_serializing_if` for the optional impairments: a configuration without them
/// serializes as before.
fn is_zero(x: &f64) -> bool {
    *x == 0.0
}

impl Default for PathConfig {
    /// 10 Mbit/s, 30 ms one way, one BDP of queue, no loss, reordering or duplication.
    fn default() -> Self {
        PathConfig {
            rate_bps: 10_000_000,
            one_way_delay: Duration::from_millis(30),
            queue: Queue::Bdp,
            loss: 0.0,
            reverse_rate_bps: None,
            reorder: 0.0,
            reorder_delay: Duration::ZERO,
            duplicate: 0.0,
            burst_bytes: None,
        }
    }
}

/// A configuration value that cannot be used.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ConfigError {
    /// Rate is zero or too large for `tbf`.
    #[error("rate must be between 8 kbit/s and 100 Gbit/s, got {0} bit/s")]
    Rate(u64),
    /// One-way delay out of range.
    #[error("one-way delay must be at most 10 s, got {0:?}")]
    Delay(Duration),
    /// Loss out of range.
    #[error("loss must be a probability in [0, 1), got {0}")]
    Loss(f64),
    /// Reorder probability out of range.
    #[error("reorder must be a probability in [0, 1], got {0}")]
    Reorder(f64),
    /// Reorder delay out of range, or zero with a non-zero reorder probability.
    #[error("reorder delay must be at most 10 s, and non-zero when reorder > 0, got {0:?}")]
    ReorderDelay(Duration),
    /// Duplicate probability out of range.
    #[error("duplicate must be a probability in [0, 1], got {0}")]
    Duplicate(f64),
    /// Queue too small or too large.
    #[error("queue must be between 1500 bytes (one packet) and 1 GB, got {0} bytes")]
    Queue(u64),
    /// Bucket too small for a packet or too large.
    #[error("tbf burst must be between 1520 bytes (one packet) and 1 GB, got {0} bytes")]
    Burst(u64),
    /// A string could not be parsed.
    #[error("cannot parse {what} {input:?}: {hint}")]
    Parse {
        /// What was being parsed.
        what: &'static str,
        /// The input text.
        input: String,
        /// What is expected.
        hint: &'static str,
    },
}

impl From<ParseError> for ConfigError {
    fn from(e: ParseError) -> ConfigError {
        ConfigError::Parse {
            what: e.what,
            input: e.input,
            hint: e.hint,
        }
    }
}

impl PathConfig {
    /// Check that every value is usable; the error says which one is not.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let rate_ok = |r: u64| (8_000..=100_000_000_000).contains(&r);
        if !rate_ok(self.rate_bps) {
            return Err(ConfigError::Rate(self.rate_bps));
        }
        if let Some(r) = self.reverse_rate_bps {
            if !rate_ok(r) {
                return Err(ConfigError::Rate(r));
            }
        }
        if self.one_way_delay > Duration::from_secs(10) {
            return Err(ConfigError::Delay(self.one_way_delay));
        }
        if !(self.loss.is_finite() && (0.0..1.0).contains(&self.loss)) {
            return Err(ConfigError::Loss(self.loss));
        }
        check_reorder(self.reorder, self.reorder_delay)?;
        check_duplicate(self.duplicate)?;
        let q = self.queue_bytes();
        if !(PACKET_BYTES..=1_000_000_000).contains(&q) {
            return Err(ConfigError::Queue(q));
        }
        if let Some(b) = self.burst_bytes {
            if !(1520..=1_000_000_000).contains(&b) {
                return Err(ConfigError::Burst(b));
            }
        }
        Ok(())
    }

    /// The bottleneck queue limit in bytes.
    pub fn queue_bytes(&self) -> u64 {
        self.queue.bytes(self.rate_bps, self.one_way_delay)
    }
}

/// Whether `p` and `delay` are a usable reordering (also for [`Path::set_reorder`]).
///
/// [`Path::set_reorder`]: crate::Path::set_reorder
pub(crate) fn check_reorder(p: f64, delay: Duration) -> Result<(), ConfigError> {
    if !(0.0..=1.0).contains(&p) {
        return Err(ConfigError::Reorder(p));
    }
    if delay > Duration::from_secs(10) || (p > 0.0 && delay.is_zero()) {
        return Err(ConfigError::ReorderDelay(delay));
    }
    Ok(())
}

/// Whether `p` is a usable duplication probability.
pub(crate) fn check_duplicate(p: f64) -> Result<(), ConfigError> {
    if (0.0..=1.0).contains(&p) {
        Ok(())
    } else {
        Err(ConfigError::Duplicate(p))
    }
}

const RATE: Quantity = Quantity {
    what: "rate",
    hint: "expected e.g. 10mbit, 100Mbit, 500kbit, 1gbit or a number of bit/s",
    units: &[
        (&["", "bit", "bps", "b"], 1.0),
        (&["k", "kbit", "kbps", "kb"], 1e3),
        (&["m", "mbit", "mbps", "mb"], 1e6),
        (&["g", "gbit", "gbps", "gb"], 1e9),
    ],
};

const DURATION: Quantity = Quantity {
    what: "duration",
    hint: "expected e.g. 30ms, 1.5s, 250us",
    units: &[
        (&["s", "sec"], 1.0),
        (&["ms", "msec"], 1e-3),
        (&["us", "usec", "µs"], 1e-6),
    ],
};

/// Units of [`parse_queue`]; the last one counts packets.
const QUEUE: Quantity = Quantity {
    what: "queue",
    hint: "expected e.g. 100kB, 64pkt, 150000b or bdp",
    units: &[
        (&["", "b", "byte", "bytes"], 1.0),
        (&["k", "kb", "kib"], 1e3),
        (&["m", "mb"], 1e6),
        (&["p", "pkt", "pkts", "packets"], 1.0),
    ],
};

/// Parse a rate like `10mbit`, `100Mbit`, `500kbit`, `1gbit`, `64000` (bit/s), `2.5mbps`.
///
/// `bit`/`bps` suffixes are bits per second; `Bps`/`bytes` are not accepted to avoid
/// the tc ambiguity (tc's `mbps` means megabytes): here `mbps` means megabits.
pub fn parse_rate(s: &str) -> Result<u64, ConfigError> {
    Ok(RATE.parse(s)?.0.round() as u64)
}

/// Parse a duration like `30ms`, `5ms`, `0.5s`, `250us`, `0`.
pub fn parse_duration(s: &str) -> Result<Duration, ConfigError> {
    let (secs, _) = DURATION.parse(s)?;
    Duration::try_from_secs_f64(secs).map_err(|_| DURATION.error(s).into())
}

/// Parse a queue size: `100kB`, `64kb`, `1500b`/`1500B`, `64pkt`/`64p`, or `bdp`.
///
/// Byte units: `b`, `kb`, `mb` (decimal, case-insensitive: a queue is always in bytes).
pub fn parse_queue(s: &str) -> Result<Queue, ConfigError> {
    if s.trim().eq_ignore_ascii_case("bdp") {
        return Ok(Queue::Bdp);
    }
    let (n, unit) = QUEUE.parse(s)?;
    Ok(if unit == QUEUE.units.len() - 1 {
        Queue::Packets(n.round() as u64)
    } else {
        Queue::Bytes(n.round() as u64)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates() {
        assert_eq!(parse_rate("10mbit"), Ok(10_000_000));
        assert_eq!(parse_rate("100Mbit"), Ok(100_000_000));
        assert_eq!(parse_rate("500kbit"), Ok(500_000));
        assert_eq!(parse_rate("1gbit"), Ok(1_000_000_000));
        assert_eq!(parse_rate("2.5mbit"), Ok(2_500_000));
        assert_eq!(parse_rate("64000"), Ok(64_000));
        assert!(parse_rate("fast").is_err());
        assert!(parse_rate("10furlongs").is_err());
        assert!(parse_rate("-1mbit").is_err());
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("30ms"), Ok(Duration::from_millis(30)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("250us"), Ok(Duration::from_micros(250)));
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        assert!(parse_duration("30").is_err());
        assert!(parse_duration("ms").is_err());
    }

    #[test]
    fn queues() {
        assert_eq!(parse_queue("100kB"), Ok(Queue::Bytes(100_000)));
        assert_eq!(parse_queue("64pkt"), Ok(Queue::Packets(64)));
        assert_eq!(parse_queue("bdp"), Ok(Queue::Bdp));
        assert_eq!(parse_queue("1500"), Ok(Queue::Bytes(1500)));
        assert!(parse_queue("lots").is_err());
        assert_eq!(Queue::Packets(2).bytes(1, Duration::ZERO), 3000);
        // 10 Mbit/s, 30 ms one way: 1.25 MB/s * 60 ms = 75 kB
        assert_eq!(
            Queue::Bdp.bytes(10_000_000, Duration::from_millis(30)),
            75_000
        );
    }

    #[test]
    fn validation() {
        assert!(PathConfig::default().validate().is_ok());
        let bad = |f: fn(&mut PathConfig)| {
            let mut c = PathConfig::default();
            f(&mut c);
            c.validate()
        };
        assert!(matches!(bad(|c| c.rate_bps = 0), Err(ConfigError::Rate(0))));
        assert!(matches!(bad(|c| c.loss = 1.0), Err(ConfigError::Loss(_))));
        assert!(matches!(bad(|c| c.loss = -0.1), Err(ConfigError::Loss(_))));
        assert!(matches!(
            bad(|c| c.loss = f64::NAN),
            Err(ConfigError::Loss(_))
        ));
        assert!(matches!(
            bad(|c| c.queue = Queue::Bytes(100)),
            Err(ConfigError::Queue(100))
        ));
        assert!(matches!(
            bad(|c| c.one_way_delay = Duration::from_secs(11)),
            Err(ConfigError::Delay(_))
        ));
        assert!(matches!(
            bad(|c| c.reverse_rate_bps = Some(1)),
            Err(ConfigError::Rate(1))
        ));
        assert!(matches!(
            bad(|c| c.reorder = 1.5),
            Err(ConfigError::Reorder(_))
        ));
        assert!(matches!(
            bad(|c| c.reorder = f64::NAN),
            Err(ConfigError::Reorder(_))
        ));
        assert!(matches!(
            bad(|c| c.reorder = 0.05),
            Err(ConfigError::ReorderDelay(Duration::ZERO))
        ));
        assert!(matches!(
            bad(|c| c.reorder_delay = Duration::from_secs(11)),
            Err(ConfigError::ReorderDelay(_))
        ));
        assert!(matches!(
            bad(|c| c.duplicate = -0.1),
            Err(ConfigError::Duplicate(_))
        ));
        assert!(matches!(
            bad(|c| c.burst_bytes = Some(1500)),
            Err(ConfigError::Burst(1500))
        ));
        let ok = PathConfig {
            reorder: 1.0,
            reorder_delay: Duration::from_millis(5),
            duplicate: 1.0,
            burst_bytes: Some(1520),
            ..PathConfig::default()
        };
        assert!(ok.validate().is_ok());
    }

    #[test]
    fn impairments_are_optional_in_serialized_configs() {
        let plain = serde_json::to_value(PathConfig::default()).unwrap();
        assert!(plain.get("reorder").is_none() && plain.get("duplicate").is_none());
        let mut v = plain.clone();
        v["reorder"] = serde_json::json!(0.05);
        v["reorder_delay"] = serde_json::json!({"secs": 0, "nanos": 5_000_000});
        let c: PathConfig = serde_json::from_value(v).unwrap();
        assert_eq!(
            (c.reorder, c.reorder_delay),
            (0.05, Duration::from_millis(5))
        );
        let back: PathConfig = serde_json::from_value(plain).unwrap();
        assert_eq!(back, PathConfig::default());
    }
}
