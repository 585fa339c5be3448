//! Congestion collapse on the real Fig 1 topology of the transport-selection
//! middleware paper (§3.1, Fig 2): two unresponsive UDP CBR sources, n0 → n4
//! (the upper branch) and n1 → n5 (the lower branch), each starting at
//! 800 B/s and adding 800 B/s twice a second, over the emulated network of
//! `experiments/topologies/collapse-fig1.toml` ([`cm_netem::Network`]). The
//! lower source's packets fill the shared 0.3 Mbit/s n2 → n3 link although
//! the 10 kbit/s n3 → n5 link behind it drops nearly all of them, so the
//! upper branch's throughput falls as the lower source speeds up.
//!
//! One 90 s run on a 2-core VM (`cargo test -p cm-real --lib
//! collapse::tests::full -- --ignored --nocapture` prints the table): n5
//! receives 1200–1320 B/s, its 10 kbit/s link, with a one-way delay of
//! 4.8–5.1 s once its queue is full (from 8 s; the paper's Table 1: 4.8 s);
//! n4 follows its source to 18.7 kB/s at 11 s, stays at 17–21 kB/s (one
//! second 26.4 kB/s) while the two sources share the full n2 → n3 link, and
//! falls under 1 kB/s from 29 s until the sources stop at 90 s, 50 s earlier
//! than the paper's ns-2 run (27.8 kB/s at 28 s, zero at 81 s). From about
//! 24 s the n0 → n2 link, as fast as n2 → n3, delivers the upper flow at
//! exactly the rate at which n2 → n3's full queue frees places, a phase
//! relation DropTail is known to be sensitive to (Floyd & Jacobson's phase
//! effects; the paper repeated its runs with RED for that reason). With
//! n0 → n2 at 310 kbit/s instead, so that the relation drifts (`cargo test
//! -p cm-real --lib collapse::tests::drifting -- --ignored --nocapture`,
//! 40 s), n4 still receives 11.9–17.5 kB/s from 25 to 39 s, declining near
//! DropTail's proportional share (about 14 kB/s at 39 s). Which branch the
//! lock-out starves depends on the machine's timers: one CI run kept n4 at
//! 36.5 kB/s and locked the lower branch out instead. `real-collapse`
//! therefore draws each datagram's size from 120 ± 20 B
//! ([`CollapseConfig::size_spread`]), which lets the phase drift with the
//! paper's link rates.
//!
//! Only the plain UDP case; the congestion-controlled one goes through the
//! CM proxy. Sizes and rates count IP bytes (payload + 28), as the emulated
//! links and ns-2 do; each datagram carries its send time (the process's
//! monotonic clock, which every namespace shares) for the one-way delay.

use std::net::UdpSocket;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use cm_experiments::seeded::below;
use cm_netem::{NetemError, Network, QdiscStats, TopologySpec};
use serde::{Deserialize, Serialize};

use crate::error::{RealError, Result};

/// The Fig 1 topology (`experiments/topologies/collapse-fig1.toml`).
pub const FIG1_TOML: &str = include_str!("../../../experiments/topologies/collapse-fig1.toml");

/// The two flows: (branch, source node, sink node).
pub const FLOWS: [(&str, &str, &str); 2] = [("upper", "n0", "n4"), ("lower", "n1", "n5")];

/// IP + UDP header bytes of a datagram.
pub(crate) const HEADERS: usize = 28;

/// The Fig 1 topology, parsed.
pub fn fig1() -> Result<TopologySpec> {
    Ok(cm_netem::parse_topology(FIG1_TOML)?)
}

/// Parameters of a run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CollapseConfig {
    /// How long the sources send.
    pub duration: Duration,
    /// Mean IP size of a datagram, bytes (at least 44: headers, send time,
    /// sequence).
    pub packet_bytes: usize,
    /// Each datagram's IP size is drawn uniformly from `packet_bytes ±
    /// size_spread` (0: every datagram is `packet_bytes`). The rate counts
    /// the drawn sizes, so the mean rate is the ramp's either way.
    #[serde(default)]
    pub size_spread: usize,
    /// Each source's starting rate, bytes/s.
    pub start_rate: f64,
    /// What each step adds, bytes/s.
    pub step: f64,
    /// Steps per second.
    pub steps_per_second: f64,
}

impl Default for CollapseConfig {
    /// The paper's ramp (800 B/s, +800 B/s twice a second) for 90 s (its
    /// Fig 2 ends at the collapse, 81 s), in 120-byte packets (the paper's
    /// VoIP packet size; §3.1 gives none for its CBR sources).
    fn default() -> Self {
        CollapseConfig {
            duration: Duration::from_secs(90),
            packet_bytes: 120,
            size_spread: 0,
            start_rate: 800.0,
            step: 800.0,
            steps_per_second: 2.0,
        }
    }
}

impl CollapseConfig {
    /// A source's rate `t` into the run, bytes/s.
    pub fn rate_at(&self, t: Duration) -> f64 {
        self.start_rate + self.step * (t.as_secs_f64() * self.steps_per_second).floor()
    }

    /// The IP size of datagram `seq` of the source seeded `seed`.
    pub fn size_of(&self, seed: u64, seq: u64) -> usize {
        let spread = self.size_spread.min(self.packet_bytes - HEADERS - 16);
        self.packet_bytes - spread + below(seed, seq, 2 * spread as u64 + 1) as usize
    }
}

/// One second of the run, per flow (index as [`FLOWS`]).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Second {
    /// Seconds since the start (this row covers `[t, t + 1)`).
    pub t: u32,
    /// Bytes the sources sent (IP level).
    pub sent: [u64; 2],
    /// Bytes the sinks received (IP level): the throughput, bytes/s.
    pub received: [u64; 2],
    /// Mean one-way delay of what arrived, ms (0 when nothing did).
    pub mean_delay_ms: [f64; 2],
}

/// A finished run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CollapseRun {
    /// Its parameters.
    pub config: CollapseConfig,
    /// Per second, until the sinks stop (the queues drained).
    pub seconds: Vec<Second>,
    /// Every directional link's queue counters at the end: (id, from, to, counters).
    pub links: Vec<(usize, String, String, QdiscStats)>,
}

/// Per-second counters a thread fills (bytes, delay sum in ns, packets).
#[derive(Default)]
pub(crate) struct Tally {
    pub(crate) bytes: Vec<u64>,
    pub(crate) delay_ns: Vec<u64>,
    pub(crate) packets: Vec<u64>,
}

impl Tally {
    fn add(&mut self, at: Duration, bytes: usize, delay: Option<Duration>) {
        let s = at.as_secs() as usize;
        if self.bytes.len() <= s {
            self.bytes.resize(s + 1, 0);
            self.delay_ns.resize(s + 1, 0);
            self.packets.resize(s + 1, 0);
        }
        self.bytes[s] += bytes as u64;
        self.packets[s] += 1;
        if let Some(d) = delay {
            self.delay_ns[s] += d.as_nanos() as u64;
        }
    }
}

pub(crate) fn io(context: String) -> impl FnOnce(std::io::Error) -> RealError {
    move |error| RealError::Path(NetemError::Io { context, error })
}

/// The CBR source: the ramp of `cfg` for its duration, paced per packet.
pub(crate) fn source(sock: &UdpSocket, cfg: &CollapseConfig, t0: Instant) -> Tally {
    let mut buf = vec![0u8; cfg.packet_bytes + cfg.size_spread - HEADERS];
    let mut tally = Tally::default();
    let mut next = Duration::ZERO;
    let mut seq = 0u64;
    let seed =
        t0.elapsed().as_nanos() as u64 ^ u64::from(sock.local_addr().map_or(0, |a| a.port()));
    loop {
        if let Some(w) = next.checked_sub(t0.elapsed()) {
            std::thread::sleep(w);
        }
        let now = t0.elapsed();
        if now >= cfg.duration {
            return tally;
        }
        let size = cfg.size_of(seed, seq);
        buf[..8].copy_from_slice(&(now.as_nanos() as u64).to_be_bytes());
        buf[8..16].copy_from_slice(&seq.to_be_bytes());
        seq += 1;
        // A full local queue drops silently (UDP without IP_RECVERR), as a
        // host's own link does in ns-2.
        if sock.send(&buf[..size - HEADERS]).is_ok() {
            tally.add(now, size, None);
        }
        next += Duration::from_secs_f64(size as f64 / cfg.rate_at(next));
    }
}

/// The sink: counts what arrives until `until` (since `t0`).
pub(crate) fn sink(sock: &UdpSocket, t0: Instant, until: Duration, stop: &AtomicBool) -> Tally {
    let mut buf = vec![0u8; 65536];
    let mut tally = Tally::default();
    while t0.elapsed() < until && !stop.load(Ordering::Relaxed) {
        let Ok(n) = sock.recv(&mut buf) else { continue };
        let at = t0.elapsed();
        let sent = buf
            .get(..n)
            .and_then(|b| b.first_chunk::<8>())
            .map(|b| Duration::from_nanos(u64::from_be_bytes(*b)));
        tally.add(at, n + HEADERS, sent.map(|s| at.saturating_sub(s)));
    }
    tally
}

/// How long a packet can still be on its way from `from` to `to` after it was
/// sent: every link's full queue of `packet_bytes` packets plus its delay.
pub(crate) fn drain_time(
    net: &Network,
    from: &str,
    to: &str,
    packet_bytes: usize,
) -> Result<Duration> {
    let route = net.route(from, to)?.unwrap_or_default();
    let mut d = Duration::ZERO;
    for id in route {
        let l = &net.links()[id];
        let bits = (u64::from(l.queue_packets) + 1) * packet_bytes as u64 * 8;
        d += l.delay + Duration::from_secs_f64(bits as f64 / l.rate_bps as f64);
    }
    Ok(d)
}

/// Run the two plain UDP sources on `net` (built from [`fig1`] or a topology
/// with the same node names). `stop` ends the run early (e.g. on Ctrl-C).
pub fn run_udp(net: &Network, cfg: &CollapseConfig, stop: Arc<AtomicBool>) -> Result<CollapseRun> {
    if cfg.packet_bytes < HEADERS + 16 || cfg.packet_bytes + cfg.size_spread > 1500 {
        return Err(RealError::Path(NetemError::Parse {
            what: "collapse packet size".into(),
            detail: format!(
                "{} ± {} bytes, give 44..=1500",
                cfg.packet_bytes, cfg.size_spread
            ),
        }));
    }
    let mut socks = Vec::new();
    let mut until = cfg.duration;
    for (branch, from, to) in FLOWS {
        let (src, dst) = (net.node_addr(from)?, net.node_addr(to)?);
        let bind = |node: &str, addr| -> Result<UdpSocket> {
            net.spawn_in(node, move || UdpSocket::bind((addr, 0)))?
                .join()
                .map_err(|_| RealError::Thread("bind"))?
                .map_err(io(format!("binding a socket in {node} ({branch} branch)")))
        };
        let rx = bind(to, dst)?;
        let tx = bind(from, src)?;
        let to_addr = rx.local_addr().map_err(io("sink address".into()))?;
        tx.connect(to_addr)
            .map_err(io(format!("connect to {to_addr}")))?;
        rx.set_read_timeout(Some(Duration::from_millis(50)))
            .map_err(io("sink timeout".into()))?;
        until = until.max(cfg.duration + drain_time(net, from, to, cfg.packet_bytes)?);
        socks.push((tx, rx));
    }
    let until = until + Duration::from_millis(500);
    let t0 = Instant::now();
    let tallies = std::thread::scope(|s| {
        let handles: Vec<_> = socks
            .iter()
            .map(|(tx, rx)| {
                let stop = &stop;
                let sink = s.spawn(move || sink(rx, t0, until, stop));
                let src = s.spawn(move || source(tx, cfg, t0));
                (src, sink)
            })
            .collect();
        handles
            .into_iter()
            .map(|(a, b)| Some((a.join().ok()?, b.join().ok()?)))
            .collect::<Option<Vec<(Tally, Tally)>>>()
    })
    .ok_or(RealError::Thread("collapse source or sink"))?;
    let n = tallies
        .iter()
        .map(|(a, b)| a.bytes.len().max(b.bytes.len()))
        .max()
        .unwrap_or(0);
    let get = |v: &[u64], t: usize| v.get(t).copied().unwrap_or(0);
    let seconds = (0..n)
        .map(|t| {
            let mut row = Second {
                t: t as u32,
                ..Default::default()
            };
            for (f, (src, snk)) in tallies.iter().enumerate() {
                row.sent[f] = get(&src.bytes, t);
                row.received[f] = get(&snk.bytes, t);
                let p = get(&snk.packets, t);
                if p > 0 {
                    row.mean_delay_ms[f] = get(&snk.delay_ns, t) as f64 / p as f64 / 1e6;
                }
            }
            row
        })
        .collect();
    let links = net
        .links()
        .iter()
        .map(|l| Ok((l.id, l.from.clone(), l.to.clone(), net.link_stats(l.id)?)))
        .collect::<Result<_>>()?;
    Ok(CollapseRun {
        config: cfg.clone(),
        seconds,
        links,
    })
}

impl std::fmt::Display for CollapseRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "{:>4} {:>10} {:>10} {:>9} {:>10} {:>10} {:>9}",
            "t s", "n0 sent", "n4 B/s", "n4 ms", "n1 sent", "n5 B/s", "n5 ms"
        )?;
        for r in &self.seconds {
            writeln!(
                f,
                "{:>4} {:>10} {:>10} {:>9.1} {:>10} {:>10} {:>9.1}",
                r.t,
                r.sent[0],
                r.received[0],
                r.mean_delay_ms[0],
                r.sent[1],
                r.received[1],
                r.mean_delay_ms[1]
            )?;
        }
        for (id, from, to, q) in &self.links {
            writeln!(
                f,
                "link {id} {from}->{to}: sent {} pkts, dropped {}",
                q.sent_packets, q.dropped
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_ramp() {
        let c = CollapseConfig::default();
        assert_eq!(c.rate_at(Duration::ZERO), 800.0);
        assert_eq!(c.rate_at(Duration::from_millis(499)), 800.0);
        assert_eq!(c.rate_at(Duration::from_millis(500)), 1600.0);
        assert_eq!(c.rate_at(Duration::from_secs(28)), 800.0 * 57.0);
        assert_eq!(fig1().unwrap().nodes.len(), 6);
    }

    #[test]
    fn sizes_spread_uniformly_around_the_mean() {
        let c = CollapseConfig {
            size_spread: 20,
            ..Default::default()
        };
        let sizes: Vec<usize> = (0..20_000).map(|i| c.size_of(7, i)).collect();
        assert!(sizes.iter().all(|s| (100..=140).contains(s)));
        assert!(sizes.contains(&100) && sizes.contains(&140));
        let mean = sizes.iter().sum::<usize>() as f64 / sizes.len() as f64;
        assert!((mean - 120.0).abs() < 0.5, "{mean}");
        // No spread: every datagram is the mean; a spread wider than the
        // headers allow is clamped.
        assert_eq!(CollapseConfig::default().size_of(7, 3), 120);
        let wide = CollapseConfig {
            size_spread: 500,
            ..Default::default()
        };
        assert!((0..1000).all(|i| (44..=196).contains(&wide.size_of(1, i))));
    }

    /// A run on Fig 1 with link 0 (n0 - n2) at `n0_bps` when given.
    fn real_run(duration: Duration, n0_bps: Option<u64>) -> Option<CollapseRun> {
        if !cm_netem::is_root() {
            println!("skipped: needs root");
            return None;
        }
        let mut spec = fig1().unwrap();
        if let Some(r) = n0_bps {
            spec.links[0].rate_bps = r;
        }
        let net = Network::build(&spec).unwrap();
        let cfg = CollapseConfig {
            duration,
            ..Default::default()
        };
        let run = run_udp(&net, &cfg, Arc::new(AtomicBool::new(false))).unwrap();
        println!("{run}");
        Some(run)
    }

    /// 8 s (about 15 s with the drain): the lower sink is held to its 10 kbit/s
    /// link, the upper one receives what is sent while nothing congests.
    #[test]
    fn short_udp_run_on_the_real_topology() {
        let Some(run) = real_run(Duration::from_secs(8), None) else {
            return;
        };
        let r = &run.seconds;
        assert!(r.len() >= 9, "{run}");
        // 10 kbit/s = 1250 B/s: never more at n5 (a second's slack for the burst).
        for s in &r[1..] {
            assert!(s.received[1] <= 1250 + 1600, "{run}");
        }
        assert!(r[5].received[1] >= 1000, "{run}");
        // Seconds 1-3 offer less than the 0.3 Mbit/s n2 -> n3 link carries.
        for s in &r[1..4] {
            let (sent, got) = (s.sent[0] as f64, s.received[0] as f64);
            assert!((got - sent).abs() <= 0.2 * sent, "{run}");
        }
    }

    /// The whole 90 s run (`cargo test -p cm-real --lib collapse::tests::full
    /// -- --ignored --nocapture`).
    #[test]
    #[ignore = "90 s; run by hand for the numbers"]
    fn full_udp_run_on_the_real_topology() {
        real_run(CollapseConfig::default().duration, None);
    }

    /// 40 s with n0 - n2 at 310 kbit/s, 3 % faster than n2 - n3, so the
    /// upper flow's arrivals drift against the places n2 -> n3's full queue
    /// frees (`cargo test -p cm-real --lib collapse::tests::drifting -- --ignored --nocapture`).
    #[test]
    #[ignore = "40 s; run by hand for the numbers"]
    fn drifting_phase_with_a_faster_n0_link() {
        real_run(Duration::from_secs(40), Some(310_000));
    }
}
