//! `CcUdpSocket::send_batch` and `send_batch_with` (payloads written in
//! place) over loopback: payloads of one size (a GSO run) and of mixed
//! sizes (`sendmmsg`) arrive exact and in order, every
//! datagram is accounted for, an oversized payload is refused before
//! anything is queued; and the same holds with cm-udp's batching turned
//! off (`CM_UDP_OFFLOAD=none`, in a child process of this test binary).

#![allow(clippy::unwrap_used)]

use std::cell::RefCell;
use std::io::ErrorKind;
use std::rc::Rc;
use std::time::{Duration, Instant};

use libcm::ccudp::{CcUdpSocket, SharedCm};
use libcm::{Cm, Config};

const LOCAL: &str = "127.0.0.1:0";
const N: usize = 3000;

fn shared() -> SharedCm {
    Rc::new(RefCell::new(Cm::embedded(Config::default()).unwrap()))
}

/// Payload `i`: its index, then bytes that depend on it. The first half
/// are all 1200 bytes (GSO runs), the second half of mixed sizes.
fn payload(i: usize) -> Vec<u8> {
    let len = if i < N / 2 { 1196 } else { (i * 37) % 1397 };
    let mut v = (i as u32).to_be_bytes().to_vec();
    v.extend((0..len).map(|j| (i * 7 + j) as u8));
    v
}

#[test]
fn batches_arrive_exact_and_in_order() {
    let cm_b = shared();
    let mut b = CcUdpSocket::bind(&cm_b, LOCAL).unwrap();
    let _ = rustix::net::sockopt::set_socket_recv_buffer_size(&b, 4 << 20);
    let cm_a = shared();
    let mut a = CcUdpSocket::bind(&cm_a, LOCAL).unwrap();
    a.connect(b.local_addr().unwrap()).unwrap();
    b.connect(a.local_addr().unwrap()).unwrap();
    // An oversized payload anywhere in a batch: refused, nothing queued.
    let big = vec![0u8; a.max_payload().unwrap() + 1];
    let e = a.send_batch(&[&payload(0), &big]).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e}");
    assert_eq!(a.stats().sent + a.stats().queued, 0);
    assert_eq!(a.send_batch(&[]).unwrap(), 0);

    let payloads: Vec<Vec<u8>> = (0..N).map(payload).collect();
    let (mut next, mut got, mut last) = (0, 0usize, None::<usize>);
    let mut round = 0u64;
    let mut buf = vec![0u8; 2048];
    b.set_nonblocking(true).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while (next < N || got < N) && Instant::now() < deadline {
        if next < N {
            let end = (next + 64).min(N);
            round += 1;
            if round % 2 == 0 {
                let batch: Vec<&[u8]> = payloads[next..end].iter().map(Vec::as_slice).collect();
                next += a.send_batch(&batch).unwrap();
            } else {
                // Written in place, into buffers that held earlier datagrams.
                let base = next;
                let lens: Vec<usize> = payloads[next..end].iter().map(Vec::len).collect();
                next += a
                    .send_batch_with(&lens, |i, b| b.copy_from_slice(&payloads[base + i]))
                    .unwrap();
            }
        } else {
            a.drive().unwrap();
        }
        loop {
            match b.recv(&mut buf) {
                Ok(n) => {
                    let idx = u32::from_be_bytes(buf[..4].try_into().unwrap()) as usize;
                    assert_eq!(&buf[..n], &payloads[idx][..], "payload {idx}");
                    assert!(last.is_none_or(|l| idx > l), "{idx} after {last:?}");
                    last = Some(idx);
                    got += 1;
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) => panic!("recv: {e}"),
            }
        }
        if last == Some(N - 1) {
            break;
        }
    }
    // Let the last acks come back.
    let until = Instant::now() + Duration::from_millis(300);
    while Instant::now() < until {
        a.drive().unwrap();
        let _ = b.recv(&mut buf);
        std::thread::sleep(Duration::from_millis(1));
    }
    let s = a.stats();
    eprintln!(
        "sent {} acked {} lost {} received {got}",
        s.sent, s.acked, s.lost
    );
    assert_eq!(next, N, "every payload queued");
    assert_eq!(s.sent, N as u64, "every payload left the socket");
    assert_eq!(s.acked + s.lost, s.sent, "{s:?}");
    assert_eq!(s.acked + s.spurious, b.stats().received);
    assert!(got >= N * 9 / 10, "only {got} of {N} arrived");
}

#[test]
fn batches_arrive_exact_without_offload() {
    if std::env::var_os("CM_UDP_OFFLOAD").is_some() {
        return; // the child itself
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .env("CM_UDP_OFFLOAD", "none")
        .args([
            "--exact",
            "batches_arrive_exact_and_in_order",
            "--nocapture",
        ])
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("1 passed"), "{text}");
}
