//! Congestion-controlled UDP (`libcm::ccudp::CcUdpSocket`) on a real
//! emulated path: a sender that offers far more than the 8 Mbit/s
//! bottleneck sends at about the bottleneck's rate with little loss, where
//! a plain UDP socket offering the same loses most of what it sends
//! (cm-implementation-linux §3.3). Needs root (CI runs it as root).
#![allow(clippy::unwrap_used)]

use std::cell::RefCell;
use std::io::ErrorKind;
use std::net::{SocketAddr, SocketAddrV4, UdpSocket};
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use cm_netem::{Node, Path, PathConfig};
use libcm::ccudp::CcUdpSocket;
use libcm::{Cm, Config};

/// One receive call on either kind of socket.
type RecvFn = dyn FnMut(&mut [u8]) -> std::io::Result<usize>;

const RATE: u64 = 8_000_000;
const PAYLOAD: usize = 1200;
/// On the wire: payload, the 16-byte CC-UDP header, UDP and IP headers.
const WIRE: usize = PAYLOAD + 16 + 28;
const SECS: f64 = 8.0;
/// Goodput is measured from here to the end (past slow start).
const WARMUP: f64 = 3.0;

fn addr(ip: std::net::Ipv4Addr, port: u16) -> SocketAddr {
    SocketAddr::V4(SocketAddrV4::new(ip, port))
}

/// Received payload bytes per second over [WARMUP, SECS] of the sender's
/// run, at the receiver; `cc`: CcUdpSocket on both ends, else plain UDP.
fn run(path: &Path, cc: bool) -> (f64, u64, u64) {
    let (snd, rcv) = (path.sender_addr(), path.receiver_addr());
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let receiver = path
        .spawn_in(Node::Receiver, move || -> anyhow::Result<(u64, f64)> {
            let mut buf = vec![0u8; 2048];
            let mut first: Option<Instant> = None;
            let mut counted = 0u64;
            let mut note = |n: usize, first: &mut Option<Instant>| {
                let t0 = *first.get_or_insert_with(Instant::now);
                let t = t0.elapsed().as_secs_f64();
                if (WARMUP..SECS).contains(&t) {
                    counted += n as u64;
                }
            };
            let timeout = Some(Duration::from_millis(50));
            let mut recv: Box<RecvFn> = if cc {
                let cm = Rc::new(RefCell::new(Cm::embedded(Config::default())?));
                let mut s = CcUdpSocket::open(&cm, addr(rcv, 6000), addr(snd, 6001))?;
                s.set_read_timeout(timeout)?;
                Box::new(move |b| s.recv(b))
            } else {
                let s = UdpSocket::bind(addr(rcv, 6000))?;
                s.set_read_timeout(timeout)?;
                Box::new(move |b| s.recv(b))
            };
            while !flag.load(Ordering::Relaxed) {
                match recv(&mut buf) {
                    Ok(n) => note(n, &mut first),
                    Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
                    Err(e) => return Err(e.into()),
                }
            }
            Ok((counted, SECS - WARMUP))
        })
        .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let sender = path
        .spawn_in(Node::Sender, move || -> anyhow::Result<(u64, u64)> {
            let data = vec![0x5au8; PAYLOAD];
            let end = Instant::now() + Duration::from_secs_f64(SECS);
            if cc {
                let cm = Rc::new(RefCell::new(Cm::embedded(Config::default())?));
                let mut s = CcUdpSocket::open(&cm, addr(snd, 6001), addr(rcv, 6000))?;
                s.set_nonblocking(true)?;
                while Instant::now() < end {
                    match s.send(&data) {
                        Ok(_) => {}
                        Err(e) if e.kind() == ErrorKind::WouldBlock => {
                            s.drive()?;
                            std::thread::sleep(Duration::from_micros(200));
                        }
                        Err(e) => return Err(e.into()),
                    }
                }
                let st = s.stats();
                Ok((st.sent, st.lost))
            } else {
                // Plain UDP offering 4x the bottleneck, paced by sleeps.
                let s = UdpSocket::bind(addr(snd, 6001))?;
                let gap = Duration::from_secs_f64(WIRE as f64 * 8.0 / (4.0 * RATE as f64));
                let mut sent = 0;
                let mut next = Instant::now();
                while Instant::now() < end {
                    s.send_to(&data, addr(rcv, 6000))?;
                    sent += 1;
                    next += gap;
                    std::thread::sleep(next.saturating_duration_since(Instant::now()));
                }
                Ok((sent, 0))
            }
        })
        .unwrap();
    let (sent, lost) = sender.join().unwrap().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, Ordering::Relaxed);
    let (bytes, secs) = receiver.join().unwrap().unwrap();
    (bytes as f64 * 8.0 / secs, sent, lost)
}

#[test]
fn cc_udp_fills_the_bottleneck_without_flooding_it() {
    if !cm_netem::is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let path = Path::build(PathConfig {
        rate_bps: RATE,
        one_way_delay: Duration::from_millis(20),
        ..PathConfig::default()
    })
    .unwrap();
    // What the bottleneck can carry in payload.
    let link = RATE as f64 * PAYLOAD as f64 / WIRE as f64;
    let (cc_bps, sent, lost) = run(&path, true);
    let cc_drops = path.stats().unwrap().bottleneck.dropped;
    let (udp_bps, udp_sent, _) = run(&path, false);
    let udp_drops = path.stats().unwrap().bottleneck.dropped - cc_drops;
    path.teardown().unwrap();
    eprintln!(
        "cc-udp {:.2} Mbit/s of {:.2} ({sent} sent, {lost} lost, {cc_drops} bottleneck drops); \
         plain udp {:.2} Mbit/s ({udp_sent} sent, {udp_drops} drops)",
        cc_bps / 1e6,
        link / 1e6,
        udp_bps / 1e6
    );
    assert!(
        cc_bps > 0.7 * link && cc_bps < 1.02 * link,
        "CC-UDP goodput {cc_bps} vs link {link}"
    );
    let loss = lost as f64 / sent as f64;
    assert!(loss < 0.05, "CC-UDP lost {loss:.3} of what it sent");
    let udp_loss = udp_drops as f64 / udp_sent as f64;
    assert!(
        udp_loss > 0.5,
        "the open-loop sender at 4x loses most: {udp_loss:.3}"
    );
}
