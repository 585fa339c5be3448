//! Where the benchmark's threads run and how a hung run is caught: the
//! sender and receiver pinned to CPUs of their own (the module docs' "two
//! hosts"), and a watchdog on the progress counters.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration as StdDuration, Instant};

/// What the running variant is doing, for the watchdog: [variant index,
/// acked, queued/requested, sent].
static DIAG: [AtomicU64; 4] = [const { AtomicU64::new(0) }; 4];

pub fn diag(i: usize, v: u64) {
    DIAG[i].store(v, Ordering::Relaxed);
}

/// Abort with the diagnostics if a run acknowledges nothing for `limit`: a
/// hung benchmark must fail loudly, never stall CI.
pub fn watchdog(limit: StdDuration) {
    std::thread::spawn(move || {
        let mut last = u64::MAX;
        let mut since = Instant::now();
        loop {
            std::thread::sleep(StdDuration::from_millis(500));
            let progress = DIAG[1].load(Ordering::Relaxed);
            if progress != last {
                last = progress;
                since = Instant::now();
            } else if since.elapsed() > limit {
                eprintln!(
                    "watchdog: no progress for {:?}: variant {} acked {} queued {} sent {}",
                    limit,
                    DIAG[0].load(Ordering::Relaxed),
                    DIAG[1].load(Ordering::Relaxed),
                    DIAG[2].load(Ordering::Relaxed),
                    DIAG[3].load(Ordering::Relaxed),
                );
                std::process::exit(3);
            }
        }
    });
}

/// Datagrams lost on loopback over the whole run (reported at the end).
pub static LOST: AtomicU64 = AtomicU64::new(0);

/// Pin the calling thread to `cpu` (the sender to 0, the receiver to 1;
/// the daemon's thread stays free): the two hosts of the module docs.
/// `CM_BENCH_NO_PIN=1` leaves placement to the kernel. A machine without
/// that CPU refuses, and the thread runs where the kernel puts it.
#[allow(unsafe_code)]
pub fn pin_to(cpu: usize) {
    if std::env::var_os("CM_BENCH_NO_PIN").is_some() {
        return;
    }
    // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET and
    // sched_setaffinity (0 = the calling thread) only read it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}
