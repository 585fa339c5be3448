#![allow(clippy::unwrap_used)]
//! Real sockets on loopback: `Preconnection::initiate` and `listen` move
//! data for a CC-UDP choice and a TCP choice, and `qos()` reports
//! measurements and verdicts. Bounded: every wait has a timeout.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use cm_select::{Controller, Preconnection, Requirements, Status, Transport};

fn loopback() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

#[test]
fn cc_udp_voice_moves_messages_and_reports_qos() {
    let req: Requirements = "profile=datagram delay-ms=150 rate=64k behaviour=app-limited"
        .parse()
        .unwrap();
    let server = Preconnection::listener(req.clone(), loopback()).unwrap();
    assert_eq!(server.choice().controller, Some(Controller::Tfrc));
    let mut listener = server.listen().unwrap();
    let addr = listener.local_addr().unwrap();

    let client = Preconnection::new(req, addr).unwrap();
    let mut a = client.initiate().unwrap();
    assert_eq!(a.choice().transport, Transport::CcUdp);
    // The chosen controller runs on the flow's macroflow.
    let stat = a.cc_udp_socket().unwrap().cm().borrow_mut().stat().unwrap();
    let names: Vec<&str> = stat
        .macroflows
        .iter()
        .map(|m| m.controller.as_str())
        .collect();
    assert_eq!(names, ["tfrc"]);
    a.send(b"first").unwrap();
    assert!(a.flush(Duration::from_secs(5)).unwrap());

    let mut b = listener.accept(Duration::from_secs(5)).unwrap();
    b.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut buf = [0u8; 2048];
    let n = b.receive(&mut buf).unwrap();
    assert_eq!(&buf[..n], b"first");
    assert_eq!(b.peer_addr().unwrap(), a.local_addr().unwrap());

    // 40 voice packets of the tuned size, each direction driven in turn.
    let pkt = vec![7u8; a.choice().packet_size.unwrap()];
    let mut got = 0;
    let deadline = Instant::now() + Duration::from_secs(10);
    b.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
    for _ in 0..40 {
        a.send(&pkt).unwrap();
        a.flush(Duration::from_secs(2)).unwrap();
        while let Ok(n) = b.receive(&mut buf) {
            assert_eq!(n, pkt.len());
            got += 1;
        }
        a.drive().unwrap();
    }
    while got < 40 && Instant::now() < deadline {
        if b.receive(&mut buf).is_ok() {
            got += 1;
        }
        a.drive().unwrap();
    }
    assert_eq!(got, 40);
    // Acks carry RTT samples back to a's CM.
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut q = a.qos().unwrap();
    while q.srtt.is_none() && Instant::now() < deadline {
        b.drive().unwrap();
        std::thread::sleep(Duration::from_millis(5));
        q = a.qos().unwrap();
    }
    println!("{q}");
    assert!(q.srtt.is_some(), "{q}");
    assert!(q.rate.is_some(), "{q}");
    let delay = q
        .verdicts
        .iter()
        .find(|v| v.requirement == "delay")
        .unwrap();
    // Loopback RTT is microseconds; 2 packet times of 20 ms add 40 ms.
    assert_eq!(delay.status, Status::Met, "{q}");
    assert!(
        q.verdicts.iter().any(|v| v.requirement == "target-rate"),
        "{q}"
    );
}

#[test]
fn tcp_stream_moves_bytes_and_reports_tcp_info() {
    let req: Requirements = "rate=8M min-rate=1M delay-ms=500".parse().unwrap();
    let server = Preconnection::listener(req.clone(), loopback()).unwrap();
    assert_eq!(server.choice().transport, Transport::LinuxTcp);
    let mut listener = server.listen().unwrap();
    let addr = listener.local_addr().unwrap();
    let mut a = Preconnection::new(req, addr).unwrap().initiate().unwrap();
    let mut b = listener.accept(Duration::from_secs(5)).unwrap();
    b.set_read_timeout(Some(Duration::from_secs(5))).unwrap();

    let data: Vec<u8> = (0..200_000u32).map(|i| i as u8).collect();
    // One thread (a connection with CC-UDP inside is not Send): a chunk
    // out, then read until it is in.
    let mut got = Vec::new();
    let mut buf = [0u8; 65536];
    for chunk in data.chunks(8192) {
        a.send(chunk).unwrap();
        let want = got.len() + chunk.len();
        while got.len() < want {
            let n = b.receive(&mut buf).unwrap();
            assert!(n > 0, "peer closed early");
            got.extend_from_slice(&buf[..n]);
        }
    }
    assert_eq!(got, data);
    let q = a.qos().unwrap();
    println!("{q}");
    assert!(q.srtt.is_some_and(|s| s.as_micros() > 0), "{q}");
    assert!(q.rate.is_some(), "{q}");
    assert_eq!(q.verdicts.len(), 3, "{q}");
    let delay = q
        .verdicts
        .iter()
        .find(|v| v.requirement == "delay")
        .unwrap();
    assert_eq!(delay.status, Status::Met, "{q}");
}

#[test]
fn raw_udp_only_when_prohibited_and_accept_times_out() {
    let req: Requirements = "profile=datagram congestion-control=prohibit"
        .parse()
        .unwrap();
    let server = Preconnection::listener(req.clone(), loopback()).unwrap();
    let mut listener = server.listen().unwrap();
    let addr = listener.local_addr().unwrap();
    let t = Instant::now();
    assert!(listener.accept(Duration::from_millis(100)).is_err());
    assert!(t.elapsed() < Duration::from_secs(3));
    let mut a = Preconnection::new(req, addr).unwrap().initiate().unwrap();
    a.send(b"unresponsive").unwrap();
    let mut b = listener.accept(Duration::from_secs(5)).unwrap();
    b.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut buf = [0u8; 64];
    let n = b.receive(&mut buf).unwrap();
    assert_eq!(&buf[..n], b"unresponsive");
    let q = a.qos().unwrap();
    assert!(q.rate.is_none() && q.verdicts.is_empty());
}
