//! What the cm-apps tests share: an embedded CM per thread, and running
//! one end on loopback until it finishes.
#![allow(clippy::unwrap_used, dead_code)]

use std::cell::RefCell;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::atomic::AtomicBool;
use std::thread;
use std::time::{Duration, Instant};

use cm_force::proxy::{Relay, run_all};
use libcm::ccudp::SharedCm;

/// An embedded CM.
pub fn cm() -> SharedCm {
    Rc::new(RefCell::new(
        libcm::Cm::embedded(libcm::Config::default()).unwrap(),
    ))
}

/// Drive `end` on `cm` until it finishes (at most 20 s; panics if not).
pub fn drive<R: Relay>(end: &mut R, cm: &SharedCm) {
    let until = Instant::now() + Duration::from_secs(20);
    run_all(
        std::slice::from_mut(end),
        cm,
        &AtomicBool::new(false),
        Some(until),
    )
    .unwrap();
    assert!(Instant::now() < until, "did not finish within 20 s");
}

/// A receiving end on its own thread and CM: `bind` makes it, `addr`
/// gives its address (sent back before it runs), `report` what it saw.
pub fn receiving<R: Relay + 'static, T: Send + 'static>(
    bind: impl FnOnce(&SharedCm) -> R + Send + 'static,
    addr: fn(&R) -> SocketAddr,
    report: fn(&R) -> T,
) -> (SocketAddr, thread::JoinHandle<T>) {
    let (tx, rx) = std::sync::mpsc::channel();
    let h = thread::spawn(move || {
        let cm = cm();
        let mut end = bind(&cm);
        tx.send(addr(&end)).unwrap();
        drive(&mut end, &cm);
        report(&end)
    });
    (rx.recv().unwrap(), h)
}

/// A vat receiver on loopback on its own thread, stopping `idle` after
/// the last frame; its address and, when it stops, its report.
pub fn vat_receiver(
    transport: cm_apps::vat::Transport,
    idle: Duration,
) -> (SocketAddr, thread::JoinHandle<cm_apps::vat::VatReport>) {
    use cm_apps::vat::{ReceiverConfig, VatReceiver};
    receiving(
        move |cm| {
            let cfg = ReceiverConfig {
                listen: "127.0.0.1:0".parse().unwrap(),
                transport,
                idle,
            };
            VatReceiver::bind(cm, cfg).unwrap()
        },
        |r| r.local_addr().unwrap(),
        VatReceiver::report,
    )
}

/// A stream client on loopback on its own thread (0.5 s startup, stops
/// 1.5 s after the last packet); its address and its report.
pub fn stream_client() -> (
    SocketAddr,
    thread::JoinHandle<cm_apps::stream::StreamReport>,
) {
    use cm_apps::stream::{ClientConfig, Layers, StreamClient};
    receiving(
        |cm| {
            let cfg = ClientConfig {
                listen: "127.0.0.1:0".parse().unwrap(),
                layers: Layers::default(),
                startup: Duration::from_millis(500),
                idle: Duration::from_millis(1500),
            };
            StreamClient::bind(cm, cfg).unwrap()
        },
        |c| c.local_addr().unwrap(),
        StreamClient::report,
    )
}

/// A NACK-video client on loopback on its own thread (1 s playout, reports
/// at least every 50 ms, stops 1 s after the last packet); its address and
/// its report.
pub fn video_client() -> (
    SocketAddr,
    thread::JoinHandle<cm_apps::video::VideoClientReport>,
) {
    use cm_apps::video::{VideoClient, VideoClientConfig};
    receiving(
        |_| {
            VideoClient::bind(VideoClientConfig {
                listen: "127.0.0.1:0".parse().unwrap(),
                report: Duration::from_millis(50),
                playout: Duration::from_secs(1),
                idle: Duration::from_secs(1),
                batch: None,
            })
            .unwrap()
        },
        |c| c.local_addr().unwrap(),
        VideoClient::report,
    )
}
