//! Loopback transfers: TCP/CM in both libcm modes, Linux TCP, an ensemble
//! sharing one macroflow, window inheritance, a lossy relay, bad input.
#![allow(clippy::unwrap_used)]

mod common;

use std::net::{SocketAddr, UdpSocket};
use std::time::Duration;

use cm_ttcp::{
    Receiver, ReceiverHandle, ReceiverOptions, SendSpec, Transport, TtcpError, cm_config, send,
    send_concurrent, send_sequence,
};
use common::Relay;
use libcm::Cm;

const MB2: u64 = 2_000_000;

fn any() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

fn receiver(t: &Transport) -> (SocketAddr, ReceiverHandle) {
    let rx = Receiver::bind(any(), t, ReceiverOptions::default()).unwrap();
    (rx.local_addr(), rx.spawn())
}

fn embedded() -> Cm {
    Cm::embedded(cm_config()).unwrap()
}

#[test]
fn tcpcm_embedded_transfer_is_exact() {
    let (dst, rx) = receiver(&Transport::TcpCm);
    let mut cm = embedded();
    let spec = SendSpec::new(dst, MB2, Transport::TcpCm).progress(Duration::from_millis(5));
    let s = send(&spec, Some(&mut cm)).unwrap();
    assert_eq!(s.bytes, MB2);
    assert!(s.complete && s.seconds > 0.0 && s.throughput_bps > 0.0);
    let d = s.tcpcm.as_ref().unwrap();
    assert_eq!(d.mss, cm_ttcp::TCPCM_MSS);
    // Every data segment went under a grant; a grant covers up to two GSO
    // runs of 44 segments (k-MTU requests of up to 88 MTUs, split under the
    // CM's per-request limit), so there are fewer grants than segments but
    // at least one per 88.
    let segments = MB2 / u64::from(d.mss);
    assert!(d.segments_sent >= segments, "{d:?}");
    assert!(d.grants > 0 && d.grants <= d.segments_sent, "{d:?}");
    assert!(d.grants * 88 >= segments, "{d:?}");
    assert_eq!(s.progress.last().unwrap().bytes, MB2);
    // Serializes, and the one-line form names the transport.
    let json = serde_json::to_string(&s).unwrap();
    assert!(json.contains("\"tcp_cm\""));
    assert!(s.to_string().starts_with("tcpcm 2.0 MB in "), "{s}");
    let got = rx.stop().unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].bytes, MB2);
    assert!(got[0].complete);
}

#[test]
fn tcpcm_daemon_transfer_is_exact() {
    let d = cm_daemon::TempDaemon::start().unwrap();
    let mut cm = Cm::connect(d.socket()).unwrap();
    let (dst, rx) = receiver(&Transport::TcpCm);
    let s = send(&SendSpec::new(dst, MB2, Transport::TcpCm), Some(&mut cm)).unwrap();
    assert_eq!(s.bytes, MB2);
    assert!(s.complete);
    // Requests of two GSO runs (88 MTUs) are over the daemon's limit of
    // 64: they go as several, none refused.
    let t = s.tcpcm.as_ref().unwrap();
    assert_eq!(t.cm_errors, 0, "{t:?}");
    let got = rx.stop().unwrap();
    assert_eq!(got[0].bytes, MB2);
}

#[test]
fn tcpcm_through_a_daemon_that_stops_mid_transfer_finishes() {
    // The daemon stops at the first progress sample; libcm moves the flow
    // to an embedded CM, which holds none of the sender's k-MTU requests:
    // the sender must ask again (`CmEvent::Status`), not wait for an RTO.
    let d = cm_daemon::TempDaemon::start().unwrap();
    let mut cm = Cm::connect(d.socket()).unwrap();
    let (dst, rx) = receiver(&Transport::TcpCm);
    let bytes = 50 * MB2;
    let spec = SendSpec::new(dst, bytes, Transport::TcpCm).progress(Duration::from_millis(2));
    let mut daemon = Some(d);
    let mut stopped_at = None;
    let mut stop = |_: usize, p: &cm_ttcp::ProgressSample| {
        if p.bytes > 0 && daemon.take().is_some() {
            stopped_at = Some(p.bytes);
        }
    };
    let s = cm_ttcp::send_observed(&spec, Some(&mut cm), Some(&mut stop)).unwrap();
    let at = stopped_at.expect("the daemon stopped during the transfer");
    assert!(at < bytes, "stopped at {at} of {bytes}");
    assert_eq!(cm.status(), libcm::Status::Fallback);
    assert_eq!(s.bytes, bytes);
    assert!(s.complete);
    let t = s.tcpcm.as_ref().unwrap();
    assert_eq!(t.timeouts, 0, "{t:?}");
    let got = rx.stop().unwrap();
    assert_eq!(got[0].bytes, bytes);
}

#[test]
fn linux_tcp_reno_transfer_is_exact() {
    let t = Transport::linux("reno");
    let (dst, rx) = receiver(&t);
    let spec = SendSpec::new(dst, MB2, t.clone()).progress(Duration::from_millis(5));
    let s = send(&spec, None).unwrap();
    assert_eq!(s.bytes, MB2);
    assert_eq!(s.transport, t);
    assert!(s.to_string().starts_with("tcp-reno 2.0 MB in "), "{s}");
    let got = rx.stop().unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].bytes, MB2);
    assert!(got[0].complete);
}

#[test]
fn concurrent_tcpcm_transfers_share_one_macroflow() {
    let (dst, rx) = receiver(&Transport::TcpCm);
    let mut cm = embedded();
    let specs = vec![SendSpec::new(dst, MB2, Transport::TcpCm); 3];
    let out = send_concurrent(&specs, Some(&mut cm)).unwrap();
    assert_eq!(out.len(), 3);
    let mf: Vec<u64> = out
        .iter()
        .map(|s| s.tcpcm.as_ref().unwrap().macroflow)
        .collect();
    assert!(mf.iter().all(|&m| m == mf[0]), "{mf:?}");
    let flows: Vec<u64> = out.iter().map(|s| s.tcpcm.as_ref().unwrap().flow).collect();
    assert!(flows[0] != flows[1] && flows[1] != flows[2]);
    for s in &out {
        assert_eq!(s.bytes, MB2);
    }
    let got = rx.stop().unwrap();
    assert_eq!(got.len(), 3);
    assert!(got.iter().all(|s| s.bytes == MB2 && s.complete));
}

#[test]
fn a_later_connection_inherits_the_macroflow_window() {
    let (dst, rx) = receiver(&Transport::TcpCm);
    let mut cm = embedded();
    let spec = SendSpec::new(dst, MB2, Transport::TcpCm);
    let first = send(&spec, Some(&mut cm)).unwrap();
    let second = send(&spec, Some(&mut cm)).unwrap();
    let w1 = first.tcpcm.as_ref().unwrap().window_at_open.unwrap();
    let w2 = second.tcpcm.as_ref().unwrap().window_at_open.unwrap();
    assert!(w2 > 4 * w1, "initial window {w1}, inherited {w2}");
    assert_eq!(
        first.tcpcm.as_ref().unwrap().macroflow,
        second.tcpcm.as_ref().unwrap().macroflow
    );
    // A scheduled, overlapping sequence of fresh connections.
    let seq = send_sequence(&spec, 3, Duration::from_millis(20), Some(&mut cm)).unwrap();
    assert_eq!(seq.len(), 3);
    assert!(seq.windows(2).all(|w| w[1].start_s >= w[0].start_s + 0.015));
    let got = rx.stop().unwrap();
    assert_eq!(got.len(), 5);
}

#[test]
fn linux_tcp_sequence_uses_fresh_connections() {
    let t = Transport::linux("reno");
    let (dst, rx) = receiver(&t);
    let spec = SendSpec::new(dst, 500_000, t);
    let seq = send_sequence(&spec, 3, Duration::from_millis(20), None).unwrap();
    let ports: std::collections::BTreeSet<&String> = seq.iter().map(|s| &s.local).collect();
    assert_eq!(ports.len(), 3);
    assert_eq!(rx.stop().unwrap().len(), 3);
}

#[test]
fn tcpcm_recovers_from_two_percent_loss() {
    let (dst, rx) = receiver(&Transport::TcpCm);
    let relay = Relay::start(dst, 20, 0x5eed_1234);
    let mut cm = embedded();
    let s = send(
        &SendSpec::new(relay.addr, MB2, Transport::TcpCm),
        Some(&mut cm),
    )
    .unwrap();
    let (dropped, _) = relay.stop();
    assert_eq!(s.bytes, MB2);
    assert!(dropped > 0);
    assert!(s.retransmissions > 0, "{s:?}");
    let got = rx.stop().unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].bytes, MB2);
    assert!(got[0].complete);
}

#[test]
fn bad_input_is_a_clear_error() {
    let mut cm = embedded();
    let dst: SocketAddr = "127.0.0.1:9".parse().unwrap();
    let zero = send(&SendSpec::new(dst, 0, Transport::TcpCm), Some(&mut cm));
    assert!(matches!(zero, Err(TtcpError::Invalid(_))), "{zero:?}");
    let port0: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let p = send(&SendSpec::new(port0, 10, Transport::TcpCm), Some(&mut cm));
    assert!(matches!(p, Err(TtcpError::Invalid(_))), "{p:?}");
    let cc = send(
        &SendSpec::new(dst, 10, Transport::linux("no-such-cc")),
        None,
    );
    assert!(
        matches!(cc, Err(TtcpError::UnknownCongestionControl(_))),
        "{cc:?}"
    );
    assert!(
        Receiver::bind(
            any(),
            &Transport::linux("no-such-cc"),
            ReceiverOptions::default()
        )
        .is_err()
    );
    // Nobody listens: TCP/CM retries its SYN, then gives up.
    let closed = UdpSocket::bind(any()).unwrap().local_addr().unwrap();
    let spec = SendSpec::new(closed, 10_000, Transport::TcpCm)
        .connect_timeout(Duration::from_millis(1500));
    let e = send(&spec, Some(&mut cm)).unwrap_err();
    assert!(matches!(e, TtcpError::Unreachable { .. }), "{e:?}");
    assert!(e.to_string().contains("unreachable"), "{e}");
    // Linux TCP: refused at once.
    let closed_tcp = std::net::TcpListener::bind(any())
        .unwrap()
        .local_addr()
        .unwrap();
    let e = send(
        &SendSpec::new(closed_tcp, 10, Transport::linux("reno")),
        None,
    )
    .unwrap_err();
    assert!(matches!(e, TtcpError::Unreachable { .. }), "{e:?}");
    // The Cm is still usable, and its flows were closed.
    assert!(cm.stat().unwrap().flows.is_empty());
}

/// A file sent over TCP/CM through 2% loss arrives byte for byte: the
/// retransmitted and out-of-order segments carry the file's bytes and land
/// at their stream offsets (and the same file over Linux TCP).
#[test]
fn a_file_crosses_a_lossy_path_intact() {
    let dir = std::env::temp_dir().join(format!("cm-ttcp-file-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let input = dir.join("in.bin");
    let data = common::noise(1_500_001, 0x9e37_79b9_7f4a_7c15);
    std::fs::write(&input, &data).unwrap();
    for t in [Transport::TcpCm, Transport::linux("reno")] {
        let output = dir.join(format!("out-{t}.bin"));
        let opts = ReceiverOptions {
            output: Some(output.clone()),
            ..ReceiverOptions::default()
        };
        let rx = Receiver::bind(any(), &t, opts).unwrap();
        let dst = rx.local_addr();
        let rx = rx.spawn();
        let spec = SendSpec::file(dst, &input, t.clone()).unwrap();
        assert_eq!(spec.bytes, data.len() as u64);
        let s = match t {
            Transport::TcpCm => {
                let relay = Relay::start(dst, 20, 0xf11e);
                let mut spec = spec;
                spec.dst = relay.addr;
                let s = send(&spec, Some(&mut embedded())).unwrap();
                assert!(relay.stop().0 > 0, "the relay dropped segments");
                assert!(s.retransmissions > 0);
                s
            }
            Transport::LinuxTcp { .. } | Transport::CcUdp => send(&spec, None).unwrap(),
        };
        assert_eq!(s.bytes, data.len() as u64);
        let got = rx.stop().unwrap();
        assert!(got[0].complete);
        assert!(std::fs::read(&output).unwrap() == data, "{t}: file differs");
    }
    // An empty file is refused, not sent.
    let empty = dir.join("empty");
    std::fs::write(&empty, b"").unwrap();
    assert!(SendSpec::file(any(), &empty, Transport::TcpCm).is_err());
    std::fs::remove_dir_all(&dir).unwrap();
}
