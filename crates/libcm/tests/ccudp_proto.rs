//! The CM protocol on `CcUdpSocket`s over loopback (sigcomm1999 §4.2–4.3):
//! an application that never acknowledges anything is congestion
//! controlled by probes; a peer without a receiver CM gets data from the
//! first round trip and the sender falls back to acks; a receiver that
//! restarts is resynchronised by RST; hostile protocol datagrams are
//! dropped and counted while the socket keeps serving.

#![allow(clippy::unwrap_used)]

use std::cell::RefCell;
use std::net::UdpSocket;
use std::rc::Rc;
use std::time::{Duration, Instant};

use cm_proto::wire::{FlowReport, Hint, Packet, Response};
use libcm::ccudp::{CcUdpSocket, ProberConfig, SharedCm};
use libcm::{Cm, Config};

mod common;

const LOCAL: &str = "127.0.0.1:0";

fn shared() -> SharedCm {
    Rc::new(RefCell::new(Cm::embedded(Config::default()).unwrap()))
}

/// A connected pair on loopback, non-blocking.
fn pair(cm: &SharedCm) -> (CcUdpSocket, CcUdpSocket) {
    let mut a = CcUdpSocket::bind(cm, LOCAL).unwrap();
    let mut b = CcUdpSocket::bind(cm, LOCAL).unwrap();
    a.connect(b.local_addr().unwrap()).unwrap();
    b.connect(a.local_addr().unwrap()).unwrap();
    a.set_nonblocking(true).unwrap();
    b.set_nonblocking(true).unwrap();
    (a, b)
}

/// Sends up to `n` datagrams from `a` for at most `limit`, draining `b`;
/// returns the payloads `b` got.
fn pump(a: &mut CcUdpSocket, b: &mut CcUdpSocket, n: usize, limit: Duration) -> usize {
    let start = Instant::now();
    let (mut sent, mut got) = (0, 0);
    let mut buf = [0u8; 2048];
    while start.elapsed() < limit && (sent < n || a.stats().queued > 0) {
        if sent < n && a.send(&[7u8; 1000]).is_ok() {
            sent += 1;
        }
        a.drive().unwrap();
        while b.recv(&mut buf).is_ok() {
            got += 1;
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    // Let the last probes come back.
    let end = Instant::now() + Duration::from_millis(100);
    while Instant::now() < end {
        a.drive().unwrap();
        while b.recv(&mut buf).is_ok() {
            got += 1;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    got
}

/// The receiver sends no acknowledgement for CM-headed data; the sender
/// learns from probes, and every datagram is accounted for once.
#[test]
fn a_receiver_that_never_acks_still_drives_the_sender() {
    let cm = shared();
    let (mut a, mut b) = pair(&cm);
    let got = pump(&mut a, &mut b, 500, Duration::from_secs(10));
    let (sa, sb) = (a.stats(), b.stats());
    eprintln!("A {sa:?}\nB {sb:?}");
    assert_eq!(got, 500);
    assert_eq!(sa.proto.state, "negotiated");
    assert!(sa.proto.cm_sent > 400, "{sa:?}");
    // Probes answered, and almost all data resolved by them, not by acks.
    assert!(sa.proto.probes.1 > 0);
    assert_eq!(sa.acked + sa.lost, 500, "{sa:?}");
    assert!(sb.proto.cm_received >= sa.proto.cm_sent);
    assert!(sa.acks_received < 50, "acks {}", sa.acks_received);
    assert!(a.estimate().unwrap().srtt.is_some());
}

/// A peer without a receiver CM: data flows from the start (with CC-UDP's
/// header, acknowledged by the peer), and after the SYNs go unanswered
/// the sender falls back and keeps running on acks.
#[test]
fn a_peer_without_a_cm_gets_data_at_once_and_the_sender_falls_back() {
    let cm = shared();
    let (mut a, mut b) = pair(&cm);
    b.set_cm_protocol(false);
    a.set_probe_config(ProberConfig {
        syn_timeout: cm_core::Duration::from_millis(50),
        ..ProberConfig::default()
    });
    let got = pump(&mut a, &mut b, 20, Duration::from_millis(30));
    assert!(got > 0, "nothing delivered in the first 30 ms");
    let got = got + pump(&mut a, &mut b, 480, Duration::from_secs(10));
    // Three SYNs 50, 100 and 200 ms apart, then the fallback.
    let end = Instant::now() + Duration::from_secs(3);
    while a.stats().proto.state == "handshaking" && Instant::now() < end {
        a.drive().unwrap();
        b.drive().unwrap();
        std::thread::sleep(Duration::from_millis(5));
    }
    let sa = a.stats();
    eprintln!("A {sa:?}");
    assert_eq!(got, 500);
    assert_eq!(sa.proto.state, "fallback");
    assert_eq!(sa.proto.syns, 3);
    assert_eq!(sa.proto.cm_sent, 0);
    assert_eq!(sa.acked, 500, "{sa:?}");
}

/// The receiving socket goes away and a new one takes its port: the
/// sender's next probe gets RST, it handshakes again, and the transfer
/// goes on with the new receiver.
#[test]
fn a_restarted_receiver_is_resynchronised_by_rst() {
    let cm = shared();
    let (mut a, b) = pair(&cm);
    let port = b.local_addr().unwrap();
    let mut b = b;
    pump(&mut a, &mut b, 200, Duration::from_secs(5));
    assert_eq!(a.stats().proto.state, "negotiated");
    drop(b);
    let mut b2 = CcUdpSocket::bind(&cm, port).unwrap();
    b2.connect(a.local_addr().unwrap()).unwrap();
    b2.set_nonblocking(true).unwrap();
    let got = pump(&mut a, &mut b2, 300, Duration::from_secs(10));
    let sa = a.stats();
    eprintln!("A {sa:?}\nB2 {:?}", b2.stats());
    assert!(sa.proto.resets >= 1, "{sa:?}");
    assert_eq!(sa.proto.state, "negotiated");
    assert!(got >= 290, "the new receiver got {got}");
    assert!(b2.stats().proto.answered > 0);
}

/// A hostile peer: truncated, malformed, replayed and forged protocol
/// datagrams are dropped and counted; valid probes are still answered
/// with exact counts; the shared CM keeps serving another pair meanwhile.
#[test]
fn hostile_protocol_datagrams_are_dropped_and_counted() {
    let cm = shared();
    let hostile = UdpSocket::bind(LOCAL).unwrap();
    let mut victim = CcUdpSocket::bind(&cm, LOCAL).unwrap();
    victim.connect(hostile.local_addr().unwrap()).unwrap();
    victim.set_nonblocking(true).unwrap();
    hostile.connect(victim.local_addr().unwrap()).unwrap();
    hostile
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let (mut a, mut b) = pair(&cm);
    let mut buf = [0u8; 2048];
    // A valid handshake first.
    hostile.send(&Packet::Syn { isn: 1000 }.encode()).unwrap();
    victim.drive().unwrap();
    let n = hostile.recv(&mut buf).unwrap();
    assert_eq!(Packet::decode(&buf[..n]), Ok(Packet::SynAck { isn: 1000 }));
    // Three data packets of the association (tag = ISN's low 16 bits).
    let tag = 1000u64 << 48;
    for seq in 0..3u64 {
        let mut d = Packet::Data {
            protocol: 17,
            flow: 9,
            seq: tag | seq,
        }
        .encode();
        d.extend_from_slice(&[1; 84]);
        hostile.send(&d).unwrap();
    }
    // Garbage: truncated headers, bad version, a response from the
    // "receiver" side, replayed and far-future probes, a duplicate.
    let mut flood: Vec<Vec<u8>> = vec![
        vec![0xCB],
        vec![0xCB, 0x14, 0, 0],
        vec![0xCB, 0x74, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
        Packet::Response(Response {
            this_probe: 1001,
            last_probe: 1000,
            delay_us: 0,
            flows: vec![FlowReport {
                flow: 1,
                bytes: 1 << 40,
                lost: 0,
                hint: Hint::default(),
                packets: 5,
            }],
        })
        .encode(),
        Packet::Probe { seq: 1000 }.encode(),
        Packet::Probe {
            seq: 1000 + (1 << 30),
        }
        .encode(),
    ];
    let mut dup = Packet::Data {
        protocol: 17,
        flow: 9,
        seq: tag | 1,
    }
    .encode();
    dup.extend_from_slice(&[1; 84]);
    flood.push(dup);
    let mut other = 0;
    for _ in 0..200 {
        for f in &flood {
            hostile.send(f).unwrap();
        }
        victim.drive().unwrap();
        for _ in 0..3 {
            if a.send(&[7u8; 1000]).is_ok() {
                other += 1;
            }
        }
        a.drive().unwrap();
        while b.recv(&mut buf).is_ok() {}
    }
    let _ = pump(&mut a, &mut b, 0, Duration::from_secs(2));
    // A valid probe gets the exact counts: 3 datagrams of 100 bytes.
    hostile.send(&Packet::Probe { seq: 1001 }.encode()).unwrap();
    let mut answer = None;
    let end = Instant::now() + Duration::from_secs(2);
    while answer.is_none() && Instant::now() < end {
        victim.drive().unwrap();
        if let Ok(n) = hostile.recv(&mut buf) {
            if let Ok(Packet::Response(r)) = Packet::decode(&buf[..n]) {
                answer = Some(r);
            }
        }
    }
    let r = answer.expect("a valid probe is answered");
    assert_eq!((r.this_probe, r.last_probe), (1001, 1000));
    let f = r.flows.iter().find(|f| f.flow == 9).unwrap();
    assert_eq!((f.bytes, f.packets, f.lost), (300, 3, 0));
    let s = victim.stats();
    eprintln!("victim {s:?}");
    assert!(s.proto.refused >= 600, "{s:?}");
    assert!(s.duplicates >= 200);
    // The other pair, on the same CM, kept working: all it sent arrived.
    assert!(other > 100);
    assert_eq!(b.stats().received, other as u64, "{:?}", b.stats());
}

/// The receiver vanishes mid-transfer and nothing takes its port: the
/// sender neither hangs nor runs unlimited. Port-unreachable errors move
/// it to the fallback (CC-UDP with acks that never come), and its
/// datagrams then time out as persistent congestion.
#[test]
fn a_vanished_receiver_neither_hangs_nor_unleashes_the_sender() {
    let cm = shared();
    let (mut a, mut b) = pair(&cm);
    pump(&mut a, &mut b, 100, Duration::from_secs(5));
    assert_eq!(a.stats().proto.state, "negotiated");
    drop(b);
    let start = Instant::now();
    let mut accepted = 0u64;
    while start.elapsed() < Duration::from_secs(2) {
        if a.send(&[7u8; 1000]).is_ok() {
            accepted += 1;
        }
        a.drive().unwrap();
        std::thread::sleep(Duration::from_micros(500));
    }
    let s = a.stats();
    eprintln!("A {s:?}, {accepted} accepted");
    assert_ne!(s.proto.state, "negotiated", "{s:?}");
    // Left the socket in 2 s: bounded by timeouts, far from the thousands
    // an unlimited sender would push.
    let sent_after = s.sent - 100;
    assert!(sent_after < 100, "{sent_after} datagrams into a dead peer");
}

/// Through the daemon: the sender reports its peer's state, and `stat`
/// (what `cm stat` prints) shows the flow as negotiated with a probe RTT;
/// in embedded mode too.
#[test]
fn stat_shows_the_peer_cm() {
    let d = common::TestDaemon::start();
    for cm in [Rc::new(RefCell::new(d.client())), shared()] {
        let (mut a, mut b) = pair(&cm);
        pump(&mut a, &mut b, 200, Duration::from_secs(5));
        // Reports are refreshed at most once a second (and on a change of
        // mode): keep the flow busy past that.
        pump(&mut a, &mut b, usize::MAX, Duration::from_millis(1200));
        let flow = a.flow().unwrap();
        let stat = cm.borrow_mut().stat().unwrap();
        let f = stat.flows.iter().find(|f| f.id == flow.to_u64()).unwrap();
        let p = f.peer.expect("the sender reported its peer");
        assert_eq!(p.mode, libcm::PeerMode::Negotiated);
        assert!(p.probe_srtt_us.is_some() && p.probes > 0, "{p:?}");
        // The receiving socket sends nothing of its own: no peer record.
        let rf = stat
            .flows
            .iter()
            .find(|f| f.id == b.flow().unwrap().to_u64())
            .unwrap();
        assert!(rf.peer.is_none());
    }
}

/// A receiver's hint (the Hints Dispatcher): the weight it asks for
/// travels back in responses and the sender's scheduler applies it, so of
/// two sending flows to one host the hinted one gets three times the share
/// (the receiving sockets are flows of the same macroflow too, weight 1).
#[test]
fn a_receiver_hint_sets_the_senders_weight() {
    let cm = shared();
    let (mut a1, mut b1) = pair(&cm);
    let (mut a2, mut b2) = pair(&cm);
    b1.set_receiver_hint(3, 0);
    pump(&mut a1, &mut b1, 50, Duration::from_secs(2));
    pump(&mut a2, &mut b2, 50, Duration::from_secs(2));
    let stat = cm.borrow_mut().stat().unwrap();
    let share = |s: &CcUdpSocket| {
        let id = s.flow().unwrap().to_u64();
        stat.flows.iter().find(|f| f.id == id).unwrap().share
    };
    let (s1, s2) = (share(&a1), share(&a2));
    assert!((s1 / s2 - 3.0).abs() < 1e-9, "{s1} {s2}");
}
