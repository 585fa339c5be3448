//! Real Debian programs, never modified, under `cm wrap`'s preload
//! library on an emulated path: a GStreamer RTP audio stream (well under
//! the path's rate) goes through whole, counted by the receiver CM, and
//! its flow is held by the CM (every datagram waited for a grant).
//! (`iperf3 -u` is the `real-wrap` experiment, in real.rs.)
#![allow(clippy::unwrap_used)]

use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use cm_netem::{Node, Path, PathConfig};

mod common;
use common::{my_namespaces, root};

#[test]
fn a_gstreamer_rtp_stream_goes_through_whole_under_the_cm() {
    let Some(_serial) = root() else { return };
    let gst = Command::new("gst-launch-1.0").arg("--version").output();
    if gst.is_err() {
        eprintln!(
            "skipped: needs gst-launch-1.0 (apt-get install gstreamer1.0-tools gstreamer1.0-plugins-good)"
        );
        return;
    }
    let lib = cm_force::config::find_wrap_library(None).unwrap();
    let path = Path::build(PathConfig::default()).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = Arc::clone(&stop);
    let rx = path
        .spawn_in(Node::Receiver, move || {
            let mut r = cm_force::Receiver::bind(cm_proto::wire::DEFAULT_PORT).unwrap();
            r.run(
                &stop2,
                Some(std::time::Instant::now() + Duration::from_secs(60)),
            )
            .unwrap();
            r.stats()
        })
        .unwrap();
    let report = std::env::temp_dir().join(format!("cm-wrap-gst-{}.json", std::process::id()));
    // 2 s of 44.1 kHz 16-bit stereo (1.4 Mbit/s) in RTP, paced by its clock.
    let pipeline = format!(
        "audiotestsrc num-buffers=86 ! audio/x-raw,rate=44100,channels=2 ! rtpL16pay ! udpsink host={} port=5004",
        path.receiver_addr()
    );
    let status = path
        .command(Node::Sender, "gst-launch-1.0")
        .arg("-q")
        .args(pipeline.split(' '))
        .env("LD_PRELOAD", &lib)
        .env("CM_WRAP_REPORT", &report)
        .status()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    stop.store(true, Ordering::Relaxed);
    let rs = rx.join().unwrap();
    drop(path);
    assert!(my_namespaces().is_empty());
    assert!(status.success(), "gst-launch-1.0 failed: {status:?}");
    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    let _ = std::fs::remove_file(&report);
    eprintln!("wrapper {r}\nreceiver CM {rs:?}");
    let f = &r["flows"][0];
    let (offered, sent) = (f["offered"].as_u64().unwrap(), f["sent"].as_u64().unwrap());
    assert!(offered >= 150, "the stream sent {offered} datagrams");
    assert!(sent * 100 >= offered * 95, "sent {sent} of {offered}");
    assert!(rs.datagrams >= sent * 95 / 100, "{rs:?}");
    assert!(
        r["responses"].as_u64().unwrap() > 5,
        "the receiver CM answered: {r}"
    );
}
