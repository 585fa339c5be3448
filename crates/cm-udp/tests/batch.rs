//! Batched UDP I/O on loopback: every send path and every receive path
//! delivers the same datagrams with their boundaries, and each fallback
//! happens when forced (GSO refused by the kernel, GRO off, a short
//! `sendmmsg`, no batching at all).
#![allow(clippy::unwrap_used)]
#![allow(unsafe_code)]

use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use cm_udp::{MAX_BATCH, Offload, RecvBatch, SendPath, UdpIo};

const SEG: usize = 1200;

/// A receive buffer big enough that a test's datagrams are not dropped.
fn big_rcvbuf(s: &UdpSocket) {
    let bytes: libc::c_int = 4 << 20;
    // SAFETY: the kernel reads one c_int from `bytes`.
    let r = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            (&raw const bytes).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    assert_eq!(r, 0);
}

/// SO_NO_CHECK (no transmit checksums): udp_send_skb then refuses GSO
/// with EINVAL, as it refuses a device that cannot segment with EIO.
fn no_check(io: &UdpIo) {
    let one: libc::c_int = 1;
    // SAFETY: the kernel reads one c_int from `one`.
    let r = unsafe {
        libc::setsockopt(
            io.socket().as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_NO_CHECK,
            (&raw const one).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    assert_eq!(r, 0);
}

fn pair(tx: Offload, rx: Offload) -> (UdpIo, UdpIo, SocketAddr) {
    let r = UdpSocket::bind("127.0.0.1:0").unwrap();
    big_rcvbuf(&r);
    let raddr = r.local_addr().unwrap();
    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    s.connect(raddr).unwrap();
    (
        UdpIo::with_offload(s, tx).unwrap(),
        UdpIo::with_offload(r, rx).unwrap(),
        raddr,
    )
}

/// `n` datagrams of SEG bytes (the last `last` bytes), each filled with
/// its index.
fn payload(n: usize, last: usize) -> Vec<u8> {
    let mut v = Vec::new();
    for i in 0..n {
        let len = if i + 1 == n { last } else { SEG };
        v.extend(std::iter::repeat_n(i as u8, len));
    }
    v
}

/// Everything that arrives within a second, until `want` datagrams.
fn drain(rx: &mut UdpIo, want: usize) -> Vec<Vec<u8>> {
    let mut batch = RecvBatch::new(64, 2048);
    let mut out = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(1);
    while out.len() < want && Instant::now() < deadline {
        match rx.recv(&mut batch) {
            Ok(_) => out.extend(batch.iter().map(|(_, d)| d.to_vec())),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(e) => panic!("recv: {e}"),
        }
    }
    out
}

fn check(got: &[Vec<u8>], n: usize, last: usize) {
    assert_eq!(got.len(), n, "datagrams received");
    for (i, d) in got.iter().enumerate() {
        let len = if i + 1 == n { last } else { SEG };
        assert_eq!(d.len(), len, "datagram {i} length");
        assert!(d.iter().all(|&b| b == i as u8), "datagram {i} contents");
    }
}

fn send_all(tx: &mut UdpIo, dst: Option<SocketAddr>, buf: &[u8]) -> usize {
    let mut at = 0;
    while at < buf.len() {
        let n = tx.send_segments(dst, &buf[at..], SEG).unwrap();
        at += n * SEG;
    }
    buf.len().div_ceil(SEG)
}

#[test]
fn gso_sends_a_run_in_few_calls_and_gro_hands_it_back_cut_apart() {
    let (mut tx, mut rx, _) = pair(Offload::ALL, Offload::ALL);
    assert_eq!(tx.send_path(), SendPath::Gso, "this kernel has UDP GSO");
    assert!(rx.gro(), "this kernel has UDP GRO");
    let buf = payload(50, 700);
    assert_eq!(send_all(&mut tx, None, &buf), 50);
    // 50 × 1200 B fit one GSO call (54 per 65,000 bytes).
    assert_eq!(tx.stats().send_calls, 1);
    assert_eq!(tx.stats().datagrams_sent, 50);
    check(&drain(&mut rx, 50), 50, 700);
    assert!(rx.stats().gro_buffers > 0, "{:?}", rx.stats());
    assert!(rx.stats().recv_calls < 50, "{:?}", rx.stats());
}

#[test]
fn a_run_fills_every_call_of_the_current_path() {
    let (mut tx, _rx, _) = pair(Offload::ALL, Offload::ALL);
    assert_eq!(tx.send_path(), SendPath::Gso);
    // 65,000 bytes of GSO: 54 of 1200 bytes, 53 of 1216, never over 64.
    assert_eq!(tx.run_len(1200), 54);
    assert_eq!(tx.run_len(1216), 53);
    assert_eq!(tx.run_len(100), MAX_BATCH);
    assert_eq!(tx.run_len(0), MAX_BATCH);
    assert_eq!(tx.run_len(70_000), 1);
    tx.restrict(Offload {
        gso: false,
        ..Offload::ALL
    });
    assert_eq!(tx.run_len(1216), MAX_BATCH, "one sendmmsg");
    tx.restrict(Offload::NONE);
    assert_eq!(tx.run_len(1216), MAX_BATCH, "as many calls of one");
}

#[test]
fn without_gso_sendmmsg_batches_and_without_gro_each_datagram_has_its_buffer() {
    let tx_off = Offload {
        gso: false,
        ..Offload::ALL
    };
    let rx_off = Offload {
        gro: false,
        ..Offload::ALL
    };
    let (mut tx, mut rx, _) = pair(tx_off, rx_off);
    assert_eq!(tx.send_path(), SendPath::Mmsg);
    assert!(!rx.gro());
    let buf = payload(100, SEG);
    assert_eq!(send_all(&mut tx, None, &buf), 100);
    assert_eq!(tx.stats().send_calls, 2, "64 + 36 per sendmmsg");
    check(&drain(&mut rx, 100), 100, SEG);
    assert_eq!(rx.stats().gro_buffers, 0);
}

#[test]
fn with_no_batching_every_datagram_is_its_own_call() {
    let (mut tx, mut rx, _) = pair(Offload::NONE, Offload::NONE);
    assert_eq!(tx.send_path(), SendPath::Single);
    let buf = payload(20, 1);
    assert_eq!(send_all(&mut tx, None, &buf), 20);
    assert_eq!(tx.stats().send_calls, 20);
    check(&drain(&mut rx, 20), 20, 1);
    assert_eq!(rx.stats().recv_calls, 20, "one datagram per receive");
}

#[test]
fn a_gso_send_the_kernel_refuses_goes_by_sendmmsg_and_gso_stays_off() {
    let (mut tx, mut rx, _) = pair(Offload::ALL, Offload::ALL);
    no_check(&tx);
    assert_eq!(tx.send_path(), SendPath::Gso);
    let buf = payload(30, SEG);
    assert_eq!(send_all(&mut tx, None, &buf), 30);
    assert_eq!(tx.stats().gso_refused, 1);
    assert_eq!(tx.send_path(), SendPath::Mmsg);
    check(&drain(&mut rx, 30), 30, SEG);
    // Later sends do not try GSO again.
    assert_eq!(send_all(&mut tx, None, &payload(5, SEG)), 5);
    assert_eq!(tx.stats().gso_refused, 1);
}

/// `payload(n, last)` cut into one buffer per datagram.
fn pieces(buf: &[u8]) -> Vec<&[u8]> {
    buf.chunks(SEG).collect()
}

#[test]
fn separate_buffers_of_one_size_go_as_one_gso_send_with_their_boundaries() {
    let (mut tx, mut rx, _) = pair(Offload::ALL, Offload::ALL);
    let buf = payload(40, 300);
    assert_eq!(tx.send_datagrams(None, &pieces(&buf)).unwrap(), 40);
    assert_eq!(tx.stats().send_calls, 1, "one iovec per datagram, one call");
    check(&drain(&mut rx, 40), 40, 300);
    // Mixed sizes cannot be one GSO run: sendmmsg, in order.
    let mixed: Vec<Vec<u8>> = (0..5u8)
        .map(|i| vec![i; 100 + usize::from(i) * 10])
        .collect();
    let refs: Vec<&[u8]> = mixed.iter().map(Vec::as_slice).collect();
    assert_eq!(tx.send_datagrams(None, &refs).unwrap(), 5);
    assert_eq!(tx.stats().send_calls, 2);
    assert_eq!(drain(&mut rx, 5), mixed);
    assert_eq!(
        tx.send_path(),
        SendPath::Gso,
        "mixed sizes are not a refusal"
    );
}

#[test]
fn separate_buffers_the_kernel_refuses_to_segment_go_by_sendmmsg() {
    let (mut tx, mut rx, _) = pair(Offload::ALL, Offload::ALL);
    no_check(&tx);
    let buf = payload(30, SEG);
    assert_eq!(tx.send_datagrams(None, &pieces(&buf)).unwrap(), 30);
    assert_eq!(tx.stats().gso_refused, 1);
    assert_eq!(tx.send_path(), SendPath::Mmsg);
    check(&drain(&mut rx, 30), 30, SEG);
}

#[test]
fn restricting_a_socket_turns_paths_off_and_never_on() {
    let (mut tx, mut rx, _) = pair(Offload::ALL, Offload::ALL);
    tx.restrict(Offload {
        gso: false,
        ..Offload::ALL
    });
    assert_eq!(tx.send_path(), SendPath::Mmsg);
    let buf = payload(10, SEG);
    assert_eq!(tx.send_datagrams(None, &pieces(&buf)).unwrap(), 10);
    assert_eq!(tx.stats().send_calls, 1, "one sendmmsg");
    rx.restrict(Offload {
        gro: false,
        ..Offload::ALL
    });
    assert!(!rx.gro());
    let got = drain(&mut rx, 10);
    check(&got, 10, SEG);
    assert_eq!(rx.stats().gro_buffers, 0, "GRO is off");
    tx.restrict(Offload::NONE);
    assert_eq!(tx.send_path(), SendPath::Single);
    tx.restrict(Offload::ALL);
    assert_eq!(tx.send_path(), SendPath::Single, "never turned back on");
    assert_eq!(tx.send_datagrams(None, &pieces(&buf)).unwrap(), 10);
    assert_eq!(tx.stats().send_calls, 11, "then one call per datagram");
    check(&drain(&mut rx, 10), 10, SEG);
}

/// A batch whose third datagram the kernel refuses (port 0 is EINVAL):
/// `sendmmsg` returns 2, the caller's retry from there gets the error, and
/// the rest go on the next call.
fn short_batch(offload: Offload) {
    let r = UdpSocket::bind("127.0.0.1:0").unwrap();
    let to = r.local_addr().unwrap();
    let mut rx = UdpIo::with_offload(r, Offload::ALL).unwrap();
    let mut tx = UdpIo::with_offload(UdpSocket::bind("127.0.0.1:0").unwrap(), offload).unwrap();
    let bad: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let d: Vec<Vec<u8>> = (0..5u8).map(|i| vec![i; 100 + usize::from(i)]).collect();
    let msgs: Vec<(Option<SocketAddr>, &[u8])> = vec![
        (Some(to), &d[0]),
        (Some(to), &d[1]),
        (Some(bad), &d[2]),
        (Some(to), &d[3]),
        (Some(to), &d[4]),
    ];
    assert_eq!(tx.send_each(&msgs).unwrap(), 2);
    let e = tx.send_each(&msgs[2..]).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EINVAL), "{e}");
    assert_eq!(tx.send_each(&msgs[3..]).unwrap(), 2);
    let got = drain(&mut rx, 4);
    let want: Vec<Vec<u8>> = [0, 1, 3, 4].iter().map(|&i| d[i].clone()).collect();
    assert_eq!(got, want);
}

#[test]
fn a_short_sendmmsg_reports_what_went() {
    short_batch(Offload::ALL);
}

#[test]
fn one_call_per_datagram_stops_at_the_first_refusal_too() {
    short_batch(Offload::NONE);
}

#[test]
fn datagrams_from_several_senders_keep_their_sources() {
    let r = UdpSocket::bind("127.0.0.1:0").unwrap();
    let to = r.local_addr().unwrap();
    let mut rx = UdpIo::with_offload(r, Offload::ALL).unwrap();
    let a = UdpSocket::bind("127.0.0.1:0").unwrap();
    let b = UdpSocket::bind("127.0.0.1:0").unwrap();
    let (aa, ba) = (a.local_addr().unwrap(), b.local_addr().unwrap());
    let mut a = UdpIo::with_offload(a, Offload::ALL).unwrap();
    let mut b = UdpIo::with_offload(b, Offload::ALL).unwrap();
    a.send_segments(Some(to), &payload(10, SEG), SEG).unwrap();
    b.send_segments(Some(to), &[7u8; 300], SEG).unwrap();
    let mut batch = RecvBatch::new(64, 2048);
    let mut from = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(1);
    while from.len() < 11 && Instant::now() < deadline {
        if rx.recv(&mut batch).is_ok() {
            from.extend(batch.datagrams().iter().map(|d| d.from.unwrap()));
        }
    }
    assert_eq!(from.iter().filter(|&&f| f == aa).count(), 10);
    assert_eq!(from.iter().filter(|&&f| f == ba).count(), 1);
}

#[test]
fn nothing_waiting_is_would_block_and_a_bad_setting_is_named() {
    let (_, mut rx, _) = pair(Offload::ALL, Offload::ALL);
    let mut batch = RecvBatch::new(4, 2048);
    let e = rx.recv(&mut batch).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::WouldBlock);
    assert_eq!(
        Offload::parse("no-gso, no-gro").unwrap(),
        Offload {
            gso: false,
            gro: false,
            mmsg: true
        }
    );
    assert_eq!(Offload::parse("").unwrap(), Offload::ALL);
    let e = Offload::parse("gso-off").unwrap_err();
    assert!(e.contains("gso-off") && e.contains("no-gso"), "{e}");
}

#[test]
fn a_short_batch_says_the_socket_was_empty() {
    let no_gro = Offload {
        gro: false,
        ..Offload::ALL
    };
    let (mut tx, mut rx, _) = pair(Offload::ALL, no_gro);
    send_all(&mut tx, None, &payload(3, SEG));
    std::thread::sleep(Duration::from_millis(20));
    let mut two = RecvBatch::new(2, 2048);
    assert_eq!(rx.recv(&mut two).unwrap(), 2);
    assert!(
        two.filled_all(),
        "two waiting of three: both buffers filled"
    );
    assert_eq!(rx.recv(&mut two).unwrap(), 1);
    assert!(!two.filled_all(), "the last one: the socket is empty");
}
