//! NACK-based video over loopback: the stream at the CM's rate in packet
//! bunches, samples reaching the macroflow's capacity, NACKs, garbage and a
//! peer that vanishes.
#![allow(clippy::unwrap_used)]

use std::net::{SocketAddr, UdpSocket};
use std::thread;
use std::time::{Duration, Instant};

use cm_apps::video::{VideoClientReport, VideoConfig, VideoServer, VideoServerReport};
mod common;
use common::cm;

fn client() -> (SocketAddr, thread::JoinHandle<VideoClientReport>) {
    common::video_client()
}

/// The default source (14 kbit/s base: a picture every 0.86 s; 1.5 Mbit/s
/// top), a 1 s playout delay as the client's.
fn config(secs: u64, controller: &str) -> VideoConfig {
    VideoConfig {
        playout: Duration::from_secs(1),
        duration: Duration::from_secs(secs),
        controller: controller.parse().unwrap(),
        ..VideoConfig::default()
    }
}

fn serve(to: SocketAddr, cfg: VideoConfig) -> VideoServerReport {
    let cm = cm();
    let mut s = VideoServer::connect(&cm, to, cfg).unwrap();
    common::drive(&mut s, &cm);
    s.report()
}

#[test]
fn every_controller_streams_at_the_top_rate_on_loopback_with_bunch_samples() {
    for controller in ["aimd:mode=rate", "iiad", "tfrc", "iscc:l=2"] {
        let (to, h) = client();
        let s = serve(to, config(4, controller));
        let r = h.join().unwrap();
        // Nothing limits loopback but the source: the enhancement layer
        // fills up to the top rate once the controller has opened up (the
        // first bunches go out before any feedback, at whatever rate the
        // controller starts from; the pauses follow the rate as it grows).
        let kbit = r.packets as f64 * 1500.0 * 8.0 / 4.0 / 1e3;
        assert!(
            kbit > 800.0 && kbit < 1600.0,
            "{controller}: {kbit} kbit/s {r:?}"
        );
        assert!(s.base >= 4, "{controller}: {s:?}");
        assert_eq!(r.malformed, 0);
        assert!(r.loss < 0.01, "{controller}: {r:?}");
        assert!(r.pictures >= 4 && r.frozen == 0, "{controller}: {r:?}");
        // Every bunch of 3 back to back on loopback yields a sample, and
        // the server's CM turns them into the macroflow's capacity.
        assert!(r.samples >= 20, "{controller}: {r:?}");
        assert!(s.samples >= r.samples / 2, "{controller}: {s:?} {r:?}");
        assert!(s.capacity_bps.is_some(), "{controller}: {s:?}");
        assert!(s.acked > 0 && s.timeouts == 0, "{controller}: {s:?}");
    }
}

#[test]
fn garbage_is_counted_and_ignored_and_a_vanished_client_does_not_hang_the_server() {
    let (to, h) = client();
    let junk = UdpSocket::bind("127.0.0.1:0").unwrap();
    for _ in 0..5 {
        junk.send_to(b"\x00\x01 not video", to).unwrap();
    }
    thread::sleep(Duration::from_millis(100));
    let s = serve(to, config(2, "iscc:l=2"));
    let r = h.join().unwrap();
    assert!(r.malformed >= 5, "{r:?}");
    assert!(r.pictures >= 2, "{r:?} {s:?}");

    // Nobody listens: the server finishes on time, on timeouts.
    let gone = UdpSocket::bind("127.0.0.1:0").unwrap();
    let to = gone.local_addr().unwrap();
    drop(gone);
    let t = Instant::now();
    let s = serve(to, config(3, "aimd:mode=rate"));
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    assert_eq!(s.acked, 0, "{s:?}");
}

#[test]
fn bad_settings_are_refused_with_their_reason() {
    let cm = cm();
    let to: SocketAddr = "127.0.0.1:9".parse().unwrap();
    let bad = VideoConfig {
        burst: 2,
        ..VideoConfig::default()
    };
    let e = VideoServer::connect(&cm, to, bad).err().unwrap();
    assert!(e.to_string().contains("at least 3"), "{e}");
}

/// A relay between server and client that drops every `nth` datagram from
/// the server (acks and reports pass); stops when `stop` is set.
fn lossy_relay(
    to: SocketAddr,
    nth: u64,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> (SocketAddr, thread::JoinHandle<u64>) {
    use std::sync::atomic::Ordering;
    let front = UdpSocket::bind("127.0.0.1:0").unwrap();
    let back = UdpSocket::bind("127.0.0.1:0").unwrap();
    back.connect(to).unwrap();
    front
        .set_read_timeout(Some(Duration::from_millis(5)))
        .unwrap();
    back.set_read_timeout(Some(Duration::from_millis(5)))
        .unwrap();
    let addr = front.local_addr().unwrap();
    let h = thread::spawn(move || {
        let (mut buf, mut n, mut dropped, mut server) = ([0u8; 2048], 0u64, 0u64, None);
        while !stop.load(Ordering::Relaxed) {
            if let Ok((len, from)) = front.recv_from(&mut buf) {
                server = Some(from);
                n += 1;
                if n % nth == 0 {
                    dropped += 1;
                } else {
                    let _ = back.send(&buf[..len]);
                }
            }
            if let (Ok(len), Some(s)) = (back.recv(&mut buf), server) {
                let _ = front.send_to(&buf[..len], s);
            }
        }
        dropped
    });
    (addr, h)
}

#[test]
fn lost_base_packets_are_nacked_and_recovered_before_their_deadline() {
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (to, h) = client();
    let (relay, r) = lossy_relay(to, 7, std::sync::Arc::clone(&stop));
    // A 200 kbit/s source, all base layer (a base packet every 58 ms), so
    // that every seventh datagram lost is a base packet more often than not.
    let cfg = VideoConfig {
        base_bps: 200_000.0,
        top_bps: 200_000.0,
        ..config(4, "aimd:mode=rate")
    };
    let s = serve(relay, cfg);
    let c = h.join().unwrap();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let dropped = r.join().unwrap();
    println!("dropped {dropped}; client {c:?}; server {s:?}");
    assert!(dropped >= 5, "{dropped}");
    assert!(c.nacks > 0 && s.resent > 0, "{c:?} {s:?}");
    assert!(c.recovered > 0, "{c:?} {s:?}");
    // Every picture whose base packet was lost got it again in time, but
    // for a retransmission that was lost too (every seventh datagram).
    assert!(c.frozen * 5 <= c.recovered.max(1), "{c:?} {s:?}");
}
