//! vat over loopback: both transports, garbage, a peer that vanishes.
#![allow(clippy::unwrap_used)]

use std::net::{SocketAddr, UdpSocket};
use std::thread;
use std::time::{Duration, Instant};

use cm_apps::vat::{End, SenderReport, Transport, VatConfig, VatSender};
mod common;
use common::cm;

fn config(transport: Transport, secs: u64) -> VatConfig {
    VatConfig {
        transport,
        duration: Duration::from_secs(secs),
        ..VatConfig::default()
    }
}

fn send(to: SocketAddr, cfg: VatConfig) -> SenderReport {
    let cm = cm();
    let mut s = VatSender::connect(&cm, to, cfg).unwrap();
    common::drive(&mut s, &cm);
    s.report()
}

/// The receivers' idle limit (30 s) is longer than `common::drive`
/// allows (20 s): they stop at the sender's end message.
#[test]
fn frames_arrive_through_the_cm_and_over_plain_udp() {
    for transport in [Transport::Cm, Transport::Udp] {
        let (to, h) = common::vat_receiver(transport, Duration::from_secs(30));
        let started = Instant::now();
        let s = send(to, config(transport, 2));
        let r = h.join().unwrap();
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{transport:?} {:?}",
            started.elapsed()
        );
        assert!(r.ended, "{transport:?} {r:?}");
        assert_eq!(r.expected, s.made, "{transport:?} {r:?}");
        // 2 s of 20 ms frames; loopback loses nothing and the CM's window
        // soon covers 8 kB/s.
        assert_eq!(s.made, 100, "{transport:?} {s:?}");
        assert!(r.frames >= 95, "{transport:?} {r:?} {s:?}");
        assert_eq!(r.malformed, 0);
        assert!(r.delay.p95_ms < 50.0, "{transport:?} {r:?}");
        if transport == Transport::Cm {
            assert!(s.acked >= 90, "{s:?}");
        }
    }
}

#[test]
fn garbage_before_and_between_frames_is_counted_and_ignored() {
    for transport in [Transport::Cm, Transport::Udp] {
        let (to, h) = common::vat_receiver(transport, Duration::from_millis(700));
        let junk = UdpSocket::bind("127.0.0.1:0").unwrap();
        for _ in 0..5 {
            junk.send_to(b"\x00\x01 not a frame", to).unwrap();
        }
        // An end message from anyone but the sender is garbage too: it
        // does not stop the receiver.
        junk.send_to(&End { made: 1 }.encode(), to).unwrap();
        thread::sleep(Duration::from_millis(100));
        let s = send(to, config(transport, 1));
        let r = h.join().unwrap();
        assert!(r.malformed >= 6, "{transport:?} {r:?}");
        assert!(r.frames + 5 >= s.made, "{transport:?} {r:?} {s:?}");
    }
}

/// Nobody listens: the sender neither hangs nor fails; the CM, without
/// acknowledgements, holds its flow back and the buffer drops.
#[test]
fn a_vanished_receiver_leaves_the_sender_running_to_its_end() {
    let gone = UdpSocket::bind("127.0.0.1:0").unwrap();
    let to = gone.local_addr().unwrap();
    drop(gone);
    let started = Instant::now();
    let s = send(to, config(Transport::Cm, 2));
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(s.made, 100);
    assert_eq!(s.acked, 0);
    assert!(s.buffer_drops > 0, "{s:?}");
}

#[test]
fn settings_that_cannot_work_are_refused() {
    let cm = cm();
    let to: SocketAddr = "127.0.0.1:9".parse().unwrap();
    for bad in [
        VatConfig {
            frame_bytes: 10,
            ..VatConfig::default()
        },
        VatConfig {
            buffer: 0,
            ..VatConfig::default()
        },
        VatConfig {
            overflow: cm_transport::maxq::Overflow::Block,
            ..VatConfig::default()
        },
    ] {
        let e = VatSender::connect(&cm, to, bad).err().unwrap();
        assert!(e.to_string().contains("vat settings"), "{e}");
    }
}
