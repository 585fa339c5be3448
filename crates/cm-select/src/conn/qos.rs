//! QoS feedback against the stated requirements (paper §4.2: "the
//! middleware provides QoS feedback to the application ... tailored
//! high-level information rather than generic low-level performance
//! measurements").

use core::fmt;

use cm_core::{Duration, Rate};

use crate::props::Requirements;

/// How a requirement fares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// Met with margin.
    Met,
    /// Met, but within 20% of the limit.
    AtRisk,
    /// Not met.
    Violated,
    /// No estimate yet.
    Unknown,
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Status::Met => "met",
            Status::AtRisk => "at risk",
            Status::Violated => "violated",
            Status::Unknown => "unknown",
        })
    }
}

/// One requirement's verdict.
#[derive(Clone, Debug, PartialEq)]
pub struct Verdict {
    /// The requirement (`min-rate`, `target-rate`, `delay`).
    pub requirement: &'static str,
    /// How it fares.
    pub status: Status,
    /// Measured against required, in words.
    pub detail: String,
}

/// What the connection measures now, and each stated requirement's
/// verdict.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Qos {
    /// The rate the transport allows the connection (CM share, or
    /// cwnd·MSS/RTT for kernel TCP).
    pub rate: Option<Rate>,
    /// Smoothed RTT.
    pub srtt: Option<Duration>,
    /// Recent loss fraction (CM), or retransmitted/sent segments (TCP).
    pub loss: Option<f64>,
    /// Estimated one-way delay: srtt/2 plus the packetization and queue
    /// delays of the tuning.
    pub one_way_delay: Option<Duration>,
    /// One per stated requirement (rate, delay).
    pub verdicts: Vec<Verdict>,
}

impl fmt::Display for Qos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let opt = |x: Option<String>| x.unwrap_or_else(|| "-".into());
        write!(
            f,
            "rate {} srtt {} loss {}",
            opt(self.rate.map(|r| r.to_string())),
            opt(self.srtt.map(|d| d.to_string())),
            opt(self.loss.map(|l| format!("{:.2}%", l * 100.0))),
        )?;
        for v in &self.verdicts {
            write!(f, "; {} {} ({})", v.requirement, v.status, v.detail)?;
        }
        Ok(())
    }
}

/// Higher is better: `have` against the floor `need`.
fn rate_status(have: Rate, need: Rate) -> Status {
    let (h, n) = (have.bytes_per_sec() as f64, need.bytes_per_sec() as f64);
    if h < n {
        Status::Violated
    } else if h < 1.2 * n {
        Status::AtRisk
    } else {
        Status::Met
    }
}

/// Lower is better: `have` against the ceiling `limit`.
fn delay_status(have: Duration, limit: Duration) -> Status {
    let (h, l) = (have.as_micros() as f64, limit.as_micros() as f64);
    if h > l {
        Status::Violated
    } else if h > 0.8 * l {
        Status::AtRisk
    } else {
        Status::Met
    }
}

/// The verdicts of `req` for the measured values; `extra_delay` is what
/// the tuning adds to srtt/2 (packetization and queue).
pub(crate) fn judge(req: &Requirements, mut q: Qos, extra_delay: Duration) -> Qos {
    q.one_way_delay = q
        .srtt
        .map(|s| Duration::from_micros(s.as_micros() / 2) + extra_delay);
    let mut v = Vec::new();
    for (name, need) in [
        ("min-rate", req.floor_rate()),
        ("target-rate", req.target_rate),
    ] {
        let Some(need) = need else { continue };
        let (status, detail) = match q.rate {
            Some(r) => (rate_status(r, need), format!("{r} for {need}")),
            None => (
                Status::Unknown,
                format!("no rate estimate yet, need {need}"),
            ),
        };
        v.push(Verdict {
            requirement: name,
            status,
            detail,
        });
    }
    if let Some(limit) = req.target_delay {
        let (status, detail) = match q.one_way_delay {
            Some(d) => (delay_status(d, limit), format!("one-way ~{d} for {limit}")),
            None => (Status::Unknown, format!("no RTT yet, target {limit}")),
        };
        v.push(Verdict {
            requirement: "delay",
            status,
            detail,
        });
    }
    q.verdicts = v;
    q
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdict_thresholds() {
        let k = Rate::from_bytes_per_sec;
        assert_eq!(rate_status(k(1000), k(1001)), Status::Violated);
        assert_eq!(rate_status(k(1100), k(1000)), Status::AtRisk);
        assert_eq!(rate_status(k(1300), k(1000)), Status::Met);
        let ms = Duration::from_millis;
        assert_eq!(delay_status(ms(151), ms(150)), Status::Violated);
        assert_eq!(delay_status(ms(130), ms(150)), Status::AtRisk);
        assert_eq!(delay_status(ms(100), ms(150)), Status::Met);
    }
}
