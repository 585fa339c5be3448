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
}

impl Default for PathConfig {
    /// 10 Mbit/s, 30 ms one way, one BDP of queue, no loss.
    fn default() -> Self {
        PathConfig {
            rate_bps: 10_000_000,
            one_way_delay: Duration::from_millis(30),
            queue: Queue::Bdp,
            loss: 0.0,
            reverse_rate_bps: None,
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
    /// Queue too small or too large.
    #[error("queue must be between 1500 bytes (one packet) and 1 GB, got {0} bytes")]
    Queue(u64),
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
        let q = self.queue_bytes();
        if !(PACKET_BYTES..=1_000_000_000).contains(&q) {
            return Err(ConfigError::Queue(q));
        }
        Ok(())
    }

    /// The bottleneck queue limit in bytes.
    pub fn queue_bytes(&self) -> u64 {
        self.queue.bytes(self.rate_bps, self.one_way_delay)
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
    }
}
