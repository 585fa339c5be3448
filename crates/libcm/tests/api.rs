//! Every libcm call, in embedded mode and against the daemon, with the same
//! assertions (issue 4: "every API call is covered by tests in both modes").

#![allow(clippy::unwrap_used)]

mod common;

use std::cell::RefCell;
use std::net::{SocketAddr, UdpSocket};
use std::rc::Rc;
use std::time::Duration as StdDuration;

use common::next_event;
use libcm::{CmError, CmEvent, Duration, Feedback, FlowId, LossMode, Thresholds};

fn dst(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

both_modes!(open_request_notify_update_query, |h: &common::Harness| {
    let mut cm = h.cm();
    let f = cm.open(None, dst(9)).unwrap();
    let mtu = cm.mtu(f).unwrap();
    assert_eq!(mtu, 1460);
    // No estimate before feedback: every field is None, not zero.
    let e = cm.query(f).unwrap();
    assert_eq!((e.srtt, e.rttvar, e.loss), (None, None, None));
    cm.request(f).unwrap();
    match next_event(&mut cm) {
        CmEvent::Send { flow, bytes } => {
            assert_eq!(flow, f);
            assert_eq!(bytes.get(), u64::from(mtu));
        }
        other => panic!("expected a grant, got {other:?}"),
    }
    cm.notify(f, 1000).unwrap();
    cm.update(f, Feedback::acked(1000, Duration::from_millis(25)))
        .unwrap();
    let e = cm.query(f).unwrap();
    assert_eq!(e.srtt, Some(Duration::from_millis(25)));
    assert!(e.rate.is_some_and(|r| r.bytes_per_sec() > 0));
    assert_eq!(e.loss, Some(0.0));
    cm.close(f).unwrap();
});

both_modes!(k_mtu_request, |h: &common::Harness| {
    let mut cm = h.cm();
    let f = cm.open(None, dst(9)).unwrap();
    cm.request_mtus(f, 4).unwrap();
    let CmEvent::Send { bytes, .. } = next_event(&mut cm) else {
        panic!("expected a grant");
    };
    assert!(bytes.get() >= 1460 && bytes.get() <= 4 * 1460, "{bytes}");
    assert!(matches!(cm.request_mtus(f, 0), Err(CmError::Invalid(_))));
});

both_modes!(errors_on_unknown_and_bad_input, |h: &common::Harness| {
    let mut cm = h.cm();
    let bogus = FlowId::from_u64(0xdead_beef);
    assert!(cm.query(bogus).is_err());
    assert!(cm.mtu(bogus).is_err());
    assert!(cm.macroflow_of(bogus).is_err());
    let f = cm.open(None, dst(9)).unwrap();
    // nrecd > nsent is refused before it reaches any CM.
    assert!(
        cm.update(f, Feedback::lossy(10, 20, LossMode::None))
            .is_err()
    );
    let bad = Thresholds {
        rate_down: 0.5,
        ..Thresholds::default()
    };
    assert!(cm.thresh(f, bad).is_err());
    // Fire-and-forget calls on a closed flow: an error now (embedded) or an
    // error event (daemon), never silence.
    cm.close(f).unwrap();
    match cm.request(f) {
        Err(_) => {}
        Ok(()) => match next_event(&mut cm) {
            CmEvent::Error { flow, code } => {
                assert_eq!(flow, f);
                assert_eq!(code, libcm::ErrorCode::UnknownFlow);
            }
            other => panic!("expected an error event, got {other:?}"),
        },
    }
});

both_modes!(rate_callbacks_and_thresholds, |h: &common::Harness| {
    let mut cm = h.cm();
    let f = cm.open(None, dst(9)).unwrap();
    let seen = Rc::new(RefCell::new(Vec::new()));
    let s2 = seen.clone();
    cm.register_update(move |_cm, flow, est| s2.borrow_mut().push((flow, est)));
    cm.thresh(
        f,
        Thresholds {
            rate_down: 1.1,
            rate_up: 1.1,
            rtt_down: 1.1,
            rtt_up: 1.1,
        },
    )
    .unwrap();
    // Feedback creates an estimate: the first report follows.
    cm.request(f).unwrap();
    let CmEvent::Send { bytes, .. } = next_event(&mut cm) else {
        panic!("grant");
    };
    cm.notify(f, bytes.get()).unwrap();
    cm.update(f, Feedback::acked(bytes.get(), Duration::from_millis(10)))
        .unwrap();
    let deadline = std::time::Instant::now() + StdDuration::from_secs(2);
    while seen.borrow().is_empty() && std::time::Instant::now() < deadline {
        cm.dispatch().unwrap();
        cm.wait(Some(StdDuration::from_millis(10))).unwrap();
    }
    let first = seen.borrow()[0];
    assert_eq!(first.0, f);
    assert_eq!(first.1.srtt, Some(Duration::from_millis(10)));
    // A much larger RTT crosses rtt_up: another report.
    cm.request(f).unwrap();
    let CmEvent::Send { bytes, .. } = next_event(&mut cm) else {
        panic!("grant");
    };
    cm.notify(f, bytes.get()).unwrap();
    cm.update(f, Feedback::acked(bytes.get(), Duration::from_millis(200)))
        .unwrap();
    let deadline = std::time::Instant::now() + StdDuration::from_secs(2);
    while seen.borrow().len() < 2 && std::time::Instant::now() < deadline {
        cm.dispatch().unwrap();
        cm.wait(Some(StdDuration::from_millis(10))).unwrap();
    }
    assert!(seen.borrow().len() >= 2, "no report after the RTT jump");
    // Off: no more reports.
    cm.set_rate_updates(f, false).unwrap();
});

both_modes!(send_callbacks_and_own_loop, |h: &common::Harness| {
    let mut cm = h.cm();
    let f = cm.open(None, dst(9)).unwrap();
    let sent = Rc::new(RefCell::new(0u64));
    let s2 = sent.clone();
    // cmapp_send: "send" one MTU, notify, ack it at once, ask for more.
    cm.register_send(move |cm, flow, bytes| {
        *s2.borrow_mut() += bytes.get();
        cm.notify(flow, bytes.get()).unwrap();
        cm.update(flow, Feedback::acked(bytes.get(), Duration::from_millis(1)))
            .unwrap();
        if *s2.borrow() < 100 * 1460 {
            cm.request(flow).unwrap();
        }
    });
    for _ in 0..4 {
        cm.request(f).unwrap();
    }
    let deadline = std::time::Instant::now() + StdDuration::from_secs(5);
    cm.run_until(|_| *sent.borrow() >= 100 * 1460 || std::time::Instant::now() > deadline)
        .unwrap();
    assert!(*sent.borrow() >= 100 * 1460, "sent {}", sent.borrow());
});

both_modes!(macroflows, |h: &common::Harness| {
    let mut cm = h.cm();
    let a = cm.open(None, dst(1000)).unwrap();
    let b = cm.open(None, dst(2000)).unwrap();
    let c = cm
        .open(None, SocketAddr::from(([127, 0, 0, 2], 1000)))
        .unwrap();
    let ma = cm.macroflow_of(a).unwrap();
    // Same host, other port: same macroflow (cm-implementation-linux §2).
    assert_eq!(cm.macroflow_of(b).unwrap(), ma);
    assert_ne!(cm.macroflow_of(c).unwrap(), ma);
    // Split b off, then put it back.
    let own = cm.set_macroflow(b, None).unwrap();
    assert_ne!(own, ma);
    assert_eq!(cm.macroflow_of(b).unwrap(), own);
    assert_eq!(cm.set_macroflow(b, Some(ma)).unwrap(), ma);
    assert_eq!(cm.macroflow_of(b).unwrap(), ma);
    assert!(
        cm.set_macroflow(b, Some(libcm::MacroflowId::from_u64(0xffff_0000_1234)))
            .is_err()
    );
    cm.set_weight(a, 3).unwrap();
    let s = cm.stat().unwrap();
    assert!(s.flows.len() >= 3);
    assert!(
        s.macroflows
            .iter()
            .any(|m| m.id == ma.to_u64() && m.flows == 2)
    );
    let q = cm.query_host("127.0.0.2".parse().unwrap()).unwrap();
    assert_eq!(q.len(), 1);
});

both_modes!(bulk_calls, |h: &common::Harness| {
    let mut cm = h.cm();
    let flows: Vec<FlowId> = (0..4)
        .map(|i| cm.open(None, dst(3000 + i)).unwrap())
        .collect();
    cm.bulk_request(&flows.iter().map(|&f| (f, 1)).collect::<Vec<_>>())
        .unwrap();
    let mut granted = Vec::new();
    while granted.len() < 4 {
        if let CmEvent::Send { flow, bytes } = next_event(&mut cm) {
            granted.push((flow, bytes.get()));
        }
    }
    granted.sort();
    let mut expect = flows.clone();
    expect.sort();
    assert_eq!(granted.iter().map(|g| g.0).collect::<Vec<_>>(), expect);
    cm.bulk_notify(&granted).unwrap();
    let fbs: Vec<_> = granted
        .iter()
        .map(|&(f, n)| (f, Feedback::acked(n, Duration::from_millis(30))))
        .collect();
    cm.bulk_update(&fbs).unwrap();
    let est = cm.bulk_query(&flows).unwrap();
    assert_eq!(est.len(), 4);
    assert!(
        est.iter()
            .all(|e| e.srtt == Some(Duration::from_millis(30)))
    );
    // One estimate is shared: the four flows are one macroflow, so each
    // gets a quarter of the rate.
    let total = est[0].rate.unwrap().bytes_per_sec();
    assert!(est.iter().all(|e| e.rate.unwrap().bytes_per_sec() == total));
});

both_modes!(buffered_send_delivers_everything, |h: &common::Harness| {
    let mut cm = h.cm();
    let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
    rx.set_read_timeout(Some(StdDuration::from_millis(200)))
        .unwrap();
    let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
    let f = cm.open_buffered(tx, rx.local_addr().unwrap()).unwrap();
    assert!(matches!(
        cm.send(f, &vec![0u8; 5000]),
        Err(CmError::Invalid(_))
    ));
    let n = 200usize;
    let mut queued = 0;
    let mut got = 0;
    let mut buf = [0u8; 2048];
    let deadline = std::time::Instant::now() + StdDuration::from_secs(10);
    while got < n && std::time::Instant::now() < deadline {
        while queued < n {
            match cm.send(f, &(queued as u32).to_le_bytes().repeat(250)) {
                Ok(()) => queued += 1,
                Err(CmError::QueueFull(_)) => break,
                Err(e) => panic!("{e}"),
            }
        }
        cm.dispatch().unwrap();
        rx.set_nonblocking(true).unwrap();
        // Ack what arrived (application-level acknowledgements, §3.3).
        while let Ok(len) = rx.recv(&mut buf) {
            got += 1;
            cm.update(f, Feedback::acked(len as u64, Duration::from_millis(1)))
                .unwrap();
        }
        cm.wait(Some(StdDuration::from_millis(5))).unwrap();
    }
    assert_eq!(got, n, "every queued datagram is sent, paced by the CM");
    assert_eq!(cm.backlog(f).unwrap(), 0);
    assert_eq!(cm.buffered_sent(f).unwrap(), n as u64);
    let plain = cm.open(None, dst(9)).unwrap();
    assert!(matches!(cm.send(plain, b"x"), Err(CmError::NotBuffered(_))));
});

both_modes!(buffered_batch_delivers_in_order, |h: &common::Harness| {
    let mut cm = h.cm();
    let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
    let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
    let f = cm.open_buffered(tx, rx.local_addr().unwrap()).unwrap();
    // An oversized datagram anywhere refuses the whole batch.
    let big = vec![0u8; 5000];
    let small = [1u8; 10];
    assert!(matches!(
        cm.send_batch(f, &[&small, &big]),
        Err(CmError::Invalid(_))
    ));
    assert_eq!(cm.backlog(f).unwrap(), 0, "nothing queued");
    // A queue of 10 datagrams' room takes the first 10 of 30.
    cm.set_queue_limit(f, 10 * 1000).unwrap();
    let data: Vec<Vec<u8>> = (0..30u8).map(|i| vec![i; 1000]).collect();
    let refs: Vec<&[u8]> = data.iter().map(Vec::as_slice).collect();
    let mut queued = 0;
    let mut got = Vec::new();
    let mut buf = [0u8; 2048];
    rx.set_nonblocking(true).unwrap();
    let deadline = std::time::Instant::now() + StdDuration::from_secs(10);
    while got.len() < 30 && std::time::Instant::now() < deadline {
        if queued < 30 {
            match cm.send_batch(f, &refs[queued..]) {
                Ok(k) => {
                    assert!(k <= 10, "at most the queue's room: {k}");
                    queued += k;
                }
                Err(CmError::QueueFull(_)) => {}
                Err(e) => panic!("{e}"),
            }
        }
        cm.dispatch().unwrap();
        while let Ok(len) = rx.recv(&mut buf) {
            got.push(buf[0]);
            cm.update(f, Feedback::acked(len as u64, Duration::from_millis(1)))
                .unwrap();
        }
        cm.wait(Some(StdDuration::from_millis(5))).unwrap();
    }
    assert_eq!(got, (0..30u8).collect::<Vec<_>>(), "all, in order");
    assert_eq!(cm.buffered_sent(f).unwrap(), 30);
});

both_modes!(pollable_descriptor, |h: &common::Harness| {
    use rustix::event::{PollFd, PollFlags, poll};
    let mut cm = h.cm();
    let f = cm.open(None, dst(9)).unwrap();
    cm.request(f).unwrap();
    let ready = {
        let fd = cm.pollable_fd().unwrap();
        let mut fds = [PollFd::new(&fd, PollFlags::IN)];
        let ts = rustix::event::Timespec {
            tv_sec: 2,
            tv_nsec: 0,
        };
        poll(&mut fds, Some(&ts)).unwrap()
    };
    assert_eq!(ready, 1, "the descriptor becomes readable for the grant");
    let got = Rc::new(RefCell::new(0));
    let g2 = got.clone();
    cm.register_send(move |cm, flow, _| {
        *g2.borrow_mut() += 1;
        cm.notify(flow, 0).unwrap();
    });
    assert_eq!(cm.dispatch().unwrap(), 1);
    assert_eq!(*got.borrow(), 1);
});

// An application that takes the descriptor once and keeps it in its poll
// set (as the C examples and most event loops do) must see it readable when
// something waits and quiet once it dispatched, without asking libcm again
// before each sleep: a descriptor that stays readable makes its loop spin.
both_modes!(
    a_kept_descriptor_goes_quiet_after_dispatch,
    |h: &common::Harness| {
        use rustix::event::{PollFd, PollFlags, Timespec, poll};
        let mut cm = h.cm();
        let f = cm.open(None, dst(9)).unwrap();
        let fd = cm.pollable_fd().unwrap().try_clone_to_owned().unwrap();
        let readable = |ms: i64| {
            let mut fds = [PollFd::new(&fd, PollFlags::IN)];
            let ts = Timespec {
                tv_sec: ms / 1000,
                tv_nsec: (ms % 1000) * 1_000_000,
            };
            poll(&mut fds, Some(&ts)).unwrap() == 1
        };
        let grants = Rc::new(RefCell::new(0));
        let g2 = grants.clone();
        cm.register_send(move |cm, flow, _| {
            *g2.borrow_mut() += 1;
            cm.notify(flow, 0).unwrap();
        });
        // Settle anything the setup left (a ring of its own, the open reply).
        while readable(20) {
            cm.dispatch().unwrap();
        }
        for round in 1..=5 {
            cm.request(f).unwrap();
            assert!(readable(2000), "round {round}: readable for the grant");
            while *grants.borrow() < round {
                cm.dispatch().unwrap();
                if *grants.borrow() < round {
                    assert!(
                        readable(2000),
                        "round {round}: readable until the grant is in"
                    );
                }
            }
            // A doorbell ring still on its way when the grant was taken may
            // wake the loop once more; then it must be quiet.
            let mut spurious = 0;
            while readable(100) {
                assert_eq!(cm.dispatch().unwrap(), 0, "round {round}: nothing new");
                spurious += 1;
                assert!(
                    spurious <= 1,
                    "round {round}: the descriptor stays readable"
                );
            }
        }
        // A call that waits for a reply can read a grant off the daemon's ring
        // on the way (here in the same answer): the kept descriptor must say
        // so. Over the bare control socket the frame is read and nothing is
        // left to make it readable: that transport needs `pollable_fd` (or
        // `next_timeout`) before each sleep, as documented.
        if h.daemon.is_some() && h.transport == libcm::Transport::Socket {
            return;
        }
        // Without a spin the wait for the reply sleeps until the daemon's ring,
        // and reads that ring with the answer: nothing else is left to make
        // the descriptor readable for the grant read on the way.
        // The grant is given time to arrive (and its ring to land) first, so
        // that the wait reads both.
        cm.set_spin(StdDuration::ZERO);
        cm.request(f).unwrap();
        std::thread::sleep(StdDuration::from_millis(50));
        cm.query(f).unwrap();
        // At once: left alone, the grant expires 200 ms after it was given
        // (`grant_timeout`) and the daemon's GrantExpired would make the
        // descriptor readable anyway.
        assert!(
            readable(50),
            "readable for a grant read while waiting for a reply"
        );
        cm.dispatch().unwrap();
        assert_eq!(*grants.borrow(), 6);
    }
);

// One grant may answer several queued one-MTU requests (the core merges
// pending requests): bursts of sub-MTU datagrams must still all leave.
both_modes!(
    buffered_bursts_drain_with_merged_grants,
    |h: &common::Harness| {
        let mut cm = h.cm();
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        rx.set_nonblocking(true).unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let f = cm.open_buffered(tx, rx.local_addr().unwrap()).unwrap();
        let total = 200;
        let mut queued = 0;
        let mut got = 0;
        let mut buf = vec![0u8; 2048];
        let deadline = std::time::Instant::now() + StdDuration::from_secs(5);
        while got < total && std::time::Instant::now() < deadline {
            // Datagrams smaller than the MTU, queued in bursts.
            while queued < total && cm.send(f, &[7u8; 1200]).is_ok() {
                queued += 1;
            }
            cm.dispatch().unwrap();
            while let Ok(n) = rx.recv(&mut buf) {
                got += 1;
                cm.update(f, Feedback::acked(n as u64, Duration::from_millis(1)))
                    .unwrap();
            }
            cm.wait(Some(StdDuration::from_millis(2))).unwrap();
        }
        assert_eq!(got, total);
        assert_eq!(cm.backlog(f).unwrap(), 0);
    }
);

both_modes!(
    poll_event_for_leaves_other_flows_events_queued,
    |h: &common::Harness| {
        let mut cm = h.cm();
        let a = cm.open(None, dst(9)).unwrap();
        let b = cm.open(None, dst(10)).unwrap();
        cm.request(a).unwrap();
        cm.request(b).unwrap();
        let deadline = std::time::Instant::now() + StdDuration::from_secs(2);
        // b's grant, taken first although a asked first.
        let ev = loop {
            if let Some(ev) = cm.poll_event_for(b).unwrap() {
                break ev;
            }
            assert!(std::time::Instant::now() < deadline, "no grant for b");
            cm.wait(Some(StdDuration::from_millis(20))).unwrap();
        };
        assert!(
            matches!(ev, CmEvent::Send { flow, .. } if flow == b),
            "{ev:?}"
        );
        assert_eq!(ev.flow(), Some(b));
        // a's grant is still there for a, and nothing more for b.
        assert_eq!(cm.poll_event_for(b).unwrap(), None);
        let ev = loop {
            if let Some(ev) = cm.poll_event_for(a).unwrap() {
                break ev;
            }
            assert!(std::time::Instant::now() < deadline, "no grant for a");
            cm.wait(Some(StdDuration::from_millis(20))).unwrap();
        };
        assert!(
            matches!(ev, CmEvent::Send { flow, .. } if flow == a),
            "{ev:?}"
        );
        cm.notify(a, 0).unwrap();
        cm.notify(b, 0).unwrap();
    }
);
