//! The daemon's memory budget (`max_memory_mib`): once a second the loop
//! reads its resident set size; above the budget it refuses new flows and
//! new clients, naming the limit (`admission.rs`), while every existing
//! client and flow keeps being served. Below it again, both are accepted
//! again. The per-client and per-user limits bound what any one user can
//! make the daemon hold; the budget bounds their sum.

use std::time::{Duration, Instant};

use super::Daemon;
use crate::log;

/// How often the resident set size is read (one small `/proc` read).
const EVERY: Duration = Duration::from_secs(1);

/// The budget's state in the loop.
#[derive(Debug)]
pub(super) struct Budget {
    checked: Instant,
    /// Over the budget at the last reading.
    pub over: bool,
    /// The last reading, bytes.
    pub rss: u64,
}

impl Budget {
    pub(super) fn new() -> Budget {
        Budget {
            checked: Instant::now(),
            over: false,
            rss: 0,
        }
    }
}

impl Daemon {
    /// Once a second: read the resident set size and compare it with the
    /// budget; say so in the log when it crosses.
    pub(super) fn check_memory(&mut self, now: Instant) {
        if now.saturating_duration_since(self.budget.checked) < EVERY {
            return;
        }
        self.budget.checked = now;
        let Some(rss) = resident_bytes() else {
            return;
        };
        self.budget.rss = rss;
        let over = rss > self.cfg.max_memory_mib.saturating_mul(1 << 20);
        if over != self.budget.over {
            log!(
                warn,
                "msg=\"memory budget {}\" rss_mib={} max_memory_mib={}",
                if over {
                    "exceeded: new flows and clients refused"
                } else {
                    "respected again"
                },
                rss >> 20,
                self.cfg.max_memory_mib
            );
        }
        self.budget.over = over;
    }
}

/// This process's resident set size (`VmRSS` of /proc/self/status).
pub(crate) fn resident_bytes() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let kib: u64 = s
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    Some(kib * 1024)
}
