//! What /proc says about a process: CPU time (`/proc/<pid>/stat` utime +
//! stime), resident memory (`/proc/<pid>/status` VmRSS, RssAnon,
//! RssShmem) and open descriptors (`/proc/<pid>/fd`).

use std::time::Duration;

use anyhow::{Context, anyhow};

/// Clock ticks per second of `/proc/<pid>/stat` times (USER_HZ, 100 on
/// Linux for every architecture's user ABI).
const USER_HZ: u64 = 100;

/// One look at a process.
#[derive(Clone, Copy, Debug, Default)]
pub struct ProcSample {
    /// User plus system CPU time so far.
    pub cpu: Duration,
    /// Resident memory, bytes (VmRSS).
    pub rss: u64,
    /// Anonymous resident memory (heap, stacks), bytes (RssAnon).
    pub rss_anon: u64,
    /// Resident shared memory (the clients' rings), bytes (RssShmem).
    pub rss_shmem: u64,
    /// Open file descriptors.
    pub fds: u64,
}

/// CPU time of process `pid` (user + system).
pub fn cpu_time(pid: u32) -> anyhow::Result<Duration> {
    let path = format!("/proc/{pid}/stat");
    let text = std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
    // The command name (field 2) is in parentheses and may hold spaces:
    // fields are counted after its closing parenthesis.
    let rest = text
        .rsplit_once(')')
        .map(|(_, r)| r)
        .ok_or_else(|| anyhow!("{path}: no ')' after the command name"))?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After ')': field 3 (state) is index 0, so utime (14) is 11, stime 12.
    let num = |i: usize| -> anyhow::Result<u64> {
        fields
            .get(i)
            .and_then(|f| f.parse().ok())
            .ok_or_else(|| anyhow!("{path}: field {} is not a number", i + 3))
    };
    let ticks = num(11)? + num(12)?;
    Ok(Duration::from_millis(ticks * 1000 / USER_HZ))
}

/// CPU time of the live threads of process `pid` to the nanosecond: the sum
/// of `/proc/<pid>/task/*/schedstat`'s run times, where [`cpu_time`] counts
/// in clock ticks (10 ms). Threads that have exited are not counted, so it
/// suits a process whose threads live as long as it does (the daemon); a
/// thread that exits between the listing and its read is skipped like
/// them. [`cpu_time`] when no thread's scheduler statistics are readable.
pub fn threads_cpu_time(pid: u32) -> anyhow::Result<Duration> {
    let dir = format!("/proc/{pid}/task");
    let sum = std::fs::read_dir(&dir).ok().and_then(|tasks| {
        let (read, ns) = tasks
            .flatten()
            .filter_map(|t| schedstat_ns(&t.path().join("schedstat")))
            .fold((0u32, 0u64), |(n, sum), v| (n + 1, sum + v));
        (read > 0).then_some(ns)
    });
    match sum {
        Some(ns) => Ok(Duration::from_nanos(ns)),
        None => cpu_time(pid),
    }
}

/// The run time, ns, in a thread's `schedstat` (its first field).
fn schedstat_ns(path: &std::path::Path) -> Option<u64> {
    let text = std::fs::read_to_string(path).ok()?;
    text.split_whitespace().next()?.parse().ok()
}

/// A `kB` line of `/proc/<pid>/status`, in bytes (0 if absent).
fn status_kib(status: &str, key: &str) -> u64 {
    status
        .lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        .map_or(0, |kib| kib * 1024)
}

/// Resident memory of process `pid`, bytes (VmRSS), if readable.
pub fn rss(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    Some(status_kib(&status, "VmRSS"))
}

/// Open descriptors of process `pid`, if this user may list them.
pub fn fds(pid: u32) -> Option<u64> {
    Some(std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?.count() as u64)
}

/// Everything at once for process `pid`.
pub fn sample(pid: u32) -> anyhow::Result<ProcSample> {
    let path = format!("/proc/{pid}/status");
    let status = std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
    let fd_dir = format!("/proc/{pid}/fd");
    let fds = std::fs::read_dir(&fd_dir)
        .with_context(|| format!("listing {fd_dir}"))?
        .count();
    Ok(ProcSample {
        cpu: cpu_time(pid)?,
        rss: status_kib(&status, "VmRSS"),
        rss_anon: status_kib(&status, "RssAnon"),
        rss_shmem: status_kib(&status, "RssShmem"),
        fds: fds as u64,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn this_process_is_readable() {
        let s = sample(std::process::id()).unwrap();
        assert!(s.rss > 0 && s.fds > 0);
    }

    /// The test harness runs other tests on threads that come and go, and
    /// an exited thread leaves the sum: this thread's own run time is what
    /// is compared, and the sum must cover it.
    #[test]
    fn thread_cpu_time_resolves_what_ticks_cannot() {
        let own = || schedstat_ns(std::path::Path::new("/proc/thread-self/schedstat")).unwrap();
        let t0 = own();
        // 2 ms of this thread's CPU: under one 10 ms tick.
        let start = cm_clock::thread_cpu();
        let mut x = 0u64;
        while cm_clock::thread_cpu().saturating_sub(start) < Duration::from_millis(2) {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        let t1 = own();
        assert!(t1 - t0 >= 1_000_000, "{t0} -> {t1} ns");
        let all = threads_cpu_time(std::process::id()).unwrap();
        assert!(all >= Duration::from_nanos(t1), "{all:?} < {t1} ns");
    }

    #[test]
    fn status_lines_parse() {
        let st = "Name:\tcmd\nVmRSS:\t   1234 kB\nRssShmem:\t 8 kB\n";
        assert_eq!(status_kib(st, "VmRSS"), 1234 * 1024);
        assert_eq!(status_kib(st, "RssShmem"), 8 * 1024);
        assert_eq!(status_kib(st, "RssAnon"), 0);
    }
}
