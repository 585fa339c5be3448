//! Shared by the loopback tests: a lossy UDP relay between a TCP/CM
//! sender and its receiver, and file contents that are neither zeros nor
//! periodic.
#![allow(clippy::unwrap_used, dead_code)]

use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use cm_transport::{Datagram, TcpSegment};

/// `n` bytes of an xorshift stream from `seed` (non-zero): contents a
/// transfer cannot get right by accident (not zeros, not periodic).
pub fn noise(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

fn any() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
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
pub struct Relay {
    /// Where the sender sends (the relay's front).
    pub addr: SocketAddr,
    stop: Arc<AtomicBool>,
    dropped: Arc<AtomicU64>,
    sack_acks: Arc<AtomicU64>,
    threads: Vec<JoinHandle<()>>,
}

impl Relay {
    /// Relay to `to`, dropping `drop_per_mille` of the data segments
    /// (seeded xorshift).
    pub fn start(to: SocketAddr, drop_per_mille: u64, seed: u64) -> Relay {
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
    pub fn stop(self) -> (u64, u64) {
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
