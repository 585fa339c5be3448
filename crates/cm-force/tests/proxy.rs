//! `cm proxy` on loopback: datagrams go through the congestion-controlled
//! channel and arrive, the MAXQ queue drops under overload instead of
//! growing, replies come back, and neither end minds garbage or a peer
//! that vanishes.
#![allow(clippy::unwrap_used)]

use std::cell::RefCell;
use std::net::{SocketAddr, UdpSocket};
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use cm_force::proxy::{Egress, EgressConfig, EgressReport, Ingress, IngressConfig};
use cm_transport::maxq::Overflow;

fn cm() -> libcm::ccudp::SharedCm {
    Rc::new(RefCell::new(
        libcm::Cm::embedded(libcm::Config::default()).unwrap(),
    ))
}

fn ingress_cfg(egress: SocketAddr) -> IngressConfig {
    IngressConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        egress,
        maxq: 1,
        overflow: Overflow::DropHead,
        controller: Some("tfrc".parse().unwrap()),
    }
}

/// An egress on its own thread (a `Cm` is not `Send`), until `stop`.
fn spawn_egress(
    deliver: SocketAddr,
    stop: Arc<AtomicBool>,
) -> (SocketAddr, std::thread::JoinHandle<EgressReport>) {
    let (tx, rx) = std::sync::mpsc::channel();
    let h = std::thread::spawn(move || {
        let cm = cm();
        let cfg = EgressConfig {
            listen: "127.0.0.1:0".parse().unwrap(),
            deliver,
        };
        let mut e = Egress::bind(&cm, &cfg).unwrap();
        tx.send(e.local_addr().unwrap()).unwrap();
        e.run(&stop, Some(Instant::now() + Duration::from_secs(30)))
            .unwrap();
        e.report()
    });
    (rx.recv().unwrap(), h)
}

fn drive(i: &mut Ingress, d: Duration) {
    let until = Instant::now() + d;
    i.run(&AtomicBool::new(false), Some(until)).unwrap();
}

#[test]
fn datagrams_cross_the_channel_and_overload_drops_at_the_proxy() {
    let dest = UdpSocket::bind("127.0.0.1:0").unwrap();
    dest.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let (egress, eh) = spawn_egress(dest.local_addr().unwrap(), Arc::clone(&stop));
    let cm = cm();
    let mut ing = Ingress::bind(&cm, &ingress_cfg(egress)).unwrap();
    let app = UdpSocket::bind("127.0.0.1:0").unwrap();
    app.connect(ing.local_addr().unwrap()).unwrap();
    // A burst far faster than a fresh channel's window: most must be
    // dropped at the proxy, none may pile up.
    for i in 0..5000u32 {
        app.send(&i.to_be_bytes().repeat(30)).unwrap();
        if i % 100 == 0 {
            ing.step().unwrap();
        }
    }
    drive(&mut ing, Duration::from_secs(2));
    // A reply from the destination reaches the application.
    let mut buf = [0u8; 2048];
    let (n, egress_out) = dest.recv_from(&mut buf).unwrap();
    assert_eq!(n, 120);
    dest.send_to(b"pong", egress_out).unwrap();
    let mut got = 1;
    while dest.recv_from(&mut buf).is_ok() {
        got += 1;
    }
    drive(&mut ing, Duration::from_millis(500));
    app.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    assert_eq!(app.recv(&mut buf).unwrap(), 4, "the reply came back");
    stop.store(true, Ordering::Relaxed);
    let er = eh.join().unwrap();
    let r = ing.report();
    eprintln!("{r:?}\n{er:?}");
    assert_eq!(r.offered, 5000);
    assert!(r.dropped_at_proxy > 1000, "{r:?}");
    let waiting = r.offered - r.sent - r.dropped_at_proxy;
    assert!(waiting <= 1, "at most MAXQ left waiting: {r:?}");
    assert_eq!(er.delivered, got, "what the egress delivered arrived");
    assert!(
        er.delivered + 2 >= r.sent && er.delivered <= r.sent,
        "{r:?} {er:?}"
    );
    assert_eq!(r.replies, 1);
}

#[test]
fn garbage_and_a_vanished_peer_are_survived() {
    // Garbage at the egress before and after the channel starts.
    let dest = UdpSocket::bind("127.0.0.1:0").unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let (egress, eh) = spawn_egress(dest.local_addr().unwrap(), Arc::clone(&stop));
    let junk = UdpSocket::bind("127.0.0.1:0").unwrap();
    for k in 0..50u8 {
        junk.send_to(&[k; 37], egress).unwrap();
    }
    let cm = cm();
    let mut ing = Ingress::bind(&cm, &ingress_cfg(egress)).unwrap();
    let app = UdpSocket::bind("127.0.0.1:0").unwrap();
    app.connect(ing.local_addr().unwrap()).unwrap();
    for _ in 0..20 {
        app.send(&[7u8; 100]).unwrap();
        drive(&mut ing, Duration::from_millis(20));
    }
    for k in 0..50u8 {
        junk.send_to(&[0xC3, k, 1, 2, 3], egress).unwrap();
    }
    drive(&mut ing, Duration::from_millis(300));
    stop.store(true, Ordering::Relaxed);
    let er = eh.join().unwrap();
    eprintln!("{er:?}");
    assert!(er.malformed >= 50, "{er:?}");
    assert!(er.delivered >= 15, "{er:?}");
    // The egress is gone: the ingress keeps taking the application's
    // datagrams, sends at the CM's pace, and never blocks or fails.
    let t0 = Instant::now();
    for k in 0..2000 {
        app.send(&[9u8; 100]).unwrap();
        if k % 50 == 0 {
            ing.step().unwrap();
        }
    }
    drive(&mut ing, Duration::from_secs(2));
    assert!(t0.elapsed() < Duration::from_secs(5));
    let r = ing.report();
    eprintln!("{r:?}");
    assert_eq!(r.offered, 2020);
    assert!(r.dropped_at_proxy > 1500, "{r:?}");
}

/// Several ingresses on one CM (one thread: their flows to one host share a
/// macroflow) and several egresses on another: every flow gets through at
/// its modest rate, none is starved by the others.
#[test]
fn proxies_sharing_one_cm_all_deliver() {
    const N: usize = 4;
    let dests: Vec<UdpSocket> = (0..N)
        .map(|_| UdpSocket::bind("127.0.0.1:0").unwrap())
        .collect();
    let deliver: Vec<SocketAddr> = dests.iter().map(|d| d.local_addr().unwrap()).collect();
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, rx) = std::sync::mpsc::channel();
    let stop_e = Arc::clone(&stop);
    let eh = std::thread::spawn(move || {
        let cm = cm();
        let mut all: Vec<Egress> = deliver
            .iter()
            .map(|d| {
                let cfg = EgressConfig {
                    listen: "127.0.0.1:0".parse().unwrap(),
                    deliver: *d,
                };
                Egress::bind(&cm, &cfg).unwrap()
            })
            .collect();
        tx.send(
            all.iter()
                .map(|e| e.local_addr().unwrap())
                .collect::<Vec<_>>(),
        )
        .unwrap();
        cm_force::proxy::run_all(
            &mut all,
            &cm,
            &stop_e,
            Some(Instant::now() + Duration::from_secs(30)),
        )
        .unwrap();
        all.iter().map(Egress::report).collect::<Vec<_>>()
    });
    let egresses: Vec<SocketAddr> = rx.recv().unwrap();
    let cm = cm();
    let mut ings: Vec<Ingress> = egresses
        .iter()
        .map(|e| Ingress::bind(&cm, &ingress_cfg(*e)).unwrap())
        .collect();
    let apps: Vec<UdpSocket> = ings
        .iter()
        .map(|i| {
            let a = UdpSocket::bind("127.0.0.1:0").unwrap();
            a.connect(i.local_addr().unwrap()).unwrap();
            a
        })
        .collect();
    // 100 datagrams of 92 bytes a second per flow, for 3 s.
    let t0 = Instant::now();
    for k in 0..300u32 {
        for a in &apps {
            a.send(&[k as u8; 92]).unwrap();
        }
        let next = t0 + Duration::from_millis(10 * u64::from(k + 1));
        cm_force::proxy::run_all(&mut ings, &cm, &AtomicBool::new(false), Some(next)).unwrap();
    }
    cm_force::proxy::run_all(
        &mut ings,
        &cm,
        &AtomicBool::new(false),
        Some(Instant::now() + Duration::from_millis(500)),
    )
    .unwrap();
    stop.store(true, Ordering::Relaxed);
    let ers = eh.join().unwrap();
    let irs: Vec<_> = ings.iter().map(Ingress::report).collect();
    eprintln!("{irs:#?}\n{ers:#?}");
    for (i, e) in irs.iter().zip(&ers) {
        assert_eq!(i.offered, 300);
        assert!(e.delivered >= 270, "a flow starved: {i:?} {e:?}");
    }
    // One macroflow for the four (same destination host).
    assert_eq!(cm.borrow_mut().stat().unwrap().macroflows.len(), 1);
}
