//! Fuzz target for the daemon's reading of a client's shared-memory ring
//! (cm_ipc::shm): a client can write anything into its region at any time,
//! so every byte of the ring headers and data is untrusted.
//!
//! The input is split into writes over a fresh region (its first page of
//! headers, then the "to daemon" data area) made through the memfd, as a
//! client process would through its mapping. The daemon's end then pops
//! frames, publishes replies and takes doorbell and space requests.
//! Oracle: no panic, no fault, and every frame it accepts is at most
//! `MAX_FRAME` bytes and lies inside what the producer published.
#![no_main]

use cm_ipc::shm::{MIN_RING_BYTES, Region};
use libfuzzer_sys::fuzz_target;

/// Where the ring data starts (one page of headers before it).
const DATA: u64 = 4096;

fuzz_target!(|data: &[u8]| {
    let Ok(mut d) = Region::create(MIN_RING_BYTES) else {
        return;
    };
    let fd = d.fd().try_clone_to_owned().expect("dup the memfd");
    // The first 512 bytes cover both ring headers (positions, flags); the
    // rest lands at the start of the "to daemon" data area.
    let (hdr, body) = data.split_at(data.len().min(512));
    let _ = rustix::io::pwrite(&fd, hdr, 0);
    let _ = rustix::io::pwrite(&fd, &body[..body.len().min(64 * 1024)], DATA);
    let mut out = Vec::new();
    for _ in 0..64 {
        match d.pop(&mut out) {
            Ok(true) => assert!(out.len() <= cm_ipc::MAX_FRAME, "frame over MAX_FRAME"),
            Ok(false) | Err(_) => break,
        }
        let _ = d.take_peer_space();
    }
    let _ = d.push(b"reply");
    let _ = d.take_peer_wake();
    let _ = d.want_space(4096);
    let _ = d.arm();
    d.disarm();
});
