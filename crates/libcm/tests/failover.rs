//! A daemon-mode handle whose daemon stops (the daemon thread of
//! `TestDaemon` ends and closes every connection): the handle moves to an
//! embedded CM, keeps granting, reports the move once, and an application
//! that only dispatches (callbacks, `next_timeout`) does not spin on it.
//! (`crates/cm-ffi/tests/failover.rs` kills a `cmd` process and restarts
//! it under running Rust and C clients.)

#![allow(clippy::unwrap_used)]

mod common;

use std::cell::Cell;
use std::rc::Rc;
use std::time::{Duration, Instant};

use common::TestDaemon;
use libcm::{CmEvent, Status};

#[test]
fn a_dispatch_only_application_carries_on_without_spinning() {
    let daemon = TestDaemon::start();
    let mut cm = daemon.client();
    let f = cm.open(None, "192.0.2.50:9".parse().unwrap()).unwrap();
    let grants = Rc::new(Cell::new(0u32));
    let g = grants.clone();
    cm.register_send(move |cm, flow, bytes| {
        g.set(g.get() + 1);
        cm.notify(flow, bytes.get()).unwrap();
    });
    cm.request(f).unwrap();
    let end = Instant::now() + Duration::from_secs(5);
    while grants.get() == 0 {
        assert!(Instant::now() < end, "no grant from the daemon");
        cm.wait(Some(Duration::from_millis(10))).unwrap();
        cm.dispatch().unwrap();
    }
    assert_eq!(cm.status(), Status::Daemon);
    drop(daemon);
    // The next calls notice and move; the request is served there.
    cm.request(f).unwrap();
    let before = grants.get();
    let end = Instant::now() + Duration::from_secs(5);
    while grants.get() == before {
        assert!(Instant::now() < end, "no grant after the daemon went");
        cm.wait(Some(Duration::from_millis(10))).unwrap();
        cm.dispatch().unwrap();
    }
    assert_eq!(cm.status(), Status::Fallback);
    // Nothing is left to do: the loop may sleep (the next reconnection
    // attempt, at most 1 s away, is the only deadline).
    cm.dispatch().unwrap();
    let t = cm.next_timeout();
    assert!(
        t.is_some_and(|t| t > Duration::ZERO && t <= Duration::from_secs(1)),
        "next_timeout {t:?}"
    );
    assert!(
        cm.poll_event()
            .unwrap()
            .is_none_or(|e| !matches!(e, CmEvent::Status { .. }))
    );
}

#[test]
fn poll_event_sees_the_move_and_failover_can_be_refused() {
    let daemon = TestDaemon::start();
    let mut a = daemon.client();
    let mut b = daemon.client();
    b.set_failover(false);
    let fa = a.open(None, "192.0.2.51:9".parse().unwrap()).unwrap();
    let fb = b.open(None, "192.0.2.51:9".parse().unwrap()).unwrap();
    drop(daemon);
    std::thread::sleep(Duration::from_millis(50));
    a.request(fa).unwrap();
    let moved = (0..100).find_map(|_| match a.poll_event().unwrap() {
        Some(CmEvent::Status { status }) => Some(status),
        _ => {
            std::thread::sleep(Duration::from_millis(5));
            None
        }
    });
    assert_eq!(moved, Some(Status::Fallback));
    // The other keeps the error, as before failover existed (a call that
    // reads the connection sees the hang-up; a request over the shared
    // ring is only published).
    let err = b.query(fb).err();
    assert!(matches!(err, Some(libcm::CmError::Disconnected)), "{err:?}");
    assert_eq!(b.status(), Status::Daemon);
}
