//! A progress bar on stderr and a parallel map over a sweep's runs.

use std::io::Write;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

/// `[#####.....] 12/70 runs` on stderr, redrawn in place.
#[derive(Debug)]
pub struct Progress {
    label: String,
    total: usize,
    done: AtomicUsize,
    quiet: bool,
    lock: Mutex<()>,
}

impl Progress {
    /// A bar for `total` runs; `quiet` draws nothing (tests).
    pub fn new(label: &str, total: usize, quiet: bool) -> Self {
        Progress {
            label: label.to_string(),
            total,
            done: AtomicUsize::new(0),
            quiet,
            lock: Mutex::new(()),
        }
    }

    /// One more run finished.
    pub fn tick(&self) {
        let n = self.done.fetch_add(1, Ordering::SeqCst) + 1;
        if self.quiet {
            return;
        }
        let _g = self.lock.lock();
        let width = 30;
        let filled = (n * width).checked_div(self.total).unwrap_or(width);
        let bar: String = (0..width)
            .map(|i| if i < filled { '#' } else { '.' })
            .collect();
        let mut e = std::io::stderr();
        let _ = write!(e, "\r{} [{bar}] {n}/{} runs", self.label, self.total);
        if n >= self.total {
            let _ = writeln!(e);
        }
        let _ = e.flush();
    }
}

/// Maps `f` over `items` on up to `threads` threads (order preserved),
/// ticking `progress` after each item.
pub fn par_map<T: Sync, R: Send>(
    items: &[T],
    threads: usize,
    progress: &Progress,
    f: impl Fn(&T) -> R + Sync,
) -> Vec<R> {
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<R>>> = Mutex::new((0..items.len()).map(|_| None).collect());
    std::thread::scope(|s| {
        for _ in 0..threads.max(1) {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    let Some(item) = items.get(i) else { break };
                    let r = f(item);
                    if let Ok(mut v) = results.lock() {
                        v[i] = Some(r);
                    }
                    progress.tick();
                }
            });
        }
    });
    results
        .into_inner()
        .unwrap_or_default()
        .into_iter()
        .flatten()
        .collect()
}
