//! The daemon runs beside its busiest shared-memory client (cmd's
//! `follow.rs`): its thread moves to the CPU where a busy client waits for
//! it by polling and yielding, follows it when it moves, goes back to the
//! whole affinity mask it started with once clients are quiet, stays put
//! for a client that sleeps while it waits, or when configured not to
//! follow, and is not kept from a polling client by a busier one that
//! never waits. One test in its own binary: it finds the daemon's thread by
//! name, so no other daemon may run in this process meanwhile.

#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::TestDaemon;
use libcm::{CmEvent, Feedback};
use rustix::process::Pid;
use rustix::thread::{CpuSet, sched_getaffinity, sched_setaffinity};

fn cpus(set: &CpuSet) -> Vec<usize> {
    (0..CpuSet::MAX_CPU).filter(|&c| set.is_set(c)).collect()
}

/// The id of this process's thread named `cmd-daemon` (exactly one; a
/// thread names itself as it starts, so give it a moment).
fn daemon_tid() -> Pid {
    let t0 = Instant::now();
    loop {
        let found: Vec<u64> = cm_clock::threads()
            .into_iter()
            .filter(|t| t.name == cm_daemon::TempDaemon::THREAD_NAME)
            .map(|t| t.tid)
            .collect();
        assert!(found.len() <= 1, "one daemon thread: {found:?}");
        if let [tid] = found[..] {
            return Pid::from_raw(i32::try_from(tid).unwrap()).unwrap();
        }
        assert!(t0.elapsed() < Duration::from_secs(5), "no daemon thread");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn daemon_cpus(tid: Pid) -> Vec<usize> {
    cpus(&sched_getaffinity(Some(tid)).unwrap())
}

fn pin_me(cpu: usize) {
    let mut s = CpuSet::new();
    s.set(cpu);
    sched_setaffinity(None, &s).unwrap();
}

/// Keep a flow busy (request, grant, notify, ack) from this thread until
/// `done` holds or `limit` passes; returns whether `done` held. `spin`:
/// how long libcm polls for an answer before it sleeps (`None`: its
/// default; zero: sleep at once, never poll).
fn busy_until(
    d: &TestDaemon,
    spin: Option<Duration>,
    limit: Duration,
    mut done: impl FnMut() -> bool,
) -> bool {
    let mut cm = d.client();
    if let Some(s) = spin {
        cm.set_spin(s);
    }
    let flow = cm.open(None, "127.0.0.1:9".parse().unwrap()).unwrap();
    let t0 = Instant::now();
    let mut ok = false;
    while t0.elapsed() < limit {
        cm.request(flow).unwrap();
        let bytes = loop {
            match cm.poll_event().unwrap() {
                Some(CmEvent::Send { bytes, .. }) => break bytes,
                Some(_) => {}
                None => cm.wait(Some(Duration::from_millis(100))).unwrap(),
            }
        };
        cm.notify(flow, bytes.get()).unwrap();
        cm.update(
            flow,
            Feedback::acked(bytes.get(), cm_core::Duration::from_micros(50)),
        )
        .unwrap();
        if done() {
            ok = true;
            break;
        }
    }
    cm.close(flow).unwrap();
    ok
}

#[test]
fn the_daemon_follows_its_busy_clients_cpu_and_lets_go_when_quiet() {
    let mask = sched_getaffinity(None).unwrap();
    let all = cpus(&mask);
    if all.len() < 2 {
        eprintln!("one CPU: nothing to follow, nothing to test");
        return;
    }
    let (a, b) = (all[0], all[1]);

    // Configured not to follow: a busy client pinned elsewhere moves
    // nothing.
    {
        let d = TestDaemon::with_config(cm_daemon::DaemonConfig {
            follow_client_cpu: false,
            ..Default::default()
        });
        let tid = daemon_tid();
        pin_me(b);
        busy_until(&d, None, Duration::from_millis(200), || false);
        assert_eq!(daemon_cpus(tid), all, "stayed where the kernel puts it");
    }

    // (A thread starts with its creator's mask: start from the whole one.)
    sched_setaffinity(None, &mask).unwrap();
    let d = TestDaemon::start();
    let tid = daemon_tid();
    assert_eq!(daemon_cpus(tid), all);
    // A busy client that sleeps while it waits has no CPU to hand over.
    pin_me(b);
    busy_until(&d, Some(Duration::ZERO), Duration::from_millis(200), || {
        false
    });
    assert_eq!(daemon_cpus(tid), all, "a sleeping client is not followed");
    // A busy client that polls for its answers on b, then on a: the daemon
    // goes to each in turn.
    for cpu in [b, a] {
        pin_me(cpu);
        let moved = busy_until(&d, None, Duration::from_secs(5), || {
            daemon_cpus(tid) == [cpu]
        });
        assert!(
            moved,
            "daemon on {:?}, busy client on {cpu}",
            daemon_cpus(tid)
        );
    }
    // Quiet for 100 ms: back to the whole start mask.
    let t0 = Instant::now();
    while daemon_cpus(tid) != all {
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "still pinned to {:?} after {:?} of quiet",
            daemon_cpus(tid),
            t0.elapsed()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(d);

    // A busier client that never waits (so says no CPU) beside one that
    // polls for its answers: the daemon goes to the one that polls.
    sched_setaffinity(None, &mask).unwrap();
    let d = TestDaemon::with_config(cm_daemon::DaemonConfig {
        max_messages_per_sec: 100_000_000,
        ..Default::default()
    });
    let tid = daemon_tid();
    let stop = Arc::new(AtomicBool::new(false));
    let blaster = {
        let (path, stop) = (d.path.clone(), stop.clone());
        std::thread::spawn(move || {
            pin_me(a);
            let mut cm = TestDaemon::client_at(&path, libcm::Transport::SharedMemory);
            let flow = cm.open(None, "127.0.0.1:9".parse().unwrap()).unwrap();
            let mut calls = 0u64;
            while !stop.load(Ordering::Relaxed) {
                // One frame per call (autoflush), never an answer to wait for.
                cm.update(flow, Feedback::acked(1, cm_core::Duration::from_micros(50)))
                    .unwrap();
                calls += 1;
            }
            cm.close(flow).unwrap();
            calls
        })
    };
    pin_me(b);
    let mut rounds = 0u64;
    let moved = busy_until(&d, None, Duration::from_secs(5), || {
        rounds += 1;
        daemon_cpus(tid) == [b]
    });
    stop.store(true, Ordering::Relaxed);
    let blasted = blaster.join().unwrap();
    // The polling client sends at most three frames a round.
    assert!(
        blasted > 3 * rounds,
        "the client that never waits was the busier ({blasted} frames against {})",
        3 * rounds
    );
    assert!(
        moved,
        "daemon on {:?}, polling client on {b}, a busier one on {a} that never waits",
        daemon_cpus(tid)
    );
    sched_setaffinity(None, &mask).unwrap();
}
