//! CPU accounting for `CM_BENCH_DEBUG`: per thread (with context switches,
//! from `cm-clock`) and per CPU idle time from `/proc`.

use std::time::Duration as StdDuration;

/// CPU time (user + system) of each thread of this process so far, by
/// thread id, and its context switches (for `CM_BENCH_DEBUG`: who pays for
/// a variant).
pub fn thread_cpu() -> std::collections::HashMap<u64, (StdDuration, u64)> {
    cm_clock::threads()
        .into_iter()
        .map(|t| (t.tid, (t.cpu, t.context_switches)))
        .collect()
}

/// Idle time of each CPU so far (`/proc/stat`, idle + iowait), for
/// `CM_BENCH_DEBUG`: a variant slower than raw UDP with CPUs idle waits on
/// wake-ups, not on work.
pub fn cpu_idle() -> Vec<StdDuration> {
    std::fs::read_to_string("/proc/stat")
        .unwrap_or_default()
        .lines()
        .filter(|l| l.starts_with("cpu") && !l.starts_with("cpu "))
        .map(|l| {
            let f: Vec<u64> = l
                .split_whitespace()
                .skip(1)
                .filter_map(|x| x.parse().ok())
                .collect();
            StdDuration::from_millis(
                (f.get(3).copied().unwrap_or(0) + f.get(4).copied().unwrap_or(0)) * 10,
            )
        })
        .collect()
}

/// Each thread's time on a CPU and time runnable but waiting for one
/// (`/proc/self/task/*/schedstat`, nanoseconds), by thread id.
pub fn thread_sched() -> std::collections::HashMap<u64, (StdDuration, StdDuration)> {
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return Default::default();
    };
    dir.flatten()
        .filter_map(|e| {
            let tid = e.file_name().to_string_lossy().parse::<u64>().ok()?;
            let s = std::fs::read_to_string(e.path().join("schedstat")).ok()?;
            let mut f = s.split_whitespace().map(|x| x.parse::<u64>().unwrap_or(0));
            let run = StdDuration::from_nanos(f.next()?);
            let wait = StdDuration::from_nanos(f.next()?);
            Some((tid, (run, wait)))
        })
        .collect()
}
