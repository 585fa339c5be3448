//! The layered stream over loopback, both APIs.
#![allow(clippy::unwrap_used)]

use std::net::{SocketAddr, UdpSocket};
use std::thread;
use std::time::{Duration, Instant};

use cm_apps::stream::{Api, Layers, ServerReport, StreamServer};
mod common;
use common::cm;

fn serve(to: SocketAddr, api: Api, secs: u64) -> ServerReport {
    let cm = cm();
    let mut s =
        StreamServer::connect(&cm, to, Layers::default(), api, Duration::from_secs(secs)).unwrap();
    common::drive(&mut s, &cm);
    s.report()
}

/// Loopback carries the top layer: after the CM's first RTTs both servers
/// send it, and the client plays every frame, none frozen.
#[test]
fn both_apis_reach_the_top_layer_on_loopback() {
    for api in [Api::Alf, Api::Rate] {
        let (to, h) = common::stream_client();
        let s = serve(to, api, 3);
        let c = h.join().unwrap();
        assert!(s.frames >= 75, "{api:?} {:?}", (s.frames, s.skipped));
        let top = s.layers.iter().filter(|(_, l)| *l == 3).count();
        assert!(
            top * 10 >= s.layers.len() * 8,
            "{api:?} layers {:?}",
            s.layers
        );
        assert!(c.played >= 70, "{api:?} {c:?}");
        assert_eq!(c.frozen, 0, "{api:?} {c:?}");
        assert_eq!(c.malformed, 0);
    }
}

/// The ALF server sends a stored stream as fast as the CM grants (§4,
/// Fig 8): on loopback a 3 s stream is sent in well under 3 s, and the
/// client still plays every frame at its time. A live source (`ahead` 0)
/// takes the stream's length.
#[test]
fn alf_sends_ahead_and_the_client_plays_every_frame_at_its_time() {
    for (ahead, sent_by) in [
        (None, Duration::from_millis(1500)),
        (Some(Duration::ZERO), Duration::from_secs(8)),
    ] {
        let (to, h) = common::stream_client();
        let cm = cm();
        let started = Instant::now();
        let mut s =
            StreamServer::connect(&cm, to, Layers::default(), Api::Alf, Duration::from_secs(3))
                .unwrap();
        s.send_ahead(ahead);
        common::drive(&mut s, &cm);
        let took = started.elapsed();
        let c = h.join().unwrap();
        let played_by = started.elapsed();
        assert!(took < sent_by, "{ahead:?}: sent in {took:?}");
        if ahead.is_some() {
            assert!(
                took >= Duration::from_millis(2900),
                "live, sent in {took:?}"
            );
        }
        // The client plays the last frame at its time, 3 s plus its
        // startup buffer after the first, however early it came.
        assert!(
            played_by >= Duration::from_secs(3),
            "{ahead:?}: {played_by:?}"
        );
        assert!(c.played >= 74, "{ahead:?} {c:?}");
        assert_eq!(c.frozen, 0, "{ahead:?} {c:?}");
    }
}

#[test]
fn garbage_is_counted_and_the_stream_still_plays() {
    let (to, h) = common::stream_client();
    let junk = UdpSocket::bind("127.0.0.1:0").unwrap();
    for _ in 0..3 {
        junk.send_to(b"garbage", to).unwrap();
    }
    thread::sleep(Duration::from_millis(100));
    serve(to, Api::Alf, 2);
    let c = h.join().unwrap();
    assert!(c.malformed >= 3, "{c:?}");
    assert!(c.played >= 40, "{c:?}");
}

#[test]
fn a_vanished_client_leaves_the_server_finishing() {
    let gone = UdpSocket::bind("127.0.0.1:0").unwrap();
    let to = gone.local_addr().unwrap();
    drop(gone);
    for api in [Api::Alf, Api::Rate] {
        let started = Instant::now();
        let s = serve(to, api, 2);
        assert!(
            started.elapsed() < Duration::from_secs(8),
            "{api:?} {:?}",
            started.elapsed()
        );
        assert!(s.frames > 0, "{api:?}");
    }
}
