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
