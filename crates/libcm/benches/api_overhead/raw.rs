//! The raw-UDP baseline and what every variant shares with it: the
//! receiver that echoes each datagram's first 8 bytes (its sequence
//! number) as the ack, the sender's socket and datagrams, waiting and
//! draining acks; and kernel TCP for reference.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration as StdDuration, Instant};

use rustix::event::{PollFd, PollFlags, Timespec, poll};

use crate::placement::{LOST, pin_to};
use crate::{ACK, W};

pub struct Receiver {
    pub addr: std::net::SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Receiver {
    /// Acknowledge every datagram with its sequence number.
    /// Each receiver listens on an address of its own in 127/8, so that
    /// every run through the daemon starts with a fresh macroflow (the CM
    /// keys macroflows by destination host and keeps a closed one's state
    /// for 10 minutes): one variant's window, RTT and aging must not carry
    /// into the next, as nothing carries between embedded runs either.
    pub fn start() -> Receiver {
        static RUNS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let k = RUNS.fetch_add(1, Ordering::Relaxed);
        let ip = std::net::Ipv4Addr::new(127, 0, ((k / 250) % 256) as u8, (2 + k % 250) as u8);
        let sock = UdpSocket::bind((ip, 0)).unwrap();
        sock.set_read_timeout(Some(StdDuration::from_millis(50)))
            .unwrap();
        let addr = sock.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let s2 = stop.clone();
        let thread = std::thread::spawn(move || {
            pin_to(1);
            let mut buf = [0u8; 2048];
            while !s2.load(Ordering::Relaxed) {
                if let Ok((n, from)) = sock.recv_from(&mut buf) {
                    if n >= ACK {
                        let _ = sock.send_to(&buf[..ACK], from);
                    }
                }
            }
        });
        Receiver {
            addr,
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

pub fn sender_socket(rx: &Receiver) -> UdpSocket {
    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    s.connect(rx.addr).unwrap();
    s.set_nonblocking(true).unwrap();
    s
}

pub fn packet(seq: u64, size: usize, buf: &mut Vec<u8>) {
    buf.clear();
    buf.extend_from_slice(&seq.to_le_bytes());
    buf.resize(size, 0);
}

/// Block until `sock` (or `extra`) is readable or `timeout` passes.
pub fn wait_readable(
    sock: &UdpSocket,
    extra: Option<std::os::fd::BorrowedFd<'_>>,
    timeout: StdDuration,
) {
    let ts = Timespec {
        tv_sec: timeout.as_secs() as i64,
        tv_nsec: i64::from(timeout.subsec_nanos()),
    };
    match extra {
        Some(fd) => {
            let mut fds = [
                PollFd::new(sock, PollFlags::IN),
                PollFd::new(&fd, PollFlags::IN),
            ];
            let _ = poll(&mut fds, Some(&ts));
        }
        None => {
            let mut fds = [PollFd::new(sock, PollFlags::IN)];
            let _ = poll(&mut fds, Some(&ts));
        }
    }
}

/// Read every ack waiting; call `f(seq)` for each.
pub fn drain_acks(sock: &UdpSocket, mut f: impl FnMut(u64)) -> usize {
    let mut buf = [0u8; 64];
    let mut n = 0;
    while let Ok(len) = sock.recv(&mut buf) {
        if len >= ACK {
            f(u64::from_le_bytes(buf[..8].try_into().unwrap()));
            n += 1;
        }
    }
    n
}

/// Raw UDP, the baseline.
pub fn run_raw(n: u64, size: usize) -> StdDuration {
    let rx = Receiver::start();
    let sock = sender_socket(&rx);
    let mut buf = Vec::new();
    let (mut next, mut acked) = (0u64, 0u64);
    let t0 = Instant::now();
    while acked < n {
        while next < n && next - acked < W {
            packet(next, size, &mut buf);
            if sock.send(&buf).is_err() {
                break;
            }
            next += 1;
        }
        let got = drain_acks(&sock, |_| {});
        if got == 0 {
            wait_readable(&sock, None, StdDuration::from_millis(200));
            if drain_acks(&sock, |_| acked += 1) == 0 {
                LOST.fetch_add(next - acked, Ordering::Relaxed);
                acked = next; // lost on loopback: move on
            }
        } else {
            acked += got as u64;
        }
    }
    t0.elapsed()
}

/// Kernel TCP with the same acknowledged window (reference).
pub fn run_tcp(n: u64, size: usize) -> StdDuration {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let srv = std::thread::spawn(move || {
        pin_to(1);
        let (mut c, _) = l.accept().unwrap();
        c.set_nodelay(true).unwrap();
        let mut buf = vec![0u8; size];
        for _ in 0..n {
            if c.read_exact(&mut buf).is_err() {
                return;
            }
            let _ = c.write_all(&buf[..ACK]);
        }
    });
    let mut c = TcpStream::connect(addr).unwrap();
    c.set_nodelay(true).unwrap();
    let mut r = c.try_clone().unwrap();
    let mut buf = Vec::new();
    let mut ack = [0u8; ACK];
    let (mut next, mut acked) = (0u64, 0u64);
    let t0 = Instant::now();
    while acked < n {
        while next < n && next - acked < W {
            packet(next, size, &mut buf);
            c.write_all(&buf).unwrap();
            next += 1;
        }
        r.read_exact(&mut ack).unwrap();
        acked += 1;
    }
    let e = t0.elapsed();
    srv.join().unwrap();
    e
}
