//! Spin-then-block waiting (cm-ipc "Waiting: spin, then block"): no
//! combination of daemon and client spin loses a wake-up, and an idle
//! daemon blocks (uses no CPU) once its clients are quiet or gone.

#![allow(clippy::unwrap_used)]

mod common;

use std::time::{Duration, Instant};

use common::TestDaemon;
use libcm::{CmEvent, Feedback};

fn dst() -> std::net::SocketAddr {
    "127.0.0.1:9".parse().unwrap()
}

/// A client blocked waiting for a grant gets it, whichever side spins:
/// the daemon blocking or polling, the client spinning or not, and the
/// client's spin too short to see the answer (so it must fall back to
/// sleeping on the socket and be woken).
#[test]
fn a_blocked_client_always_gets_its_grant() {
    for (daemon_us, client_us) in [(0, 0), (0, 1), (0, 50), (50, 0), (50, 1), (50, 50)] {
        let d = TestDaemon::with_config(cm_daemon::DaemonConfig {
            spin_us: daemon_us,
            ..Default::default()
        });
        let mut cm = d.client();
        cm.set_spin(Duration::from_micros(client_us));
        let flow = cm.open(None, dst()).unwrap();
        for i in 0..300u32 {
            cm.request(flow).unwrap();
            if i % 3 == 0 {
                // Let the daemon go back to blocking before the next one.
                std::thread::sleep(Duration::from_micros(200));
            }
            let t0 = Instant::now();
            let bytes = loop {
                match cm.poll_event().unwrap() {
                    Some(CmEvent::Send { bytes, .. }) => break bytes,
                    Some(_) => {}
                    None => {
                        assert!(
                            t0.elapsed() < Duration::from_secs(5),
                            "grant {i} lost (daemon spin {daemon_us} us, client spin {client_us} us)"
                        );
                        cm.wait(Some(Duration::from_secs(1))).unwrap();
                    }
                }
            };
            cm.notify(flow, bytes.get()).unwrap();
            cm.update(
                flow,
                Feedback::acked(bytes.get(), cm_core::Duration::from_micros(100)),
            )
            .unwrap();
        }
    }
}

/// `next_timeout` after a request spins for the grant and then reports it
/// ready (zero); with nothing expected it returns at once.
#[test]
fn next_timeout_waits_briefly_for_an_expected_grant() {
    let d = TestDaemon::start();
    let mut cm = d.client();
    cm.set_autoflush(false);
    cm.set_spin(Duration::from_millis(500));
    let flow = cm.open(None, dst()).unwrap();
    cm.request(flow).unwrap();
    assert_eq!(
        cm.next_timeout(),
        Some(Duration::ZERO),
        "the grant came during the spin"
    );
    assert!(matches!(
        cm.poll_event().unwrap(),
        Some(CmEvent::Send { .. })
    ));
    // Nothing expected now: no spin, the application may sleep.
    let t0 = Instant::now();
    assert_eq!(cm.next_timeout(), None);
    assert!(t0.elapsed() < Duration::from_millis(100));
}

/// After a burst of work (which makes it spin) and its client gone, the
/// daemon blocks: over a second it uses (almost) no CPU.
#[test]
fn an_idle_daemon_uses_no_cpu() {
    let d = TestDaemon::start();
    {
        let mut cm = d.client();
        let flow = cm.open(None, dst()).unwrap();
        for _ in 0..2000 {
            cm.request(flow).unwrap();
            while let Some(ev) = cm.poll_event().unwrap() {
                if let CmEvent::Send { bytes, .. } = ev {
                    cm.notify(flow, bytes.get()).unwrap();
                    cm.update(
                        flow,
                        Feedback::acked(bytes.get(), cm_core::Duration::from_micros(50)),
                    )
                    .unwrap();
                }
            }
        }
        // One packet left "in flight" (notified, never acknowledged) as
        // the client goes: nothing may keep the daemon busy afterwards.
        cm.request(flow).unwrap();
        if let CmEvent::Send { bytes, .. } = common::next_event(&mut cm) {
            cm.notify(flow, bytes.get()).unwrap();
        }
    }
    // A connected but quiet client too.
    let _quiet = d.client();
    std::thread::sleep(Duration::from_millis(300));
    let name = cm_daemon::TempDaemon::THREAD_NAME;
    let before = cm_clock::named_thread_cpu(name).expect("the daemon thread");
    std::thread::sleep(Duration::from_secs(1));
    let used = cm_clock::named_thread_cpu(name).expect("the daemon thread") - before;
    assert!(
        used <= Duration::from_millis(50),
        "an idle daemon used {used:?} of CPU in 1 s"
    );
}
