//! QUIC connections on the CM, on loopback: three concurrent downloads
//! from one server are three flows of one macroflow in the daemon's CM
//! (what `cm stat` sees), every byte asked for arrives, and a server on
//! quinn's NewReno serves the same way.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use cm_quic::transfer::{Congestion, fetch, serve};

fn free_port() -> SocketAddr {
    let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    s.local_addr().unwrap()
}

/// Serve on a thread until the returned flag is set.
fn server(
    cc: Congestion,
    cert: std::path::PathBuf,
) -> (SocketAddr, Arc<AtomicBool>, std::thread::JoinHandle<()>) {
    let addr = free_port();
    let stop = Arc::new(AtomicBool::new(false));
    let s = Arc::clone(&stop);
    let c = cert.clone();
    let h = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(serve(addr, cc, &c, || s.load(Ordering::SeqCst)))
            .unwrap();
    });
    while !cert.exists() {
        std::thread::sleep(Duration::from_millis(10));
    }
    (addr, stop, h)
}

fn fetch_on_thread(
    addr: SocketAddr,
    cert: std::path::PathBuf,
    secs: u8,
) -> std::thread::JoinHandle<cm_quic::transfer::Received> {
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(fetch(addr, &cert, secs)).unwrap()
    })
}

fn temp(tag: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("cm-quic-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join("cert.der")
}

#[test]
fn concurrent_connections_are_flows_of_one_macroflow() {
    let daemon = cm_daemon::TempDaemon::start().unwrap();
    let path = daemon.socket().to_path_buf();
    let p = path.clone();
    let cm = cm_quic::CmThread::spawn(move || libcm::Cm::connect(&p)).unwrap();
    let cert = temp("cm");
    let (addr, stop, h) = server(Congestion::Cm(cm), cert.clone());
    let clients: Vec<_> = (0..3)
        .map(|_| fetch_on_thread(addr, cert.clone(), 3))
        .collect();
    std::thread::sleep(Duration::from_millis(1500));
    let stat = libcm::Cm::connect(&path).unwrap().stat().unwrap();
    let got: Vec<_> = clients.into_iter().map(|c| c.join().unwrap()).collect();
    stop.store(true, Ordering::SeqCst);
    h.join().unwrap();
    let to_client: Vec<_> = stat
        .flows
        .iter()
        .filter(|f| f.dst.ip() == addr.ip())
        .collect();
    assert_eq!(to_client.len(), 3, "{stat:#?}");
    assert!(
        to_client
            .iter()
            .all(|f| f.macroflow == to_client[0].macroflow)
    );
    assert!(to_client.iter().all(|f| f.sent > 0), "{stat:#?}");
    for r in &got {
        assert!(r.bytes > 1_000_000, "{got:?}");
        assert!(r.seconds < 6.0, "{got:?}");
    }
    let _ = std::fs::remove_dir_all(cert.parent().unwrap());
}

#[test]
fn newreno_serves_the_same_way() {
    let cert = temp("newreno");
    let (addr, stop, h) = server(Congestion::NewReno, cert.clone());
    let r = fetch_on_thread(addr, cert.clone(), 1).join().unwrap();
    stop.store(true, Ordering::SeqCst);
    h.join().unwrap();
    assert!(r.bytes > 1_000_000, "{r:?}");
    let _ = std::fs::remove_dir_all(cert.parent().unwrap());
}

#[test]
fn a_cm_that_cannot_start_is_an_error() {
    let e = cm_quic::CmThread::spawn(|| libcm::Cm::connect("/nonexistent/cm.sock")).unwrap_err();
    assert!(e.to_string().contains("starting the CM for QUIC"), "{e}");
}
