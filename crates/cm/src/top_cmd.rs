//! `cm top`: `cm stat`, live. Each refresh also shows every flow's
//! measured sending rate, from the growth of its `sent` counter since the
//! previous refresh.

use std::collections::HashMap;
use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

use anyhow::{Result, bail};

use crate::stat_view::{SocketArg, StatView, connect, mbit, render};

/// Options of `cm top`.
#[derive(Debug, clap::Args)]
pub struct TopArgs {
    #[command(flatten)]
    pub daemon: SocketArg,
    /// Seconds between refreshes.
    #[arg(long, short, default_value_t = 1.0)]
    pub interval: f64,
    /// Stop after this many refreshes (default: until Ctrl-C).
    #[arg(long, short = 'n')]
    pub count: Option<u64>,
}

/// Measured sending rates (Mbit/s by flow id) from `sent` counter deltas.
#[derive(Debug, Default)]
pub struct RateMeter {
    last: HashMap<u64, (u64, Instant)>,
}

impl RateMeter {
    /// Record this refresh's counters and return the rates of the flows
    /// seen at the previous refresh too (a new flow has no rate yet; a
    /// flow that disappeared is forgotten).
    pub fn observe(
        &mut self,
        sent: impl IntoIterator<Item = (u64, u64)>,
        now: Instant,
    ) -> HashMap<u64, f64> {
        let mut rates = HashMap::new();
        let mut next = HashMap::new();
        for (id, bytes) in sent {
            if let Some(&(prev, at)) = self.last.get(&id) {
                let secs = now.saturating_duration_since(at).as_secs_f64();
                if secs > 0.0 {
                    rates.insert(id, mbit(bytes.saturating_sub(prev) as f64 / secs));
                }
            }
            next.insert(id, (bytes, now));
        }
        self.last = next;
        rates
    }
}

/// Run `cm top`.
pub fn run(args: &TopArgs) -> Result<()> {
    if !(args.interval.is_finite() && args.interval > 0.0) {
        bail!("--interval must be a positive number of seconds");
    }
    if args.count == Some(0) {
        bail!("--count must be at least 1");
    }
    let interval = Duration::from_secs_f64(args.interval);
    let tty = std::io::stdout().is_terminal();
    let path = args.daemon.path();
    let mut cm = connect(Some(&path))?;
    let mut meter = RateMeter::default();
    let mut n = 0u64;
    let mut next = Instant::now();
    loop {
        let stat = cm.stat()?;
        let now = Instant::now();
        let rates = meter.observe(stat.flows.iter().map(|f| (f.id, f.sent)), now);
        let mut view = StatView::new(&stat);
        view.set_send_rates(&rates);
        let mut out = String::new();
        if tty {
            // Cursor home, clear screen.
            out.push_str("\x1b[H\x1b[2J");
        } else if n > 0 {
            out.push('\n');
        }
        out.push_str(&format!(
            "cm top  {}  every {}s  refresh {}  (Ctrl-C quits)\n\n",
            path.display(),
            args.interval,
            n + 1,
        ));
        out.push_str(&render(&view, true));
        let mut stdout = std::io::stdout().lock();
        stdout.write_all(out.as_bytes())?;
        stdout.flush()?;
        drop(stdout);
        n += 1;
        if args.count.is_some_and(|c| n >= c) {
            return Ok(());
        }
        next += interval;
        let now = Instant::now();
        if next > now {
            std::thread::sleep(next - now);
        } else {
            next = now;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_come_from_counter_deltas() {
        let mut m = RateMeter::default();
        let t0 = Instant::now();
        assert!(m.observe([(1, 1000), (2, 0)], t0).is_empty());
        let r = m.observe([(1, 1_251_000), (3, 5)], t0 + Duration::from_secs(1));
        assert!((r[&1] - 10.0).abs() < 1e-9, "{r:?}");
        assert!(!r.contains_key(&2) && !r.contains_key(&3));
        // Flow 2 vanished and came back: it starts over.
        let r = m.observe([(2, 100)], t0 + Duration::from_secs(2));
        assert!(r.is_empty());
    }
}
