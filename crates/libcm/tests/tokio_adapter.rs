//! The tokio adapter (cm-implementation-linux §3.1, an async event loop):
//! grants are awaited, not polled, embedded and against the daemon over
//! either transport. Needs `--features tokio` (scripts/test.sh runs it).
#![cfg(feature = "tokio")]
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration as StdDuration;

use libcm::tokio_adapter::AsyncCm;
use libcm::{Cm, CmEvent, Config, Duration, Feedback};

/// Ten rounds of request → awaited grant → notify → update; then, with
/// nothing requested, waiting for an event must yield to the runtime: on a
/// single-threaded runtime a ticker task keeps running while a 50 ms
/// timeout around `next_event` elapses. A `next_event` that blocked the
/// thread would stall both, so the runtime runs on a thread of its own
/// and the test fails (rather than hangs) if it does not finish in 10 s.
fn rounds(h: &common::Harness) {
    // A `Cm` is not `Send`: the runtime's thread makes its own.
    let daemon = h.daemon.as_ref().map(|d| (d.path.clone(), h.transport));
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let cm = match daemon {
            Some((path, t)) => common::TestDaemon::client_at(&path, t),
            None => Cm::embedded(Config::default()).unwrap(),
        };
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let ticks = rt.block_on(run(cm));
        let _ = tx.send(ticks);
    });
    let ticks = rx
        .recv_timeout(StdDuration::from_secs(10))
        .expect("the runtime finished (next_event did not block it)");
    assert!(
        ticks >= 5,
        "only {ticks} ticks of 1 ms ran while next_event waited 50 ms"
    );
}

async fn run(cm: Cm) -> u32 {
    let mut cm = AsyncCm::new(cm).unwrap();
    let flow = cm
        .get_mut()
        .open(None, "127.0.0.1:9".parse().unwrap())
        .unwrap();
    for _ in 0..10 {
        cm.get_mut().request(flow).unwrap();
        let ev = tokio::time::timeout(StdDuration::from_secs(2), cm.next_event())
            .await
            .expect("a grant within 2 s")
            .unwrap();
        let CmEvent::Send { flow: f, bytes } = ev else {
            panic!("expected a grant, got {ev:?}");
        };
        assert_eq!(f, flow);
        cm.get_mut().notify(flow, bytes.get()).unwrap();
        cm.get_mut()
            .update(flow, Feedback::acked(bytes.get(), Duration::from_millis(5)))
            .unwrap();
    }
    let ticks = Arc::new(AtomicU32::new(0));
    let t2 = ticks.clone();
    let ticker = tokio::spawn(async move {
        loop {
            tokio::time::sleep(StdDuration::from_millis(1)).await;
            t2.fetch_add(1, Ordering::Relaxed);
        }
    });
    let idle = tokio::time::timeout(StdDuration::from_millis(50), cm.next_event()).await;
    assert!(idle.is_err(), "no event was asked for, got {idle:?}");
    ticker.abort();
    ticks.load(Ordering::Relaxed)
}

both_modes!(ten_awaited_grants, rounds);
