//! The per-link self-test: every direction of every link, measured between
//! the link's own two ends (so only that link is crossed), all directions at
//! once: first the one-way delay of sparse timestamped probes, then a flood
//! that fills the link's queue and keeps it full: its arrival rate is the
//! link's rate, and the queue's backlog (`tc -s`) during the flood is the
//! DropTail limit in packets.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::error::{NetemError, Result};
use crate::selftest::UDP_IP_OVERHEAD;

use super::probe::{self, Arrival};
use super::{MTU, Network, TopoLink};

/// Knobs of the per-link self-test.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TopoSelfTestOptions {
    /// Allowed relative error of rate and delay (0.05 = 5 %).
    pub tolerance: f64,
    /// Allowed absolute error of the delay (the delay box's and the hosts'
    /// own latency, tens of µs, is more than 5 % of delays under 2 ms).
    pub delay_slack: Duration,
    /// How long each link's flood is paced after its opening burst.
    pub rate_duration: Duration,
    /// Delay probes per link direction.
    pub probes: u32,
}

impl Default for TopoSelfTestOptions {
    fn default() -> Self {
        TopoSelfTestOptions {
            tolerance: 0.05,
            delay_slack: Duration::from_micros(200),
            rate_duration: Duration::from_secs(2),
            probes: 15,
        }
    }
}

/// Spec against measurement for one link direction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LinkCheck {
    /// Directional link id.
    pub id: usize,
    /// Transmitting node.
    pub from: String,
    /// Receiving node.
    pub to: String,
    /// Spec rate, bit/s.
    pub rate_bps: f64,
    /// Measured IP-level rate at the receiver once the token bucket is empty, bit/s.
    pub measured_bps: f64,
    /// (measured − spec) / spec.
    pub rate_rel_error: f64,
    /// IP size of the flood's datagrams (about 100 per second of the rate,
    /// 64..=1500 bytes).
    pub flood_packet_bytes: u64,
    /// Flood datagrams sent and received.
    pub flood_sent: u64,
    /// Flood datagrams received.
    pub flood_received: u64,
    /// Seconds of arrivals the rate is computed over.
    pub rate_seconds: f64,
    /// Queue drops of the link during the test (the flood's excess).
    pub queue_drops: u64,
    /// Flood datagrams neither received nor counted as queue drops (expected 0).
    pub flood_lost: u64,
    /// |rate_rel_error| ≤ tolerance.
    pub rate_pass: bool,
    /// Spec DropTail limit, packets (waiting, besides the one in transmission).
    pub queue_packets: u32,
    /// The queue's fullest backlog in packets, of five samples over the
    /// second half of the flood (it is full then):
    /// `queue_packets + 1`, the waiting packets plus the one being sent, as in
    /// ns-2 and the simulator (a `tbf` holds the packet it waits to send).
    pub backlog_packets: u64,
    /// Longest queueing time of a flood datagram (one-way delay − spec delay)
    /// in transmission times of a datagram at the spec rate; about
    /// `queue_packets + 1` too, plus the hosts' and delay box's latency under
    /// load (which is several packets' worth at 100 Mbit/s). Not judged.
    pub queueing_packets: f64,
    /// `backlog_packets` within max(1, tolerance × (queue_packets + 1)) below
    /// `queue_packets + 1`, not above, and the queue dropped something.
    pub queue_pass: bool,
    /// Spec one-way delay, ms.
    pub delay_ms: f64,
    /// Smallest measured one-way delay of a probe, ms (a lone probe finds
    /// the token bucket full, so no serialization time is expected).
    pub min_delay_ms: f64,
    /// Median one-way delay of the probes, ms.
    pub median_delay_ms: f64,
    /// Probes that arrived.
    pub probes: u64,
    /// |min − spec| ≤ max(tolerance × spec, delay slack).
    pub delay_pass: bool,
    /// All three held.
    pub pass: bool,
}

/// The per-link self-test's result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TopoSelfTestReport {
    /// The options it ran with.
    pub options: TopoSelfTestOptions,
    /// One row per directional link, by id.
    pub links: Vec<LinkCheck>,
    /// Every check passed.
    pub pass: bool,
    /// Wall-clock seconds the self-test took.
    pub seconds: f64,
}

/// IP size of the flood's datagrams on a link of `rate_bps`: about 100 per
/// second, so slow links reach a steady state in well under a second.
pub(super) fn flood_size(rate_bps: u64) -> u64 {
    (rate_bps / 8 / 100).clamp(64, MTU)
}

/// Rate (bit/s) and the seconds it spans, from arrivals after the first
/// `skip_bytes` (the token bucket's burst, which arrives at once).
pub(super) fn steady_rate(log: &[Arrival], skip_bytes: u64) -> Option<(f64, f64)> {
    let mut cum = 0;
    let j = log.iter().position(|a| {
        cum += a.ip_bytes;
        cum >= skip_bytes
    })?;
    let rest = log.get(j + 1..)?;
    if rest.len() < 3 {
        return None;
    }
    let bytes: u64 = rest.iter().map(|a| a.ip_bytes).sum();
    let secs = rest.last()?.at.checked_sub(log[j].at)?.as_secs_f64();
    (secs > 0.0).then(|| (bytes as f64 * 8.0 / secs, secs))
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn seconds_of(bytes: u64, rate_bps: u64) -> Duration {
    Duration::from_secs_f64(bytes as f64 * 8.0 / rate_bps.max(1) as f64)
}

struct DelayResult {
    min: Duration,
    median: Duration,
    probes: u64,
}

fn delay_phase(net: &Network, o: &TopoSelfTestOptions, t0: Instant) -> Result<Vec<DelayResult>> {
    const PROBE: u64 = UDP_IP_OVERHEAD + 8;
    let pairs = net
        .links()
        .iter()
        .map(|l| probe::pair(net, l))
        .collect::<Result<Vec<_>>>()?;
    std::thread::scope(|s| {
        let handles: Vec<_> = net
            .links()
            .iter()
            .zip(&pairs)
            .map(|(l, (tx, rx))| {
                // Sparse enough that the bucket refills between probes.
                let every = seconds_of(3 * PROBE, l.rate_bps).max(Duration::from_millis(20));
                let done = Arc::new(AtomicBool::new(false));
                let d2 = Arc::clone(&done);
                let cap = every * o.probes + l.delay + Duration::from_secs(1);
                let (n, quiet) = (o.probes, l.delay + Duration::from_millis(300));
                s.spawn(move || {
                    let got = s
                        .spawn(move || probe::receive(rx, t0, Some(u64::from(n)), &d2, quiet, cap));
                    probe::send_probes(tx, PROBE, n, every, t0);
                    done.store(true, Ordering::Relaxed);
                    got.join().unwrap_or_default()
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                let log = h
                    .join()
                    .map_err(|_| NetemError::Thread("delay probe".into()))?;
                let mut d: Vec<Duration> =
                    log.iter().map(|a| a.at.saturating_sub(a.sent)).collect();
                d.sort();
                Ok(DelayResult {
                    min: d.first().copied().unwrap_or(Duration::MAX),
                    median: d.get(d.len() / 2).copied().unwrap_or(Duration::MAX),
                    probes: d.len() as u64,
                })
            })
            .collect()
    })
}

struct RateResult {
    sent: u64,
    log: Vec<Arrival>,
    /// The link's queue counters three quarters into the flood.
    full: Option<crate::path::QdiscStats>,
}

fn rate_phase(net: &Network, o: &TopoSelfTestOptions, t0: Instant) -> Result<Vec<RateResult>> {
    let pairs = net
        .links()
        .iter()
        .map(|l| probe::pair(net, l))
        .collect::<Result<Vec<_>>>()?;
    let duration = o.rate_duration;
    std::thread::scope(|s| {
        let handles: Vec<_> = net
            .links()
            .iter()
            .zip(&pairs)
            .map(|(l, (tx, rx))| {
                let size = flood_size(l.rate_bps);
                let queue = u64::from(l.queue_packets) + 1;
                // Empty the bucket, fill the queue and overflow it by 5 at once,
                // then offer 20 % more than the rate: the queue stays full.
                let burst = l.burst_bytes.div_ceil(size) + queue + 5;
                let pps = 1.2 * l.rate_bps as f64 / 8.0 / size as f64;
                let quiet =
                    (seconds_of(4 * size, l.rate_bps) + l.delay).max(Duration::from_millis(300));
                let cap = duration
                    + seconds_of((queue + burst) * size, l.rate_bps)
                    + l.delay
                    + Duration::from_secs(3);
                let done = Arc::new(AtomicBool::new(false));
                let d2 = Arc::clone(&done);
                s.spawn(move || {
                    let got = s.spawn(move || probe::receive(rx, t0, None, &d2, quiet, cap));
                    // Sampled five times over the flood's second half and the
                    // fullest kept: a 100 Mbit/s flood from a busy 2-core
                    // machine lets the queue dip for a moment now and then.
                    let full = s.spawn(move || {
                        let mut best: Option<crate::path::QdiscStats> = None;
                        for k in 0..5u32 {
                            let at = duration / 2 + duration * k / 12;
                            std::thread::sleep(at.saturating_sub(t0.elapsed()));
                            if let Ok(q) = net.link_stats(l.id) {
                                if best
                                    .as_ref()
                                    .is_none_or(|b| q.backlog_packets > b.backlog_packets)
                                {
                                    best = Some(q);
                                }
                            }
                        }
                        best
                    });
                    let sent = probe::flood(tx, size, burst, pps, duration, t0);
                    done.store(true, Ordering::Relaxed);
                    RateResult {
                        sent,
                        log: got.join().unwrap_or_default(),
                        full: full.join().ok().flatten(),
                    }
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().map_err(|_| NetemError::Thread("flood".into())))
            .collect()
    })
}

fn judge(
    l: &TopoLink,
    o: &TopoSelfTestOptions,
    d: &DelayResult,
    r: &RateResult,
    drops: u64,
) -> LinkCheck {
    let spec_bps = l.rate_bps as f64;
    let size = flood_size(l.rate_bps);
    let (measured_bps, rate_seconds) =
        steady_rate(&r.log, l.burst_bytes + size).unwrap_or((0.0, 0.0));
    let rate_rel_error = (measured_bps - spec_bps) / spec_bps;
    let rate_pass = rate_rel_error.abs() <= o.tolerance;
    let delay_ms = ms(l.delay);
    let allowed = (o.tolerance * delay_ms).max(ms(o.delay_slack));
    let delay_pass = d.probes > 0 && (ms(d.min) - delay_ms).abs() <= allowed;
    let tx_time = seconds_of(size, l.rate_bps).as_secs_f64();
    let max_queueing = r
        .log
        .iter()
        .map(|a| a.at.saturating_sub(a.sent).saturating_sub(l.delay))
        .max()
        .unwrap_or_default();
    let queueing_packets = max_queueing.as_secs_f64() / tx_time;
    let want = u64::from(l.queue_packets) + 1;
    let backlog_packets = r.full.map_or(0, |q| q.backlog_packets);
    let below = (o.tolerance * want as f64).max(1.0);
    let queue_pass =
        drops > 0 && backlog_packets <= want && (want - backlog_packets) as f64 <= below;
    let flood_lost = r.sent.saturating_sub(r.log.len() as u64 + drops);
    let or_nan = |x: Duration| if d.probes > 0 { ms(x) } else { f64::NAN };
    LinkCheck {
        id: l.id,
        from: l.from.clone(),
        to: l.to.clone(),
        rate_bps: spec_bps,
        measured_bps,
        rate_rel_error,
        flood_packet_bytes: size,
        flood_sent: r.sent,
        flood_received: r.log.len() as u64,
        rate_seconds,
        queue_drops: drops,
        flood_lost,
        rate_pass,
        queue_packets: l.queue_packets,
        backlog_packets,
        queueing_packets,
        queue_pass,
        delay_ms,
        min_delay_ms: or_nan(d.min),
        median_delay_ms: or_nan(d.median),
        probes: d.probes,
        delay_pass,
        pass: rate_pass && delay_pass && queue_pass,
    }
}

impl Network {
    /// Measure every link direction's one-way delay and rate against the spec
    /// (see [`TopoSelfTestReport`]); `Ok` with `pass: false` when a
    /// measurement is off, `Err` when the test could not run.
    pub fn self_test(&self, o: &TopoSelfTestOptions) -> Result<TopoSelfTestReport> {
        let start = Instant::now();
        let t0 = Instant::now();
        let ids = 0..self.links().len();
        let before = ids
            .clone()
            .map(|i| self.link_stats(i))
            .collect::<Result<Vec<_>>>()?;
        let delays = delay_phase(self, o, t0)?;
        let rates = rate_phase(self, o, t0)?;
        let mut links = Vec::with_capacity(self.links().len());
        for i in ids {
            let after = self.link_stats(i)?;
            let drops = after.dropped.saturating_sub(before[i].dropped);
            links.push(judge(&self.links()[i], o, &delays[i], &rates[i], drops));
        }
        Ok(TopoSelfTestReport {
            options: o.clone(),
            pass: links.iter().all(|l| l.pass),
            links,
            seconds: start.elapsed().as_secs_f64(),
        })
    }
}

fn verdict(b: bool) -> &'static str {
    if b { "PASS" } else { "FAIL" }
}

impl fmt::Display for TopoSelfTestReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "per-link self-test ({:.1} s; tolerance {}%, delay slack {:?}): {}",
            self.seconds,
            self.options.tolerance * 100.0,
            self.options.delay_slack,
            verdict(self.pass)
        )?;
        writeln!(
            f,
            "{:>4} {:<10} {:>12} {:>12} {:>7} {:>5} {:>5} {:>7} {:>7} {:>5} {:>5} {:>8} {:>8} {:>8} {:>5}",
            "link",
            "from->to",
            "rate spec",
            "measured",
            "err",
            "rate",
            "pkt B",
            "queue+1",
            "backlog",
            "drops",
            "queue",
            "delay ms",
            "min ms",
            "med ms",
            "delay"
        )?;
        for l in &self.links {
            writeln!(
                f,
                "{:>4} {:<10} {:>12} {:>12} {:>+6.2}% {:>5} {:>5} {:>7} {:>7} {:>5} {:>5} {:>8.3} {:>8.3} {:>8.3} {:>5}",
                l.id,
                format!("{}->{}", l.from, l.to),
                cm_report::fmt::rate(l.rate_bps),
                cm_report::fmt::rate(l.measured_bps),
                l.rate_rel_error * 100.0,
                verdict(l.rate_pass),
                l.flood_packet_bytes,
                l.queue_packets + 1,
                l.backlog_packets,
                l.queue_drops,
                verdict(l.queue_pass),
                l.delay_ms,
                l.min_delay_ms,
                l.median_delay_ms,
                verdict(l.delay_pass)
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steady_rate_skips_the_burst() {
        // 5 packets of 100 B at once (the bucket), then one every 80 ms (10 kbit/s).
        let log: Vec<Arrival> = (0..20u64)
            .map(|k| Arrival {
                at: Duration::from_millis(k.saturating_sub(4) * 80),
                sent: Duration::ZERO,
                ip_bytes: 100,
            })
            .collect();
        let (bps, secs) = steady_rate(&log, 500).unwrap_or_default();
        assert!((bps - 10_000.0).abs() < 1.0, "{bps}");
        assert!((secs - 1.2).abs() < 1e-9, "{secs}");
        assert!(steady_rate(&log[..6], 500).is_none());
        assert_eq!(flood_size(10_000), 64);
        assert_eq!(flood_size(300_000), 375);
        assert_eq!(flood_size(100_000_000), 1500);
    }
}
