//! The self-test's UDP traffic: sockets bound inside a namespace, a paced
//! sender, a counting receiver and the receiver's socket-buffer drops.

use std::net::{Ipv4Addr, UdpSocket};
use std::num::NonZeroU64;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::error::{IoContext, NetemError, Result};

use crate::path::{Node, Path};

pub(super) fn bind_in(path: &Path, node: Node) -> Result<UdpSocket> {
    let addr = match node {
        Node::Receiver => path.receiver_addr(),
        Node::Router => path.router_addrs().1,
        Node::Sender => path.sender_addr(),
    };
    bind_at(path, node, addr)
}

pub(super) fn bind_at(path: &Path, node: Node, addr: Ipv4Addr) -> Result<UdpSocket> {
    let sock = path
        .spawn_in(node, move || UdpSocket::bind((addr, 0)))?
        .join()
        .map_err(|_| NetemError::Thread("socket".into()))?
        .io_context(|| format!("binding a UDP socket in the {node} namespace"))?;
    let _ = rustix::net::sockopt::set_socket_recv_buffer_size_force(&sock, 8 << 20);
    let _ = rustix::net::sockopt::set_socket_send_buffer_size_force(&sock, 4 << 20);
    Ok(sock)
}

/// `RcvbufErrors` of the receiver namespace's UDP MIB.
pub(super) fn rcvbuf_errors(path: &Path) -> Result<u64> {
    path.mib(Node::Receiver, "snmp", "Udp")?
        .get("RcvbufErrors")
        .copied()
        .ok_or_else(|| NetemError::Parse {
            what: "/proc/net/snmp".into(),
            detail: "no RcvbufErrors".into(),
        })
}

/// Send `total` datagrams (or for `duration`) at `pps`, paced; returns how many were sent.
pub(super) fn paced_send(
    sock: &UdpSocket,
    payload: &mut [u8],
    pps: f64,
    total: Option<u64>,
    duration: Option<Duration>,
) -> u64 {
    let _ = rustix::thread::set_current_timer_slack(NonZeroU64::new(1));
    let start = Instant::now();
    let mut sent = 0u64;
    loop {
        let elapsed = start.elapsed();
        if duration.is_some_and(|d| elapsed >= d) || total.is_some_and(|t| sent >= t) {
            return sent;
        }
        let mut due = (elapsed.as_secs_f64() * pps) as u64 + 1;
        if let Some(t) = total {
            due = due.min(t);
        }
        while sent < due {
            let n = payload.len().min(8);
            payload[..n].copy_from_slice(&sent.to_be_bytes()[..n]);
            if sock.send(payload).is_ok() {
                sent += 1;
            } else {
                // Local buffer full: let it drain (counts as not sent).
                std::thread::sleep(Duration::from_micros(50));
                break;
            }
        }
        let next = Duration::from_secs_f64(sent as f64 / pps);
        if let Some(wait) = next.checked_sub(start.elapsed()) {
            std::thread::sleep(wait);
        }
    }
}

/// Receive until `stop` is set and the socket has been quiet for its read timeout.
pub(super) fn receive_until(
    sock: UdpSocket,
    stop: Arc<AtomicBool>,
    log_times: bool,
) -> (u64, Vec<(Instant, u32)>) {
    let mut buf = vec![0u8; 65536];
    let mut count = 0u64;
    let mut log = Vec::new();
    loop {
        match sock.recv(&mut buf) {
            Ok(n) => {
                count += 1;
                if log_times {
                    log.push((Instant::now(), n as u32));
                }
            }
            Err(_) => {
                if stop.load(Ordering::Relaxed) {
                    return (count, log);
                }
            }
        }
    }
}

/// Receive until `stop` is set and the socket has been quiet for its read timeout;
/// returns the big-endian `u64` sequence number at the start of each datagram, in
/// arrival order (shorter datagrams are skipped).
pub(super) fn receive_seqs(sock: UdpSocket, stop: Arc<AtomicBool>) -> Vec<u64> {
    let mut buf = vec![0u8; 65536];
    let mut seqs = Vec::new();
    loop {
        match sock.recv(&mut buf) {
            Ok(n) => {
                if let Some(b) = buf.get(..n).and_then(|b| b.first_chunk::<8>()) {
                    seqs.push(u64::from_be_bytes(*b));
                }
            }
            Err(_) => {
                if stop.load(Ordering::Relaxed) {
                    return seqs;
                }
            }
        }
    }
}
