//! The applications through the host's daemon, which stops in the middle
//! of a run and starts again: the handle moves to an embedded CM and back
//! (libcm's failover), and neither the vat sender, the stream server nor
//! the NACK-video server hangs or stops sending.
#![allow(clippy::unwrap_used)]

mod common;

use std::cell::RefCell;
use std::path::Path;
use std::rc::Rc;
use std::sync::atomic::AtomicBool;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use cm_apps::stream::{Api, Layers, StreamServer};
use cm_apps::vat::{Transport, VatConfig, VatSender};
use cm_apps::video::{VideoConfig, VideoServer};
use cm_daemon::{Daemon, DaemonConfig, StopHandle};
use cm_force::proxy::{Relay, run_all};
use libcm::ccudp::SharedCm;

/// A daemon on a thread at `socket`.
fn daemon(socket: &Path) -> (StopHandle, JoinHandle<()>) {
    let mut d = Daemon::bind(DaemonConfig::default(), socket).unwrap();
    let stop = d.stop_handle();
    (stop, thread::spawn(move || d.run().unwrap()))
}

/// Runs `end` (on a CM of the daemon at `socket`) for `secs`, stopping
/// the daemon after a second and starting it again a second later.
fn through_a_restart<R: Relay>(socket: &Path, end: impl FnOnce(&SharedCm) -> R, secs: u64) -> R {
    let (stop, t) = daemon(socket);
    let cm: SharedCm = Rc::new(RefCell::new(libcm::Cm::connect(socket).unwrap()));
    let mut end = end(&cm);
    let never = AtomicBool::new(false);
    let start = Instant::now();
    let slice = |s: u64| Some(start + Duration::from_secs(s));
    run_all(std::slice::from_mut(&mut end), &cm, &never, slice(1)).unwrap();
    stop.stop();
    t.join().unwrap();
    let _ = std::fs::remove_file(socket);
    run_all(std::slice::from_mut(&mut end), &cm, &never, slice(2)).unwrap();
    assert_eq!(cm.borrow().status(), libcm::Status::Fallback);
    let (stop, t) = daemon(socket);
    let until = slice(secs + 10);
    run_all(std::slice::from_mut(&mut end), &cm, &never, until).unwrap();
    assert!(Instant::now() < until.unwrap(), "did not finish");
    stop.stop();
    t.join().unwrap();
    end
}

fn socket(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("cm-apps-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join("cm.sock")
}

#[test]
fn vat_carries_on_through_a_daemon_restart() {
    let (to, rx) = common::vat_receiver(Transport::Cm, Duration::from_secs(1));
    let path = socket("vat");
    let s = through_a_restart(
        &path,
        |cm| {
            let cfg = VatConfig {
                duration: Duration::from_secs(4),
                ..VatConfig::default()
            };
            VatSender::connect(cm, to, cfg).unwrap()
        },
        4,
    );
    let r = rx.join().unwrap();
    let s = s.report();
    assert_eq!(s.made, 200);
    // Loopback loses nothing; what the CM held back while its state moved
    // was dropped from the buffer's head.
    assert!(r.frames >= 150, "{r:?} {s:?}");
    let _ = std::fs::remove_dir_all(path.parent().unwrap());
}

#[test]
fn the_stream_carries_on_through_a_daemon_restart() {
    let (to, rx) = common::stream_client();
    let path = socket("stream");
    let s = through_a_restart(
        &path,
        |cm| {
            StreamServer::connect(cm, to, Layers::default(), Api::Alf, Duration::from_secs(4))
                .unwrap()
        },
        4,
    );
    let c = rx.join().unwrap();
    let s = s.report();
    assert!(s.frames >= 90, "{:?}", (s.frames, s.skipped));
    assert!(c.played >= 90, "{c:?}");
    let _ = std::fs::remove_dir_all(path.parent().unwrap());
}

#[test]
fn nack_video_carries_on_through_a_daemon_restart() {
    let (to, rx) = common::video_client();
    let path = socket("video");
    let s = through_a_restart(
        &path,
        |cm| {
            let cfg = VideoConfig {
                base_bps: 100_000.0,
                top_bps: 1_000_000.0,
                playout: Duration::from_secs(1),
                duration: Duration::from_secs(4),
                ..VideoConfig::default()
            };
            VideoServer::connect(cm, to, cfg).unwrap()
        },
        4,
    );
    let c = rx.join().unwrap();
    let s = s.report();
    // ISCC (rate-based) moved to the embedded CM at the rate it had
    // reached (`Controller::resume`), its capacity samples went to the
    // daemon, the embedded CM and the daemon again, and the stream kept
    // its pictures. (The report comes after the daemon's final stop, from
    // a fresh embedded CM: no capacity estimate is left to show.)
    assert!(s.base >= 30, "{s:?}");
    assert!(c.pictures >= 25, "{c:?} {s:?}");
    assert!(c.frozen * 10 <= c.pictures, "{c:?} {s:?}");
    assert!(s.samples > 20 && s.timeouts == 0, "{s:?}");
    let _ = std::fs::remove_dir_all(path.parent().unwrap());
}
