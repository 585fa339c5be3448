//! CC-UDP transfers on loopback: the receiver CM answers the probes (no
//! application acks), a receiver without one makes the sender run on
//! CC-UDP's acks, a receiver that loses its CM state mid-transfer is
//! resynchronised with, a sender with nobody listening gives up, and a
//! file's bytes (written in place into the CM's queue) arrive intact.
#![allow(clippy::unwrap_used)]

mod common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use cm_ttcp::{
    CcUdpReceiverOptions, Receiver, ReceiverOptions, SendSpec, Transport, TtcpError, send,
};

const MB2: u64 = 2_000_000;

fn receiver(o: CcUdpReceiverOptions) -> (SocketAddr, cm_ttcp::ReceiverHandle) {
    let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let opts = ReceiverOptions {
        ccudp: o,
        ..ReceiverOptions::default()
    };
    let rx = Receiver::bind(any, &Transport::CcUdp, opts).unwrap();
    (rx.local_addr(), rx.spawn())
}

#[test]
fn ccudp_transfer_runs_on_probes() {
    let (dst, rx) = receiver(CcUdpReceiverOptions::default());
    let spec = SendSpec::new(dst, MB2, Transport::CcUdp).progress(Duration::from_millis(20));
    let s = send(&spec, None).unwrap();
    let d = s.ccudp.clone().unwrap();
    eprintln!("{s}\n{d:#?}", d = CcUdpDetailShort(&d));
    assert!(s.complete && d.drained, "{s}");
    assert_eq!(d.state, "negotiated");
    assert!(d.probes > 0 && d.responses > 0, "{d:?}");
    assert!(d.cm_sent > 0);
    // Loopback loses nothing: the receiver got every byte.
    assert_eq!(d.receiver_bytes, Some(MB2));
    assert_eq!(s.bytes, MB2);
    assert_eq!(s.progress.last().unwrap().bytes, MB2);
    assert_eq!(s.transport.name(), "ccudp");
    assert!(s.to_string().starts_with("ccudp 2.0 MB in "), "{s}");
    let got = rx.stop().unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].bytes, MB2);
    assert!(got[0].complete);
}

#[test]
fn ccudp_without_receiver_cm_runs_on_acks() {
    let (dst, rx) = receiver(CcUdpReceiverOptions {
        cm_protocol: false,
        restart_after: None,
    });
    let s = send(&SendSpec::new(dst, MB2, Transport::CcUdp), None).unwrap();
    let d = s.ccudp.clone().unwrap();
    assert!(s.complete && d.drained, "{s}");
    // SYNs unanswered: still handshaking (fallback comes after 1+2+4 s).
    assert_ne!(d.state, "negotiated");
    assert_eq!((d.cm_sent, d.responses), (0, 0), "{d:?}");
    assert!(d.acks_received > 0);
    assert_eq!(s.bytes, MB2);
    rx.stop().unwrap();
}

#[test]
fn ccudp_receiver_restart_is_resynchronised() {
    let (dst, rx) = receiver(CcUdpReceiverOptions {
        cm_protocol: true,
        restart_after: Some(MB2 / 2),
    });
    let s = send(&SendSpec::new(dst, 2 * MB2, Transport::CcUdp), None).unwrap();
    let d = s.ccudp.clone().unwrap();
    eprintln!("{s}\n{d:?}", d = CcUdpDetailShort(&d));
    assert!(s.complete && d.drained, "{s}");
    assert_eq!(d.receiver_restarts, 1);
    assert!(d.resets >= 1, "{d:?}");
    assert_eq!(d.state, "negotiated");
    rx.stop().unwrap();
}

#[test]
fn ccudp_with_nobody_listening_is_unreachable() {
    // A port nobody listens on: HELLO is refused until the connect timeout.
    let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let dst = sock.local_addr().unwrap();
    drop(sock);
    let spec =
        SendSpec::new(dst, 1000, Transport::CcUdp).connect_timeout(Duration::from_millis(600));
    let t = Instant::now();
    let e = send(&spec, None).unwrap_err();
    assert!(matches!(e, TtcpError::Unreachable { .. }), "{e}");
    assert!(t.elapsed() < Duration::from_secs(3));
}

/// The detail without its samples, for messages.
struct CcUdpDetailShort<'a>(&'a cm_ttcp::CcUdpDetail);

impl std::fmt::Debug for CcUdpDetailShort<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut d = self.0.clone();
        d.sent_progress.clear();
        write!(f, "{d:?}")
    }
}

/// A file's bytes are written in place into the CM's queue (the payload
/// of a reused buffer is overwritten, the shorter last datagram too) and
/// arrive intact: loopback loses nothing and keeps the order.
#[test]
fn a_file_crosses_loopback_intact_over_ccudp() {
    let dir = std::env::temp_dir().join(format!("cm-ttcp-ccudp-file-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let input = dir.join("in.bin");
    let data = common::noise(1_500_001, 0x2545_f491_4f6c_dd1d);
    std::fs::write(&input, &data).unwrap();
    let output = dir.join("out.bin");
    let opts = ReceiverOptions {
        output: Some(output.clone()),
        ..ReceiverOptions::default()
    };
    let rx = Receiver::bind("127.0.0.1:0".parse().unwrap(), &Transport::CcUdp, opts).unwrap();
    let dst = rx.local_addr();
    let rx = rx.spawn();
    let s = send(
        &SendSpec::file(dst, &input, Transport::CcUdp).unwrap(),
        None,
    )
    .unwrap();
    assert!(s.complete, "{s}");
    assert_eq!(s.bytes, data.len() as u64);
    let got = rx.stop().unwrap();
    assert_eq!(got[0].bytes, data.len() as u64);
    assert!(std::fs::read(&output).unwrap() == data, "the file differs");
    std::fs::remove_dir_all(&dir).unwrap();
}
