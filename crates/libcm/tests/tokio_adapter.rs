//! The tokio adapter (cm-implementation-linux §3.1, an async event loop):
//! grants are awaited, not polled, embedded and against the daemon over
//! either transport. Needs `--features tokio` (scripts/test.sh runs it).
#![cfg(feature = "tokio")]
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration as StdDuration;

use libcm::tokio_adapter::AsyncCm;
use libcm::{CmEvent, Duration, Feedback};

/// Ten rounds of request → awaited grant → notify → update, each grant
/// awaited on the runtime while a timer task runs beside it (the runtime
/// is not blocked), all within a time limit.
fn rounds(h: &common::Harness) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut cm = AsyncCm::new(h.cm()).unwrap();
        let flow = cm
            .get_mut()
            .open(None, "127.0.0.1:9".parse().unwrap())
            .unwrap();
        let ticks = tokio::spawn(async {
            let mut n = 0u32;
            for _ in 0..5 {
                tokio::time::sleep(StdDuration::from_millis(1)).await;
                n += 1;
            }
            n
        });
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
        assert_eq!(ticks.await.unwrap(), 5, "the runtime kept running");
    });
}

both_modes!(ten_awaited_grants, rounds);
