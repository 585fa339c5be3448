//! TCP/CM with SACK over a lossy loopback relay (`common::Relay`, shared
//! with `loopback.rs`): the transfer is exact, and SACK retransmits less than
//! the same transfer without it.
#![allow(clippy::unwrap_used)]

mod common;

use std::net::SocketAddr;

use cm_ttcp::{Receiver, ReceiverHandle, ReceiverOptions, SendSpec, Transport, cm_config, send};
use common::Relay;
use libcm::Cm;

const KB500: u64 = 500_000;

fn any() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

fn receiver() -> (SocketAddr, ReceiverHandle) {
    let rx = Receiver::bind(any(), &Transport::TcpCm, ReceiverOptions::default()).unwrap();
    (rx.local_addr(), rx.spawn())
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
