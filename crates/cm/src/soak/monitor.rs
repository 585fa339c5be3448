//! The invariants of `cm soak`, checked once a second, and its summary.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::PoisonError;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::Result;

use super::Daemon;
use super::workers::Tally;
use crate::procfs::{fds, rss};

/// What the monitor holds the daemon to.
pub(crate) struct Bounds {
    pub duration: Duration,
    pub latency: Duration,
    pub clients: usize,
}

/// Headroom over the first measurement: the daemon's RSS.
const RSS_HEADROOM: u64 = 128 << 20;
/// Headroom over the first measurement: its descriptors.
const FD_HEADROOM: u64 = 256;
/// How long a killed client's flows may outlive it.
const RECLAIM: Duration = Duration::from_secs(2);

/// What a soak run found.
#[derive(Debug, Default)]
pub(crate) struct Report {
    pub seconds: f64,
    pub checks: u64,
    pub violations: Vec<String>,
    rss: (u64, u64, u64),
    fds: (u64, u64, u64),
    worst_turn_us: u64,
    lines: Vec<String>,
}

impl Report {
    fn check(&mut self, ok: bool, why: impl FnOnce() -> String) {
        self.checks += 1;
        if !ok {
            let v = why();
            eprintln!("violation: {v}");
            self.violations.push(v);
        }
    }

    /// Fold in the workers' counters and their own violations.
    pub(crate) fn absorb(&mut self, t: &Tally) {
        let turns: u64 = t
            .turns
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .sum();
        let n = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
        self.lines.push(format!(
            "  well-behaved: {turns} turns, {} calls, worst turn {:.1} ms",
            n(&t.good_ops),
            self.worst_turn_us as f64 / 1e3
        ));
        self.lines.push(format!(
            "  faults injected: {} clients killed mid-call, {} garbage frames, {} flow-limit hits, \
             {} sessions that never read, {} second-user sessions, {} open/close calls by churners",
            n(&t.kills),
            n(&t.garbage),
            n(&t.limit_hits),
            n(&t.deaf),
            n(&t.other_user),
            n(&t.churn_ops)
        ));
        let own = std::mem::take(&mut *t.violations.lock().unwrap_or_else(PoisonError::into_inner));
        self.checks += own.len() as u64;
        self.violations.extend(own);
    }

    pub(crate) fn print(&self) {
        println!("cm soak: {:.1} s", self.seconds);
        for l in &self.lines {
            println!("{l}");
        }
        let mib = |b: u64| b as f64 / f64::from(1u32 << 20);
        println!(
            "  daemon: RSS {:.1} -> {:.1} MiB (max {:.1}), descriptors {} -> {} (max {})",
            mib(self.rss.0),
            mib(self.rss.1),
            mib(self.rss.2),
            self.fds.0,
            self.fds.1,
            self.fds.2
        );
        println!(
            "  invariant checks: {} passed, {} violations",
            self.checks - self.violations.len() as u64,
            self.violations.len()
        );
        for v in self.violations.iter().take(20) {
            println!("  violation: {v}");
        }
    }
}

/// Check the invariants every second for `b.duration`.
pub(crate) fn watch(socket: &Path, daemon: &mut Daemon, t: &Tally, b: Bounds) -> Result<Report> {
    let mut r = Report::default();
    let start = Instant::now();
    let pid = daemon.pid();
    let (rss0, fds0) = (rss(pid).unwrap_or(0), fds(pid).unwrap_or(0));
    r.rss = (rss0, rss0, rss0);
    r.fds = (fds0, fds0, fds0);
    let mut last_turns = vec![0u64; b.clients];
    let mut last_progress = Instant::now();
    let mut pending: BTreeMap<u32, Instant> = BTreeMap::new();
    let mut monitor = libcm::Cm::connect(socket)?;
    let mut tick = 0u64;
    while start.elapsed() < b.duration {
        std::thread::sleep(Duration::from_secs(1));
        tick += 1;
        if tick % 30 == 0 {
            eprintln!(
                "cm soak: {:.0} of {:.0} s, {} checks, {} violations",
                start.elapsed().as_secs_f64(),
                b.duration.as_secs_f64(),
                r.checks,
                r.violations.len()
            );
        }
        let alive = daemon.alive();
        r.check(alive, || "the daemon exited".to_owned());
        if !alive {
            break;
        }
        let (m, f) = (rss(pid).unwrap_or(0), fds(pid).unwrap_or(0));
        r.rss = (r.rss.0, m, r.rss.2.max(m));
        r.fds = (r.fds.0, f, r.fds.2.max(f));
        r.check(m <= rss0 + RSS_HEADROOM, || {
            format!("daemon RSS {} MiB, started at {} MiB", m >> 20, rss0 >> 20)
        });
        r.check(f <= fds0 + FD_HEADROOM, || {
            format!("daemon holds {f} descriptors, started with {fds0}")
        });
        // Service: the slowest well-behaved turn of this second.
        let worst = t.worst_turn_us.swap(0, Ordering::Relaxed);
        r.worst_turn_us = r.worst_turn_us.max(worst);
        let bound = u64::try_from(b.latency.as_micros()).unwrap_or(u64::MAX);
        r.check(worst <= bound, || {
            format!("a well-behaved turn took {:.1} ms", worst as f64 / 1e3)
        });
        // Progress: every well-behaved client turned in the last 2 s.
        if last_progress.elapsed() >= Duration::from_secs(2) {
            let now: Vec<u64> = t
                .turns
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone();
            for (i, (a, b)) in now.iter().zip(&last_turns).enumerate() {
                r.check(a > b, || {
                    format!("well-behaved client {i} made no progress in 2 s")
                });
            }
            last_turns = now;
            last_progress = Instant::now();
        }
        // Reclaim: no flow outlives its killed client by more than 2 s.
        for (p, at) in std::mem::take(&mut *t.killed.lock().unwrap_or_else(PoisonError::into_inner))
        {
            pending.insert(p, at);
        }
        let stat = monitor.stat()?;
        let due: Vec<(u32, Instant)> = pending
            .iter()
            .filter(|(_, at)| at.elapsed() >= RECLAIM)
            .map(|(&p, &at)| (p, at))
            .collect();
        for (p, at) in due {
            let left = stat.flows.iter().filter(|fl| fl.pid == p).count();
            r.check(left == 0, || {
                format!(
                    "{left} flows of client pid {p} outlive it by {:.1} s",
                    at.elapsed().as_secs_f64()
                )
            });
            pending.remove(&p);
        }
    }
    Ok(r)
}
