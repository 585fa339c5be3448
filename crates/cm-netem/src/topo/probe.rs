//! The per-link self-test's traffic: a UDP socket at each end of a link
//! direction, timestamped probes (one-way delay: every namespace shares the
//! process's monotonic clock) and a flood that keeps the link's queue busy.

use std::net::{Ipv4Addr, UdpSocket};
use std::num::NonZeroU64;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::error::{IoContext, NetemError, Result};
use crate::selftest::UDP_IP_OVERHEAD;

use super::{Network, TopoLink};

/// A datagram as the receiver saw it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Arrival {
    /// When it arrived, since the test's start.
    pub(super) at: Duration,
    /// When it was sent (the stamp in its first 8 bytes), since the test's start.
    pub(super) sent: Duration,
    /// Its IP size, bytes.
    pub(super) ip_bytes: u64,
}

/// A socket bound to `addr` (port chosen by the kernel) in node `node`.
fn bind(net: &Network, node: &str, addr: Ipv4Addr) -> Result<UdpSocket> {
    let sock = net
        .spawn_in(node, move || UdpSocket::bind((addr, 0)))?
        .join()
        .map_err(|_| NetemError::Thread("socket".into()))?
        .io_context(|| format!("binding a UDP socket at {addr} in node {node}"))?;
    let _ = rustix::net::sockopt::set_socket_recv_buffer_size_force(&sock, 4 << 20);
    let _ = rustix::net::sockopt::set_socket_send_buffer_size_force(&sock, 4 << 20);
    Ok(sock)
}

/// A connected (sender, receiver) pair across directional link `link`.
pub(super) fn pair(net: &Network, link: &TopoLink) -> Result<(UdpSocket, UdpSocket)> {
    let rx = bind(net, &link.to, link.to_addr)?;
    let tx = bind(net, &link.from, link.from_addr)?;
    let dst = rx.local_addr().io_context(|| "receiver address")?;
    tx.connect(dst)
        .io_context(|| format!("connect to {dst} from node {}", link.from))?;
    rx.set_read_timeout(Some(Duration::from_millis(20)))
        .io_context(|| "receiver timeout")?;
    Ok((tx, rx))
}

/// Send one datagram of `ip_bytes` stamped with the time since `t0`; false when
/// the local stack refused it.
fn send_stamped(sock: &UdpSocket, buf: &mut [u8], t0: Instant) -> bool {
    let stamp = (t0.elapsed().as_nanos() as u64).to_be_bytes();
    buf[..8].copy_from_slice(&stamp);
    sock.send(buf).is_ok()
}

fn payload(ip_bytes: u64) -> Vec<u8> {
    vec![0u8; ip_bytes.saturating_sub(UDP_IP_OVERHEAD).max(8) as usize]
}

/// Send `count` probes of `ip_bytes`, one every `every`; returns how many went.
pub(super) fn send_probes(
    sock: &UdpSocket,
    ip_bytes: u64,
    count: u32,
    every: Duration,
    t0: Instant,
) -> u64 {
    let _ = rustix::thread::set_current_timer_slack(NonZeroU64::new(1));
    let mut buf = payload(ip_bytes);
    let start = Instant::now();
    let mut sent = 0;
    for k in 0..count {
        if let Some(w) = (start + every * k).checked_duration_since(Instant::now()) {
            std::thread::sleep(w);
        }
        sent += u64::from(send_stamped(sock, &mut buf, t0));
    }
    sent
}

/// Send `burst` datagrams of `ip_bytes` at once (to empty the link's token
/// bucket), then `pps` per second for `duration`; returns how many went.
pub(super) fn flood(
    sock: &UdpSocket,
    ip_bytes: u64,
    burst: u64,
    pps: f64,
    duration: Duration,
    t0: Instant,
) -> u64 {
    let _ = rustix::thread::set_current_timer_slack(NonZeroU64::new(1));
    let mut buf = payload(ip_bytes);
    let mut sent = 0u64;
    for _ in 0..burst {
        sent += u64::from(send_stamped(sock, &mut buf, t0));
    }
    let start = Instant::now();
    let mut k = 0u64;
    while start.elapsed() < duration {
        k += 1;
        sent += u64::from(send_stamped(sock, &mut buf, t0));
        let next = Duration::from_secs_f64(k as f64 / pps);
        if let Some(w) = next.checked_sub(start.elapsed()) {
            std::thread::sleep(w);
        }
    }
    sent
}

/// Receive until `want` datagrams arrived, or `done` is set and nothing arrived
/// for `quiet`, or `cap` passed since the call.
pub(super) fn receive(
    sock: &UdpSocket,
    t0: Instant,
    want: Option<u64>,
    done: &Arc<AtomicBool>,
    quiet: Duration,
    cap: Duration,
) -> Vec<Arrival> {
    let mut buf = vec![0u8; 65536];
    let mut log = Vec::new();
    let start = Instant::now();
    let mut last = Instant::now();
    let mut done_at: Option<Instant> = None;
    loop {
        if want.is_some_and(|w| log.len() as u64 >= w) || start.elapsed() >= cap {
            return log;
        }
        if done_at.is_none() && done.load(Ordering::Relaxed) {
            done_at = Some(Instant::now());
        }
        if let Some(d) = done_at {
            if Instant::now().saturating_duration_since(last.max(d)) >= quiet {
                return log;
            }
        }
        if let Ok(n) = sock.recv(&mut buf) {
            let at = t0.elapsed();
            last = Instant::now();
            if let Some(stamp) = buf.get(..n).and_then(|b| b.first_chunk::<8>()) {
                log.push(Arrival {
                    at,
                    sent: Duration::from_nanos(u64::from_be_bytes(*stamp)),
                    ip_bytes: n as u64 + UDP_IP_OVERHEAD,
                });
            }
        }
    }
}
