//! The self-test: measure a built path's one-way delay, rate and loss with real UDP
//! sockets in the sender and receiver namespaces and compare with the configuration.

use std::fmt;
use std::net::{Ipv4Addr, UdpSocket};
use std::num::NonZeroU64;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow};
use serde::{Deserialize, Serialize};

use crate::config::{PathConfig, fmt_rate};
use crate::delaybox::DelayBoxStats;
use crate::path::{Node, Path};

/// IP + UDP header bytes added to every datagram payload.
pub const UDP_IP_OVERHEAD: u64 = 28;
/// z for a two-sided 99.9 % confidence interval.
const Z999: f64 = 3.2905;
/// Payload of the rate-phase datagrams.
const RATE_PAYLOAD: usize = 1200;
/// Payload of a delay probe.
const PROBE_PAYLOAD: usize = 32;
/// The fastest the loss phase sends, whatever the rate (what 2 cores sustain through
/// the whole path with room to spare).
const LOSS_MAX_PPS: f64 = 40_000.0;
/// Absolute floor of the delay tolerance (see [`DelayCheck::pass`]).
const DELAY_FLOOR_S: f64 = 200e-6;

/// Knobs of the self-test.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SelfTestOptions {
    /// Allowed relative error (0.05 = 5 %).
    pub tolerance: f64,
    /// How long the rate phase offers more than the rate.
    pub rate_duration: Duration,
    /// Most time the loss phase may take; decides which loss rule applies.
    pub loss_budget: Duration,
}

impl Default for SelfTestOptions {
    fn default() -> Self {
        SelfTestOptions {
            tolerance: 0.05,
            rate_duration: Duration::from_secs(2),
            loss_budget: Duration::from_secs(15),
        }
    }
}

/// Delay phase: UDP ping-pong between sender and receiver.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DelayCheck {
    /// Configured one-way delay, ms.
    pub one_way_delay_ms: f64,
    /// Expected RTT: 2 × one-way delay + serialization of the probe at the rate(s), ms.
    pub expected_rtt_ms: f64,
    /// Smallest measured RTT sender ↔ receiver, ms.
    pub min_rtt_ms: f64,
    /// Smallest RTT sender ↔ router (the hosts' own sockets, threads and one veth
    /// hop, no delay box), ms.
    pub host_rtt_ms: f64,
    /// What the path adds: min RTT − host RTT, ms. This is what is checked.
    pub added_rtt_ms: f64,
    /// Median measured RTT, ms.
    pub median_rtt_ms: f64,
    /// Largest measured RTT, ms.
    pub max_rtt_ms: f64,
    /// Probes answered.
    pub probes: usize,
    /// (added RTT − expected) / expected.
    pub rel_error: f64,
    /// (min RTT − expected) / expected, not corrected for the hosts' own RTT.
    pub raw_rel_error: f64,
    /// |added RTT − expected| ≤ tolerance × expected, or ≤ 200 µs when that is larger
    /// (one-way delays under 2 ms: the delay box's own wake-up latency, 20–100 µs per
    /// direction on a 2-core VM, is then more than 5 %).
    pub pass: bool,
}

/// Rate phase: offer more than the rate and count what arrives.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RateCheck {
    /// Configured rate, bit/s.
    pub configured_bps: f64,
    /// Measured IP-level rate at the receiver, bit/s.
    pub measured_bps: f64,
    /// Rate the sender offered, bit/s.
    pub offered_bps: f64,
    /// Datagrams sent.
    pub sent: u64,
    /// Datagrams received.
    pub received: u64,
    /// Seconds of arrivals the rate is computed over.
    pub seconds: f64,
    /// Drops at the bottleneck queue during the phase (expected: the excess).
    pub bottleneck_drops: u64,
    /// (measured − configured) / configured.
    pub rel_error: f64,
    /// |rel_error| ≤ tolerance.
    pub pass: bool,
}

/// Which rule decided the loss check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum LossRule {
    /// Configured loss 0: nothing may be lost.
    Zero,
    /// The sample resolves the tolerance: |measured − p| ≤ tolerance × p.
    WithinTolerance,
    /// Loss too small to resolve the tolerance within the time budget: the 99.9 %
    /// confidence interval must contain p.
    ConfidenceInterval,
}

impl fmt::Display for LossRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            LossRule::Zero => "loss 0: nothing may be lost",
            LossRule::WithinTolerance => "|measured - p| <= tolerance x p",
            LossRule::ConfidenceInterval => {
                "sample too small to resolve the tolerance in the time budget: 99.9% CI must contain p"
            }
        })
    }
}

/// Loss phase: small datagrams below the rate (so the bottleneck never drops).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LossCheck {
    /// Configured loss probability.
    pub configured: f64,
    /// Measured: 1 − received / reached the receiver's ingress.
    pub measured: f64,
    /// Lower end of the 99.9 % (Wilson) confidence interval.
    pub ci_low: f64,
    /// Upper end of the 99.9 % confidence interval.
    pub ci_high: f64,
    /// Datagrams sent.
    pub sent: u64,
    /// Datagrams that reached the receiver's ingress (forwarded by the delay box).
    pub reached: u64,
    /// Datagrams received by the socket (plus any the socket buffer dropped).
    pub received: u64,
    /// Datagrams the receiver's socket buffer dropped (counted as received: they
    /// passed the loss filter).
    pub rcvbuf_errors: u64,
    /// Drops at the bottleneck queue during the phase (should be 0).
    pub bottleneck_drops: u64,
    /// Send rate, datagrams/s.
    pub pps: f64,
    /// (measured − configured) / configured (0 when configured is 0).
    pub rel_error: f64,
    /// Which rule applied.
    pub rule: LossRule,
    /// Whether the rule held.
    pub pass: bool,
}

/// Configured vs measured for delay, rate and loss.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SelfTestReport {
    /// The path's configuration.
    pub config: PathConfig,
    /// Allowed relative error.
    pub tolerance: f64,
    /// Delay phase.
    pub delay: DelayCheck,
    /// Rate phase.
    pub rate: RateCheck,
    /// Loss phase.
    pub loss: LossCheck,
    /// Delay box counters at the end.
    pub delay_box: DelayBoxStats,
    /// Every check passed.
    pub pass: bool,
    /// Wall-clock seconds the self-test took.
    pub seconds: f64,
}

fn verdict(b: bool) -> &'static str {
    if b { "PASS" } else { "FAIL" }
}

impl fmt::Display for SelfTestReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (d, r, l) = (&self.delay, &self.rate, &self.loss);
        writeln!(
            f,
            "cm-netem self-test: {} (tolerance {:.1}%, {:.1} s)",
            verdict(self.pass),
            self.tolerance * 100.0,
            self.seconds
        )?;
        writeln!(
            f,
            "  delay  {}  one-way {:.3} ms: expected RTT {:.3} ms, added {:.3} ms ({:+.2}%) = min RTT {:.3} ms ({:+.2}% raw) - host RTT {:.3} ms; median {:.3} ms, max {:.3} ms, {} probes",
            verdict(d.pass),
            d.one_way_delay_ms,
            d.expected_rtt_ms,
            d.added_rtt_ms,
            d.rel_error * 100.0,
            d.min_rtt_ms,
            d.raw_rel_error * 100.0,
            d.host_rtt_ms,
            d.median_rtt_ms,
            d.max_rtt_ms,
            d.probes
        )?;
        writeln!(
            f,
            "  rate   {}  configured {}, measured {} ({:+.2}%) over {:.2} s; offered {}, {} sent, {} received, {} dropped at the bottleneck",
            verdict(r.pass),
            fmt_rate(r.configured_bps),
            fmt_rate(r.measured_bps),
            r.rel_error * 100.0,
            r.seconds,
            fmt_rate(r.offered_bps),
            r.sent,
            r.received,
            r.bottleneck_drops
        )?;
        writeln!(
            f,
            "  loss   {}  configured {:.4}%, measured {:.4}% ({:+.2}%), 99.9% CI [{:.4}%, {:.4}%]; {} sent, {} reached the receiver, {} received ({} socket-buffer drops), {} bottleneck drops, {:.0} pkt/s",
            verdict(l.pass),
            l.configured * 100.0,
            l.measured * 100.0,
            l.rel_error * 100.0,
            l.ci_low * 100.0,
            l.ci_high * 100.0,
            l.sent,
            l.reached,
            l.received,
            l.rcvbuf_errors,
            l.bottleneck_drops,
            l.pps
        )?;
        writeln!(f, "         rule: {}", l.rule)?;
        let fw = &self.delay_box.forward;
        write!(
            f,
            "  delay box forward: {} pkts, {} dropped, max {} queued, late by {:.1} µs mean / {:.1} µs max",
            fw.packets, fw.dropped, fw.max_queued, fw.mean_late_us, fw.max_late_us
        )
    }
}

/// The self-test ran but the path is more than the tolerance off.
#[derive(Debug, Clone, thiserror::Error)]
#[error("emulated path failed its self-test:\n{0}")]
pub struct SelfTestFailed(pub Box<SelfTestReport>);

/// Wilson score interval for `k` successes in `n` trials at normal quantile `z`.
pub fn wilson_interval(k: u64, n: u64, z: f64) -> (f64, f64) {
    if n == 0 {
        return (0.0, 1.0);
    }
    let (n, p) = (n as f64, k as f64 / n as f64);
    let z2 = z * z;
    let denom = 1.0 + z2 / n;
    let center = (p + z2 / (2.0 * n)) / denom;
    let half = z / denom * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt();
    let lo = if k == 0 {
        0.0
    } else {
        (center - half).max(0.0)
    };
    (lo, (center + half).min(1.0))
}

/// Samples needed for the 99.9 % interval's half-width to be `tol × p`.
pub fn loss_samples_needed(p: f64, tol: f64) -> f64 {
    Z999 * Z999 * (1.0 - p) / (p * tol * tol)
}

/// Restores the configured loss when a phase that ran without loss ends (or fails).
struct LossGuard<'a> {
    path: &'a Path,
    loss: f64,
}

impl Drop for LossGuard<'_> {
    fn drop(&mut self) {
        if !self.path.is_torn_down() {
            let _ = self.path.set_loss(self.loss);
        }
    }
}

fn bind_in(path: &Path, node: Node) -> Result<UdpSocket> {
    let addr = match node {
        Node::Receiver => path.receiver_addr(),
        Node::Router => path.router_addrs().1,
        Node::Sender => path.sender_addr(),
    };
    bind_at(path, node, addr)
}

fn bind_at(path: &Path, node: Node, addr: Ipv4Addr) -> Result<UdpSocket> {
    let sock = path
        .spawn_in(node, move || UdpSocket::bind((addr, 0)))?
        .join()
        .map_err(|_| anyhow!("socket thread panicked"))?
        .with_context(|| format!("binding a UDP socket in the {node} namespace"))?;
    let _ = rustix::net::sockopt::set_socket_recv_buffer_size_force(&sock, 8 << 20);
    let _ = rustix::net::sockopt::set_socket_send_buffer_size_force(&sock, 4 << 20);
    Ok(sock)
}

/// `RcvbufErrors` of the receiver namespace's UDP MIB.
fn rcvbuf_errors(path: &Path) -> Result<u64> {
    path.spawn_in(Node::Receiver, || -> Result<u64> {
        let snmp = std::fs::read_to_string("/proc/thread-self/net/snmp")?;
        let mut udp = snmp.lines().filter(|l| l.starts_with("Udp:"));
        let (Some(h), Some(v)) = (udp.next(), udp.next()) else {
            return Err(anyhow!("no Udp lines in /proc/net/snmp"));
        };
        let i = h
            .split_whitespace()
            .position(|c| c == "RcvbufErrors")
            .ok_or_else(|| anyhow!("no RcvbufErrors"))?;
        Ok(v.split_whitespace()
            .nth(i)
            .and_then(|x| x.parse().ok())
            .unwrap_or(0))
    })?
    .join()
    .map_err(|_| anyhow!("snmp thread panicked"))?
}

/// Send `total` datagrams (or for `duration`) at `pps`, paced; returns how many were sent.
fn paced_send(
    sock: &UdpSocket,
    payload: &mut [u8],
    pps: f64,
    total: Option<u64>,
    duration: Option<Duration>,
) -> u64 {
    let _ = rustix::thread::set_current_timer_slack(NonZeroU64::new(1));
    let start = Instant::now();
    let mut sent = 0u64;
    loop {
        let elapsed = start.elapsed();
        if duration.is_some_and(|d| elapsed >= d) || total.is_some_and(|t| sent >= t) {
            return sent;
        }
        let mut due = (elapsed.as_secs_f64() * pps) as u64 + 1;
        if let Some(t) = total {
            due = due.min(t);
        }
        while sent < due {
            let n = payload.len().min(8);
            payload[..n].copy_from_slice(&sent.to_be_bytes()[..n]);
            if sock.send(payload).is_ok() {
                sent += 1;
            } else {
                // Local buffer full: let it drain (counts as not sent).
                std::thread::sleep(Duration::from_micros(50));
                break;
            }
        }
        let next = Duration::from_secs_f64(sent as f64 / pps);
        if let Some(wait) = next.checked_sub(start.elapsed()) {
            std::thread::sleep(wait);
        }
    }
}

/// Receive until `stop` is set and the socket has been quiet for its read timeout.
fn receive_until(
    sock: UdpSocket,
    stop: Arc<AtomicBool>,
    log_times: bool,
) -> (u64, Vec<(Instant, u32)>) {
    let mut buf = vec![0u8; 65536];
    let mut count = 0u64;
    let mut log = Vec::new();
    loop {
        match sock.recv(&mut buf) {
            Ok(n) => {
                count += 1;
                if log_times {
                    log.push((Instant::now(), n as u32));
                }
            }
            Err(_) => {
                if stop.load(Ordering::Relaxed) {
                    return (count, log);
                }
            }
        }
    }
}

impl Path {
    /// Measure the path (delay, rate, loss); `Err` with every number when any is more
    /// than 5 % off (see [`SelfTestReport`]). Takes a few seconds plus up to 15 s for
    /// the loss phase. Do not send other traffic over the path meanwhile.
    pub fn self_test(&self) -> Result<SelfTestReport> {
        let report = self.self_test_report(&SelfTestOptions::default())?;
        if report.pass {
            Ok(report)
        } else {
            Err(SelfTestFailed(Box::new(report)).into())
        }
    }

    /// Run the self-test and return the report whether or not it passed; `Err` only
    /// when the measurement itself could not be made.
    pub fn self_test_report(&self, opts: &SelfTestOptions) -> Result<SelfTestReport> {
        let started = Instant::now();
        let cfg = self.config().clone();
        let guard = LossGuard {
            path: self,
            loss: self.loss(),
        };
        self.set_loss(0.0)?;
        let delay = self.measure_delay(opts).context("self-test delay phase")?;
        let rate = self.measure_rate(opts).context("self-test rate phase")?;
        drop(guard); // restores the configured loss
        let loss = self.measure_loss(opts).context("self-test loss phase")?;
        let delay_box = self.stats()?.delay_box;
        let pass = delay.pass && rate.pass && loss.pass;
        Ok(SelfTestReport {
            config: cfg,
            tolerance: opts.tolerance,
            delay,
            rate,
            loss,
            delay_box,
            pass,
            seconds: started.elapsed().as_secs_f64(),
        })
    }

    fn drain_time(&self) -> Duration {
        let c = self.config();
        let q = c.queue_bytes() as f64 * 8.0 / c.rate_bps as f64;
        Duration::from_secs_f64(q) + 2 * c.one_way_delay + Duration::from_millis(100)
    }

    /// Sequential UDP ping-pong from the sender to an echo socket at `addr` in `node`.
    fn ping_pong(
        &self,
        node: Node,
        addr: Ipv4Addr,
        probes: u64,
        timeout: Duration,
    ) -> Result<Vec<Duration>> {
        let echo_sock = bind_at(self, node, addr)?;
        let snd = bind_in(self, Node::Sender)?;
        snd.connect(echo_sock.local_addr()?)?;
        echo_sock.set_read_timeout(Some(Duration::from_millis(20)))?;
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = Arc::clone(&stop);
        let echo = std::thread::spawn(move || {
            let mut buf = [0u8; 2048];
            while !stop2.load(Ordering::Relaxed) {
                if let Ok((n, from)) = echo_sock.recv_from(&mut buf) {
                    let _ = echo_sock.send_to(&buf[..n], from);
                }
            }
        });
        snd.set_read_timeout(Some(timeout))?;
        let mut rtts = Vec::new();
        let mut buf = [0u8; 2048];
        for seq in 0..probes {
            let mut probe = [0u8; PROBE_PAYLOAD];
            probe[..8].copy_from_slice(&seq.to_be_bytes());
            let t0 = Instant::now();
            snd.send(&probe)?;
            // Skip stale replies (a probe that timed out earlier).
            let deadline = t0 + timeout;
            while Instant::now() < deadline {
                match snd.recv(&mut buf) {
                    Ok(n) if n >= 8 && buf[..8] == probe[..8] => {
                        rtts.push(t0.elapsed());
                        break;
                    }
                    Ok(_) => continue,
                    Err(_) => break,
                }
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        stop.store(true, Ordering::Relaxed);
        echo.join().map_err(|_| anyhow!("echo thread panicked"))?;
        rtts.sort();
        Ok(rtts)
    }

    fn measure_delay(&self, opts: &SelfTestOptions) -> Result<DelayCheck> {
        let c = self.config().clone();
        // The hosts' own RTT (sockets, threads, one veth hop), without the delay box.
        let base = self.ping_pong(
            Node::Router,
            self.router_addrs().0,
            30,
            Duration::from_secs(1),
        )?;
        let base = base
            .first()
            .copied()
            .ok_or_else(|| anyhow!("the router does not answer"))?;
        let rtt_nominal = 2 * c.one_way_delay;
        let probes = (1.0 / rtt_nominal.as_secs_f64().max(1e-3)).clamp(10.0, 50.0) as u64;
        let timeout = rtt_nominal + Duration::from_millis(500);
        let rtts = self.ping_pong(Node::Receiver, self.receiver_addr(), probes, timeout)?;
        if rtts.is_empty() {
            return Err(anyhow!(
                "no probe came back: the path does not carry packets"
            ));
        }
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        let probe_bits = ((PROBE_PAYLOAD as u64 + UDP_IP_OVERHEAD) * 8) as f64;
        let ser = probe_bits / c.rate_bps as f64
            + c.reverse_rate_bps.map_or(0.0, |r| probe_bits / r as f64);
        let expected = rtt_nominal.as_secs_f64() + ser;
        let min = rtts[0].as_secs_f64();
        let added = min - base.as_secs_f64();
        let err = added - expected;
        let pass = err.abs() <= (opts.tolerance * expected).max(DELAY_FLOOR_S);
        Ok(DelayCheck {
            one_way_delay_ms: ms(c.one_way_delay),
            expected_rtt_ms: expected * 1e3,
            min_rtt_ms: min * 1e3,
            host_rtt_ms: ms(base),
            added_rtt_ms: added * 1e3,
            median_rtt_ms: ms(rtts[rtts.len() / 2]),
            max_rtt_ms: ms(rtts[rtts.len() - 1]),
            probes: rtts.len(),
            rel_error: if expected > 0.0 { err / expected } else { 0.0 },
            raw_rel_error: if expected > 0.0 {
                (min - expected) / expected
            } else {
                0.0
            },
            pass,
        })
    }

    fn measure_rate(&self, opts: &SelfTestOptions) -> Result<RateCheck> {
        let c = self.config().clone();
        let rcv = bind_in(self, Node::Receiver)?;
        let snd = bind_in(self, Node::Sender)?;
        snd.connect(rcv.local_addr()?)?;
        rcv.set_read_timeout(Some(Duration::from_millis(20)))?;
        let pkt_bits = ((RATE_PAYLOAD as u64 + UDP_IP_OVERHEAD) * 8) as f64;
        // At least ~1000 packets' worth of time at low rates, at most 10 s.
        let duration = opts
            .rate_duration
            .max(Duration::from_secs_f64(
                1000.0 * pkt_bits / c.rate_bps as f64,
            ))
            .min(Duration::from_secs(10));
        let offered_pps = 1.25 * c.rate_bps as f64 / pkt_bits;
        let before = self.stats()?.bottleneck;
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = Arc::clone(&stop);
        let receiver = std::thread::spawn(move || receive_until(rcv, stop2, true));
        let mut payload = vec![0u8; RATE_PAYLOAD];
        let sent = paced_send(&snd, &mut payload, offered_pps, None, Some(duration));
        std::thread::sleep(self.drain_time());
        stop.store(true, Ordering::Relaxed);
        let (received, log) = receiver.join().map_err(|_| anyhow!("receiver panicked"))?;
        let after = self.stats()?.bottleneck;
        // Skip the first 100 ms of arrivals (the token bucket starts full).
        let skip = Duration::from_millis(100).min(duration / 8);
        let t0 = log
            .first()
            .map(|x| x.0)
            .ok_or_else(|| anyhow!("nothing arrived"))?;
        let start = log.iter().position(|x| x.0 >= t0 + skip).unwrap_or(0);
        let window = &log[start..];
        let (first, last) = (window[0].0, window[window.len() - 1].0);
        let seconds = (last - first).as_secs_f64();
        let bytes: u64 = window[1..]
            .iter()
            .map(|x| x.1 as u64 + UDP_IP_OVERHEAD)
            .sum();
        let measured = if seconds > 0.0 {
            bytes as f64 * 8.0 / seconds
        } else {
            0.0
        };
        let configured = c.rate_bps as f64;
        let rel_error = (measured - configured) / configured;
        Ok(RateCheck {
            configured_bps: configured,
            measured_bps: measured,
            offered_bps: offered_pps * pkt_bits,
            sent,
            received,
            seconds,
            bottleneck_drops: after.dropped.saturating_sub(before.dropped),
            rel_error,
            pass: rel_error.abs() <= opts.tolerance,
        })
    }

    fn measure_loss(&self, opts: &SelfTestOptions) -> Result<LossCheck> {
        let c = self.config().clone();
        let p = self.loss();
        let rcv = bind_in(self, Node::Receiver)?;
        let snd = bind_in(self, Node::Sender)?;
        snd.connect(rcv.local_addr()?)?;
        rcv.set_read_timeout(Some(Duration::from_millis(20)))?;
        let pkt_bits = (UDP_IP_OVERHEAD * 8) as f64; // empty datagrams
        let pps = (0.8 * c.rate_bps as f64 / pkt_bits).min(LOSS_MAX_PPS);
        let budget_n = (pps * opts.loss_budget.as_secs_f64()) as u64;
        let (n, rule) = if p == 0.0 {
            (((pps * 1.0) as u64).max(10_000), LossRule::Zero)
        } else {
            let needed = loss_samples_needed(p, opts.tolerance);
            if needed <= budget_n as f64 {
                // 1.5× the sample that resolves the tolerance at 99.9 %, within budget.
                (
                    (1.5 * needed).min(budget_n as f64) as u64,
                    LossRule::WithinTolerance,
                )
            } else {
                (budget_n, LossRule::ConfidenceInterval)
            }
        };
        let before = self.stats()?;
        let buf_before = rcvbuf_errors(self)?;
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = Arc::clone(&stop);
        let receiver = std::thread::spawn(move || receive_until(rcv, stop2, false));
        let mut payload = [0u8; 0];
        let sent = paced_send(&snd, &mut payload, pps, Some(n), None);
        std::thread::sleep(self.drain_time());
        stop.store(true, Ordering::Relaxed);
        let (got, _) = receiver.join().map_err(|_| anyhow!("receiver panicked"))?;
        let after = self.stats()?;
        let rcvbuf = rcvbuf_errors(self)?.saturating_sub(buf_before);
        let reached = after.delay_box.forward.packets - before.delay_box.forward.packets;
        let received = got + rcvbuf;
        let lost = reached.saturating_sub(received);
        let measured = if reached > 0 {
            lost as f64 / reached as f64
        } else {
            1.0
        };
        let (ci_low, ci_high) = wilson_interval(lost, reached, Z999);
        let rel_error = if p > 0.0 { (measured - p) / p } else { 0.0 };
        let pass = reached > 0
            && match rule {
                LossRule::Zero => lost == 0,
                LossRule::WithinTolerance => (measured - p).abs() <= opts.tolerance * p,
                LossRule::ConfidenceInterval => ci_low <= p && p <= ci_high,
            };
        Ok(LossCheck {
            configured: p,
            measured,
            ci_low,
            ci_high,
            sent,
            reached,
            received,
            rcvbuf_errors: rcvbuf,
            bottleneck_drops: after.bottleneck.dropped - before.bottleneck.dropped,
            pps,
            rel_error,
            rule,
            pass,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wilson() {
        let (lo, hi) = wilson_interval(1000, 100_000, Z999);
        assert!(lo < 0.01 && hi > 0.01 && hi - lo < 0.0022, "{lo} {hi}");
        assert_eq!(wilson_interval(0, 0, Z999), (0.0, 1.0));
        let (lo, _) = wilson_interval(0, 1000, Z999);
        assert_eq!(lo, 0.0);
    }

    #[test]
    fn sample_size() {
        // p = 1 %, 5 %: ~429k samples for a 99.9 % half-width of 5 % of p.
        let n = loss_samples_needed(0.01, 0.05);
        assert!((428_000.0..430_000.0).contains(&n), "{n}");
    }
}
