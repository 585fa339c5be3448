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

/// A client that waits for a reply while events it has not dispatched yet
/// sit in its inbox sleeps until the reply (or its timeout) comes; it used
/// to poll in a loop for the whole wait, and a thousand such clients took
/// the CPUs from the daemon that was to answer them. The daemon here is a
/// hand-made one over shared memory: it welcomes, attaches, opens flow 1,
/// sends an unasked-for grant, and never answers the query.
#[test]
fn a_reply_wait_with_events_pending_sleeps() {
    use std::os::fd::AsFd;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    use cm_ipc::shm::{DEFAULT_RING_BYTES, Doorbell, Region, send_with_fds};
    use cm_ipc::{Frame, ToClient, ToDaemon, decode_frame};
    use rustix::net::*;

    let dir = std::env::temp_dir().join(format!("cm-spin-fake-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let path = dir.join("fake.sock");
    let _ = std::fs::remove_file(&path);
    let listener = socket_with(
        AddressFamily::UNIX,
        SocketType::SEQPACKET,
        SocketFlags::CLOEXEC,
        None,
    )
    .unwrap();
    bind(&listener, &SocketAddrUnix::new(&path).unwrap()).unwrap();
    listen(&listener, 4).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = Arc::clone(&stop);
    let fake = std::thread::spawn(move || {
        let conn = accept(&listener).unwrap();
        let mut buf = vec![0u8; cm_ipc::MAX_FRAME];
        let (n, _) = recv(&conn, &mut buf, RecvFlags::empty()).unwrap();
        let hello: Vec<ToDaemon> = decode_frame(&buf[..n]).unwrap();
        let attach = hello.iter().find_map(|m| match m {
            ToDaemon::Attach { seq } => Some(*seq),
            _ => None,
        });
        let mut f = Frame::new();
        f.push(&ToClient::Welcome {
            version: cm_ipc::VERSION,
            client: 1,
            uid: 0,
            mtu: 1500,
        });
        send(&conn, &f.finish(), SendFlags::empty()).unwrap();
        let mut region = Region::create(DEFAULT_RING_BYTES).unwrap();
        let (bell_in, bell_out) = (Doorbell::new().unwrap(), Doorbell::new().unwrap());
        let mut f = Frame::new();
        f.push(&ToClient::Attached {
            seq: attach.expect("the client attaches"),
            ring_bytes: region.ring_bytes(),
        });
        let fds = [region.fd(), bell_in.as_fd(), bell_out.as_fd()];
        send_with_fds(conn.as_fd(), &f.finish(), &fds).unwrap();
        let mut frame = Vec::new();
        while !stop2.load(Ordering::Relaxed) {
            if !region.pop(&mut frame).unwrap() {
                std::thread::sleep(Duration::from_millis(1));
                continue;
            }
            let calls: Vec<ToDaemon> = decode_frame(&frame).unwrap();
            let mut out = Frame::new();
            for m in calls {
                if let ToDaemon::Open { seq, .. } = m {
                    out.push(&ToClient::Opened { seq, flow: 1 });
                    out.push(&ToClient::Grant {
                        flow: 1,
                        bytes: 1448,
                    });
                }
            }
            if !out.is_empty() {
                assert!(region.push(&out.finish()).unwrap());
                if region.take_peer_wake() {
                    bell_out.ring().unwrap();
                }
            }
        }
        drop(conn);
    });

    let mut cm = libcm::Cm::connect_with(&path, libcm::Transport::SharedMemory).unwrap();
    cm.set_failover(false);
    let flow = cm.open(None, dst()).unwrap();
    cm.set_reply_timeout(Duration::from_millis(300)).unwrap();
    let thread_cpu = || {
        let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
        t.tv_sec as f64 + t.tv_nsec as f64 / 1e9
    };
    let (t0, c0) = (Instant::now(), thread_cpu());
    let r = cm.query(flow);
    let (waited, used) = (t0.elapsed(), thread_cpu() - c0);
    eprintln!("waited {waited:?} using {used:.4} s of CPU");
    assert!(matches!(r, Err(libcm::CmError::Timeout(_))), "{r:?}");
    assert!(waited >= Duration::from_millis(300), "{waited:?}");
    assert!(
        used < 0.05,
        "the wait used {used:.3} s of CPU in {waited:?}"
    );
    // The grant is still there for the application.
    assert!(matches!(
        cm.poll_event().unwrap(),
        Some(CmEvent::Send { .. })
    ));
    stop.store(true, Ordering::Relaxed);
    fake.join().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}
