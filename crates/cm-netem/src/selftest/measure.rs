//! The self-test's three phases: delay (UDP ping-pong), rate (offer more
//! than the bottleneck and count what arrives), loss (a sample below the rate).

use std::net::Ipv4Addr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::error::{IoContext, NetemError, Result};

use super::confidence::{Z999, loss_samples_needed, wilson_interval};
use super::traffic::{bind_at, bind_in, paced_send, rcvbuf_errors, receive_until};
use super::{DelayCheck, LossCheck, LossRule, RateCheck, SelfTestOptions, UDP_IP_OVERHEAD};
use crate::path::{Node, Path};

/// Payload of the rate-phase datagrams.
const RATE_PAYLOAD: usize = 1200;
/// Payload of a delay probe.
const PROBE_PAYLOAD: usize = 32;
/// The fastest the loss phase sends, whatever the rate (what 2 cores sustain through
/// the whole path with room to spare).
pub(super) const LOSS_MAX_PPS: f64 = 40_000.0;
/// Absolute floor of the delay tolerance (see [`DelayCheck::pass`]).
const DELAY_FLOOR_S: f64 = 200e-6;

/// Connect `snd` to `rcv` and give `rcv` the short read timeout the
/// counting receiver polls with.
pub(super) fn connect_pair(snd: &std::net::UdpSocket, rcv: &std::net::UdpSocket) -> Result<()> {
    let to = rcv.local_addr().io_context(|| "receiver socket address")?;
    snd.connect(to)
        .io_context(|| format!("connecting to {to}"))?;
    rcv.set_read_timeout(Some(Duration::from_millis(20)))
        .io_context(|| "receiver socket timeout")
}

impl Path {
    pub(super) fn drain_time(&self) -> Duration {
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
        let echo_addr = echo_sock
            .local_addr()
            .io_context(|| "echo socket address")?;
        snd.connect(echo_addr)
            .io_context(|| format!("connecting to {echo_addr}"))?;
        echo_sock
            .set_read_timeout(Some(Duration::from_millis(20)))
            .io_context(|| "echo socket timeout")?;
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
        snd.set_read_timeout(Some(timeout))
            .io_context(|| "probe socket timeout")?;
        let mut rtts = Vec::new();
        let mut buf = [0u8; 2048];
        for seq in 0..probes {
            let mut probe = [0u8; PROBE_PAYLOAD];
            probe[..8].copy_from_slice(&seq.to_be_bytes());
            let t0 = Instant::now();
            snd.send(&probe).io_context(|| "sending a probe")?;
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
        echo.join().map_err(|_| NetemError::Thread("echo".into()))?;
        rtts.sort();
        Ok(rtts)
    }

    pub(super) fn measure_delay(&self, opts: &SelfTestOptions) -> Result<DelayCheck> {
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
            .ok_or(NetemError::NoMeasurement("the router does not answer"))?;
        let rtt_nominal = 2 * c.one_way_delay;
        let probes = (1.0 / rtt_nominal.as_secs_f64().max(1e-3)).clamp(10.0, 50.0) as u64;
        let timeout = rtt_nominal + Duration::from_millis(500);
        let rtts = self.ping_pong(Node::Receiver, self.receiver_addr(), probes, timeout)?;
        if rtts.is_empty() {
            return Err(NetemError::NoMeasurement(
                "no probe came back: the path does not carry packets",
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

    pub(super) fn measure_rate(&self, opts: &SelfTestOptions) -> Result<RateCheck> {
        let c = self.config().clone();
        let rcv = bind_in(self, Node::Receiver)?;
        let snd = bind_in(self, Node::Sender)?;
        connect_pair(&snd, &rcv)?;
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
        let (received, log) = receiver
            .join()
            .map_err(|_| NetemError::Thread("receiver".into()))?;
        let after = self.stats()?.bottleneck;
        // Skip the first 100 ms of arrivals (the token bucket starts full).
        let skip = Duration::from_millis(100).min(duration / 8);
        let t0 = log
            .first()
            .map(|x| x.0)
            .ok_or(NetemError::NoMeasurement("nothing arrived"))?;
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

    pub(super) fn measure_loss(&self, opts: &SelfTestOptions) -> Result<LossCheck> {
        let c = self.config().clone();
        let p = self.loss();
        let rcv = bind_in(self, Node::Receiver)?;
        let snd = bind_in(self, Node::Sender)?;
        connect_pair(&snd, &rcv)?;
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
        let (got, _) = receiver
            .join()
            .map_err(|_| NetemError::Thread("receiver".into()))?;
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
