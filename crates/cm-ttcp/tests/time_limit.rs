//! `SendSpec::time_limit`: a transfer too big for its time stops at the
//! limit, reports what was acknowledged by then as an incomplete (but
//! successful) transfer, for every transport; and a zero limit is refused.
#![allow(clippy::unwrap_used)]

use std::net::SocketAddr;
use std::time::Duration;

use cm_ttcp::{Receiver, ReceiverOptions, SendSpec, Transport, cm_config, send};

/// More than loopback moves in the limit.
const HUGE: u64 = 1 << 40;

fn limited(t: Transport) {
    let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let rx = Receiver::bind(any, &t, ReceiverOptions::default()).unwrap();
    let dst = rx.local_addr();
    let server = rx.spawn();
    let mut cm = libcm::Cm::embedded(cm_config()).unwrap();
    let limit = Duration::from_millis(500);
    let spec = SendSpec::new(dst, HUGE, t.clone())
        .progress(Duration::from_millis(50))
        .time_limit(limit);
    let s = send(&spec, Some(&mut cm)).unwrap();
    assert!(!s.complete, "{t}: stopped at the limit, not finished");
    assert!(s.bytes > 0 && s.bytes < HUGE, "{t}: {} bytes", s.bytes);
    assert!(
        s.seconds >= 0.5 && s.seconds < 1.5,
        "{t}: stopped after {} s",
        s.seconds
    );
    let last = s.progress.last().unwrap();
    assert_eq!(last.bytes, s.bytes, "{t}: the last sample is the total");
    server.stop().unwrap();
}

#[test]
fn tcpcm_stops_at_its_time_limit() {
    limited(Transport::TcpCm);
}

#[test]
fn linux_tcp_stops_at_its_time_limit() {
    limited(Transport::linux("reno"));
}

#[test]
fn ccudp_stops_at_its_time_limit() {
    limited(Transport::CcUdp);
}

#[test]
fn a_zero_time_limit_is_refused() {
    let dst: SocketAddr = "127.0.0.1:9".parse().unwrap();
    let spec = SendSpec::new(dst, 1000, Transport::TcpCm).time_limit(Duration::ZERO);
    assert!(spec.validate().is_err());
}
