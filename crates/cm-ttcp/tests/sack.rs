//! TCP/CM with SACK over a lossy loopback relay (the relay pattern of
//! `loopback.rs`): the transfer is exact, and SACK retransmits less than
//! the same transfer without it.
#![allow(clippy::unwrap_used)]

use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use cm_transport::{Datagram, TcpSegment};
use cm_ttcp::{Receiver, ReceiverHandle, ReceiverOptions, SendSpec, Transport, cm_config, send};
use libcm::Cm;

const KB500: u64 = 500_000;

fn any() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

fn receiver() -> (SocketAddr, ReceiverHandle) {
    let rx = Receiver::bind(any(), &Transport::TcpCm, ReceiverOptions::default()).unwrap();
    (rx.local_addr(), rx.spawn())
}

/// Decode a relayed datagram as a TCP segment, whichever framing is used.
fn segment(buf: &[u8]) -> Option<TcpSegment> {
    TcpSegment::decode(buf)
        .ok()
        .or_else(|| match Datagram::decode(buf) {
            Ok(Datagram::Tcp(s)) => Some(s),
            _ => None,
        })
}

/// A UDP relay between sender and receiver that drops a seeded fraction of
/// the data segments, and counts the ACKs that carry SACK blocks.
struct Relay {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    dropped: Arc<AtomicU64>,
    sack_acks: Arc<AtomicU64>,
    threads: Vec<JoinHandle<()>>,
}

impl Relay {
    fn start(to: SocketAddr, drop_per_mille: u64, seed: u64) -> Relay {
        let front = UdpSocket::bind(any()).unwrap();
        let back = UdpSocket::bind(any()).unwrap();
        back.connect(to).unwrap();
        for s in [&front, &back] {
            s.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
        }
        let addr = front.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let dropped = Arc::new(AtomicU64::new(0));
        let sack_acks = Arc::new(AtomicU64::new(0));
        let client: Arc<Mutex<Option<SocketAddr>>> = Arc::new(Mutex::new(None));
        let (f2, b2) = (front.try_clone().unwrap(), back.try_clone().unwrap());
        let (s1, s2, d1, k2, c1, c2) = (
            stop.clone(),
            stop.clone(),
            dropped.clone(),
            sack_acks.clone(),
            client.clone(),
            client,
        );
        let fwd = std::thread::spawn(move || {
            let mut x = seed | 1;
            let mut buf = [0u8; 2048];
            while !s1.load(Ordering::Relaxed) {
                let Ok((n, from)) = front.recv_from(&mut buf) else {
                    continue;
                };
                *c1.lock().unwrap() = Some(from);
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let data = segment(&buf[..n]).is_some_and(|s| s.len > 0);
                if data && x % 1000 < drop_per_mille {
                    d1.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                let _ = back.send(&buf[..n]);
            }
        });
        let rev = std::thread::spawn(move || {
            let mut buf = [0u8; 2048];
            while !s2.load(Ordering::Relaxed) {
                let Ok(n) = b2.recv(&mut buf) else { continue };
                if segment(&buf[..n]).is_some_and(|s| !s.sack.is_empty()) {
                    k2.fetch_add(1, Ordering::Relaxed);
                }
                if let Some(c) = *c2.lock().unwrap() {
                    let _ = f2.send_to(&buf[..n], c);
                }
            }
        });
        Relay {
            addr,
            stop,
            dropped,
            sack_acks,
            threads: vec![fwd, rev],
        }
    }

    /// (data segments dropped, ACKs with SACK blocks)
    fn stop(self) -> (u64, u64) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads {
            t.join().unwrap();
        }
        (
            self.dropped.load(Ordering::Relaxed),
            self.sack_acks.load(Ordering::Relaxed),
        )
    }
}

/// One transfer of `bytes` through a relay dropping `per_mille` of the
/// data segments (same seed, so the same drop pattern by arrival order):
/// (retransmissions, drops, ACKs with SACK blocks).
fn lossy_transfer(sack: bool, bytes: u64, per_mille: u64) -> (u64, u64, u64) {
    let (dst, rx) = receiver();
    let relay = Relay::start(dst, per_mille, 0x5ac4_0001);
    let mut cm = Cm::embedded(cm_config()).unwrap();
    let s = send(
        &SendSpec::new(relay.addr, bytes, Transport::TcpCm).sack(sack),
        Some(&mut cm),
    )
    .unwrap();
    let (dropped, sack_acks) = relay.stop();
    assert_eq!(s.bytes, bytes);
    assert!(s.complete);
    let got = rx.stop().unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].bytes, bytes);
    assert!(got[0].complete);
    assert!(dropped > 0);
    (s.retransmissions, dropped, sack_acks)
}

#[test]
fn tcpcm_with_sack_retransmits_less_over_a_lossy_relay() {
    // 10 % loss: windows with several losses, lost retransmissions and
    // timeouts (at 2-3 % on loopback every loss is an isolated fast
    // retransmit and both need exactly one retransmission per drop).
    let (r_sack, d_sack, acks_sack) = lossy_transfer(true, KB500, 100);
    let (r_plain, d_plain, acks_plain) = lossy_transfer(false, KB500, 100);
    eprintln!(
        "SACK: {r_sack} retransmissions for {d_sack} drops ({acks_sack} SACK ACKs); \
         without: {r_plain} for {d_plain}"
    );
    assert!(acks_sack > 0, "the receiver sent SACK blocks");
    assert_eq!(acks_plain, 0, "no SACK blocks unless the SYN asks");
    // Every drop costs at least one retransmission; with SACK not many
    // more (a retransmission can be dropped too, and a timeout resends
    // what is still in flight), without SACK go-back-N after timeouts
    // resends data the receiver already has.
    assert!(r_sack >= d_sack.saturating_sub(1), "{r_sack} < {d_sack}");
    let per_drop = |r: u64, d: u64| r as f64 / d as f64;
    assert!(
        per_drop(r_sack, d_sack) < per_drop(r_plain, d_plain),
        "SACK {r_sack}/{d_sack} vs {r_plain}/{d_plain}"
    );
}
