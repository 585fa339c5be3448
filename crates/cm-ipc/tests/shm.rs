//! The shared-memory rings: order, wrap-around, full rings, doorbells
//! without lost wake-ups across threads, and a hostile peer scribbling over
//! the region.
#![allow(clippy::unwrap_used)]

use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use cm_ipc::shm::{Doorbell, MIN_RING_BYTES, Region, RingError, Side};
use proptest::prelude::*;
use rustix::event::{PollFd, PollFlags, Timespec, poll};

fn pair(ring: u32) -> (Region, Region) {
    let d = Region::create(ring).unwrap();
    let fd = d.fd().try_clone_to_owned().unwrap();
    let c = Region::open(fd, Side::Client).unwrap();
    (d, c)
}

fn frame(i: u32, len: usize) -> Vec<u8> {
    let mut v = i.to_le_bytes().to_vec();
    v.resize(len.max(4), (i % 251) as u8);
    v
}

#[test]
fn frames_arrive_in_order_across_many_wraps() {
    let (mut d, mut c) = pair(MIN_RING_BYTES);
    let mut out = Vec::new();
    let mut sent = 0u32;
    let mut got = 0u32;
    // Sizes that do not divide the ring: records wrap at every offset.
    let sizes = [4usize, 7, 13, 64, 300, 1201, 4099, 65_536];
    while got < 5_000 {
        // Fill until full, then drain half: both ends cross the wrap.
        loop {
            let f = frame(sent, sizes[sent as usize % sizes.len()]);
            if !c.push(&f).unwrap() {
                break;
            }
            sent += 1;
        }
        for _ in 0..(sent - got).div_ceil(2) {
            assert!(d.pop(&mut out).unwrap());
            assert_eq!(out, frame(got, sizes[got as usize % sizes.len()]));
            got += 1;
        }
    }
    while d.pop(&mut out).unwrap() {
        assert_eq!(out, frame(got, sizes[got as usize % sizes.len()]));
        got += 1;
    }
    assert_eq!(got, sent);
    assert!(!d.pending());
}

#[test]
fn every_length_arrives_byte_exact() {
    // Whole words and every tail length, each byte distinct from its
    // neighbours, so a word copied short, long or shifted shows.
    let (mut d, mut c) = pair(MIN_RING_BYTES);
    let mut out = Vec::new();
    for len in 0..=41usize {
        let f: Vec<u8> = (0..len).map(|k| (k * 31 + len * 7 + 1) as u8).collect();
        assert!(c.push(&f).unwrap());
        assert!(d.pop(&mut out).unwrap());
        assert_eq!(out, f, "length {len}");
    }
    assert!(!d.pop(&mut out).unwrap());
}

/// A ring that the consumer keeps emptying starts again from its beginning,
/// so its memory stays a few pages however much passes through it (the
/// region is a memfd: its allocated blocks are the pages ever touched).
#[test]
fn an_emptied_ring_reuses_its_first_pages() {
    let (mut d, mut c) = pair(MIN_RING_BYTES);
    let mut out = Vec::new();
    let mut passed = 0usize;
    for i in 0..20_000u32 {
        // Two or three frames at a time, then the consumer catches up.
        let n = 2 + i % 2;
        for k in 0..n {
            assert!(
                c.push(&frame(i * 3 + k, 200 + (i as usize % 97))).unwrap(),
                "i {i} k {k}"
            );
        }
        for k in 0..n {
            assert!(d.pop(&mut out).unwrap());
            assert_eq!(out, frame(i * 3 + k, 200 + (i as usize % 97)));
            passed += out.len();
        }
    }
    assert!(
        passed > 20 * MIN_RING_BYTES as usize,
        "{passed} bytes passed"
    );
    let st = rustix::fs::fstat(d.fd()).unwrap();
    let resident = st.st_blocks as usize * 512;
    // The header page and the ring's first 16 KiB and a record (without
    // the rewind: all of one ring, 132 KiB).
    assert!(
        resident <= 8 * 4096,
        "{resident} bytes of the region touched"
    );
}

#[test]
fn both_directions_are_independent() {
    let (mut d, mut c) = pair(MIN_RING_BYTES);
    let mut out = Vec::new();
    assert!(c.push(b"call").unwrap());
    assert!(d.push(b"grant").unwrap());
    assert!(c.pop(&mut out).unwrap());
    assert_eq!(out, b"grant");
    assert!(d.pop(&mut out).unwrap());
    assert_eq!(out, b"call");
    assert!(!c.pop(&mut out).unwrap() && !d.pop(&mut out).unwrap());
}

#[test]
fn a_frame_larger_than_the_ring_is_refused() {
    let (_d, mut c) = pair(MIN_RING_BYTES);
    let big = vec![0u8; 2 * MIN_RING_BYTES as usize];
    assert!(matches!(c.push(&big), Err(RingError::TooLarge(_))));
}

#[test]
fn a_full_ring_asks_for_space_and_is_told() {
    let (mut d, mut c) = pair(MIN_RING_BYTES);
    let f = vec![7u8; 1000];
    while c.push(&f).unwrap() {}
    assert!(!c.want_space(f.len()).unwrap(), "still full");
    let mut out = Vec::new();
    assert!(d.pop(&mut out).unwrap());
    assert!(d.take_peer_space(), "the producer asked for space");
    assert!(!d.take_peer_space(), "the request is taken once");
    assert!(c.push(&f).unwrap());
}

#[test]
fn doorbell_requests_are_taken_once() {
    let (d, mut c) = pair(MIN_RING_BYTES);
    assert!(d.arm(), "empty ring: safe to sleep");
    assert!(c.push(b"x").unwrap());
    assert!(c.take_peer_wake());
    assert!(!c.take_peer_wake(), "rung once per request");
    assert!(!d.armed());
    assert!(!d.arm(), "a frame waits: do not sleep");
    d.disarm();
    assert!(c.push(b"y").unwrap());
    assert!(
        !c.take_peer_wake(),
        "a consumer that is not asleep costs no doorbell"
    );
}

#[test]
fn region_checks_what_it_maps() {
    // Not a region: an empty memfd, then one of the right size but no magic.
    let fd = rustix::fs::memfd_create("x", rustix::fs::MemfdFlags::CLOEXEC).unwrap();
    assert!(matches!(
        Region::open(fd.try_clone().unwrap(), Side::Client),
        Err(RingError::BadRegion("size"))
    ));
    rustix::fs::ftruncate(&fd, 4096 + 2 * u64::from(MIN_RING_BYTES)).unwrap();
    assert!(matches!(
        Region::open(fd, Side::Client),
        Err(RingError::BadRegion("magic"))
    ));
}

#[test]
fn the_region_cannot_be_resized_by_the_peer() {
    let (d, _c) = pair(MIN_RING_BYTES);
    assert!(
        rustix::fs::ftruncate(d.fd(), 4096).is_err(),
        "sealed against shrinking"
    );
    assert!(
        rustix::fs::ftruncate(d.fd(), 1 << 30).is_err(),
        "sealed against growing"
    );
}

fn wait(bell: &Doorbell, ms: u64) {
    let ts = Timespec {
        tv_sec: 0,
        tv_nsec: (ms * 1_000_000) as i64,
    };
    let mut p = [PollFd::new(bell, PollFlags::IN)];
    let _ = poll(&mut p, Some(&ts));
}

/// Two threads, each sleeping whenever its ring is empty: every frame
/// arrives, in order, and no wake-up is lost (a lost one would stall the
/// run for the 1 s poll timeout; the test allows far less per frame).
#[test]
fn no_wake_up_is_lost_between_threads() {
    const N: u32 = 200_000;
    let (mut d, mut c) = pair(MIN_RING_BYTES);
    let d_bell = Doorbell::new().unwrap();
    let c_bell = Doorbell::new().unwrap();
    let d_ring = Doorbell::from_fd(d_bell.as_fd().try_clone_to_owned().unwrap());
    let c_ring = Doorbell::from_fd(c_bell.as_fd().try_clone_to_owned().unwrap());
    let t0 = Instant::now();
    let consumer = std::thread::spawn(move || {
        let mut out = Vec::new();
        let mut next = 0u32;
        let mut sleeps = 0u32;
        let mut stalls = 0u32;
        while next < N {
            if d.pop(&mut out).unwrap() {
                assert_eq!(out, frame(next, 8 + next as usize % 200));
                next += 1;
                if d.take_peer_space() {
                    c_ring.ring().unwrap();
                }
                continue;
            }
            if d.arm() {
                sleeps += 1;
                let t = Instant::now();
                wait(&d_bell, 1000);
                if t.elapsed() > Duration::from_millis(500) {
                    stalls += 1;
                }
                d_bell.clear();
            }
            d.disarm();
        }
        (sleeps, stalls)
    });
    for i in 0..N {
        let f = frame(i, 8 + i as usize % 200);
        loop {
            if c.push(&f).unwrap() {
                break;
            }
            if !c.want_space(f.len()).unwrap() {
                wait(&c_bell, 1000);
                c_bell.clear();
            }
        }
        if c.take_peer_wake() {
            d_ring.ring().unwrap();
        }
    }
    let (sleeps, stalls) = consumer.join().unwrap();
    assert_eq!(stalls, 0, "a wake-up was lost ({sleeps} sleeps)");
    assert!(t0.elapsed() < Duration::from_secs(30));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    /// A peer that writes anything anywhere in the region (headers, data,
    /// positions) never makes the other side panic or read out of bounds:
    /// it gets frames or `Corrupt`, and once corrupt it stays an error or
    /// an empty ring, never a crash.
    #[test]
    fn a_hostile_peer_gets_errors_not_crashes(
        writes in proptest::collection::vec((0usize..4096 + 2 * MIN_RING_BYTES as usize, any::<u64>()), 1..64),
        frames in 0usize..20,
    ) {
        let (mut d, mut c) = pair(MIN_RING_BYTES);
        for i in 0..frames {
            let _ = c.push(&frame(i as u32, 50 + i * 37));
        }
        // Scribble through a second mapping of the same memfd, as a
        // client process would.
        let fd = d.fd().try_clone_to_owned().unwrap();
        let len = 4096 + 2 * MIN_RING_BYTES as usize;
        scribble(&fd, len, &writes);
        let mut out = Vec::new();
        for _ in 0..64 {
            if let Ok(true) = d.pop(&mut out) {
                prop_assert!(out.len() <= cm_ipc::MAX_FRAME);
            }
            let _ = d.push(b"reply");
            let _ = d.take_peer_wake();
            let _ = d.take_peer_space();
            let _ = d.want_space(8);
        }
    }
}

/// Write `writes` (offset, u64) into the region through the memfd itself,
/// as a client process could through its own mapping.
fn scribble(fd: &std::os::fd::OwnedFd, len: usize, writes: &[(usize, u64)]) {
    for &(at, v) in writes {
        let at = at.min(len - 8) & !7;
        rustix::io::pwrite(fd, &v.to_le_bytes(), at as u64).unwrap();
    }
}
