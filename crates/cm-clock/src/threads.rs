//! CPU time of every thread of this process, read from `/proc/self/task`
//! (for benchmarks and tests that ask which thread paid for the work; the
//! calling thread's own time is [`crate::thread_cpu`], which is exact).

use std::path::Path;
use std::time::Duration as StdDuration;

/// Clock ticks per second of `/proc`'s `utime`/`stime` (`USER_HZ`, 100 on
/// Linux).
const TICK: StdDuration = StdDuration::from_millis(10);

/// One thread's CPU account.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThreadCpu {
    /// The kernel's thread id.
    pub tid: u64,
    /// The thread's name (`comm`, at most 15 bytes).
    pub name: String,
    /// User + system time so far, in `USER_HZ` ticks (10 ms resolution).
    pub cpu: StdDuration,
    /// Voluntary + involuntary context switches so far.
    pub context_switches: u64,
}

/// Every thread of this process with its CPU time so far (empty where
/// `/proc` cannot be read).
pub fn threads() -> Vec<ThreadCpu> {
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| {
            let tid = e.file_name().to_string_lossy().parse::<u64>().ok()?;
            let path = e.path();
            let name = std::fs::read_to_string(path.join("comm")).unwrap_or_default();
            Some(ThreadCpu {
                tid,
                name: name.trim_end().to_string(),
                cpu: stat_cpu(&path.join("stat")),
                context_switches: context_switches(&path.join("status")),
            })
        })
        .collect()
}

/// CPU time so far of this process's thread named `name` (the first one,
/// if several share it).
pub fn named_thread_cpu(name: &str) -> Option<StdDuration> {
    threads()
        .into_iter()
        .find(|t| t.name == name)
        .map(|t| t.cpu)
}

/// User + system time from a `/proc/.../stat` file: `utime` and `stime`
/// are fields 14 and 15 (proc(5)), tokens 11 and 12 after the command
/// name. Tokens are taken by position: some fields (`tpgid` without a
/// controlling terminal) are negative, so skipping what does not parse as
/// unsigned would shift them.
fn stat_cpu(path: &Path) -> StdDuration {
    let t = std::fs::read_to_string(path).unwrap_or_default();
    let rest = t.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = rest.split_whitespace().collect();
    let field = |i: usize| f.get(i).and_then(|x| x.parse::<u64>().ok()).unwrap_or(0);
    let ticks = field(11) + field(12);
    TICK * u32::try_from(ticks).unwrap_or(u32::MAX)
}

/// `voluntary_ctxt_switches` + `nonvoluntary_ctxt_switches` from a
/// `/proc/.../status` file.
fn context_switches(path: &Path) -> u64 {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains("ctxt_switches"))
        .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_busy_named_thread_is_found_with_its_time() {
        let h = std::thread::Builder::new()
            .name("cm-clock-busy".into())
            .spawn(|| {
                let until = std::time::Instant::now() + StdDuration::from_millis(60);
                let mut x = 0u64;
                while std::time::Instant::now() < until {
                    x = x.wrapping_mul(31).wrapping_add(7);
                }
                std::hint::black_box(x);
                std::thread::sleep(StdDuration::from_millis(200));
            })
            .expect("spawn");
        std::thread::sleep(StdDuration::from_millis(120));
        let cpu = named_thread_cpu("cm-clock-busy");
        h.join().expect("join");
        let cpu = cpu.expect("the named thread is listed");
        assert!(cpu >= StdDuration::from_millis(20), "{cpu:?}");
        assert!(threads().iter().any(|t| t.context_switches > 0));
    }
}
