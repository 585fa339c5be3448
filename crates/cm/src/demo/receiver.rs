//! The receiving host: a UDP socket behind an emulated bottleneck. Every
//! data datagram that survives the bottleneck is acknowledged to its sender
//! (application-level feedback, cm-implementation-linux §3.3).

use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use super::link::EmulatedLink;
use super::wire::{Ack, Data};

/// A running receiver thread.
pub struct Receiver {
    pub addr: SocketAddr,
    thread: JoinHandle<Result<u64>>,
}

/// The bottleneck in front of a receiver.
#[derive(Clone, Copy, Debug)]
pub struct PathSpec {
    pub rate_bytes_per_sec: u64,
    pub queue_bytes: u64,
    pub one_way_delay: Duration,
}

impl Receiver {
    /// Bind `ip` (a loopback address) on an ephemeral port and serve until `stop`.
    pub fn spawn(ip: &str, path: PathSpec, epoch: Instant, stop: Arc<AtomicBool>) -> Result<Self> {
        let sock = UdpSocket::bind((ip, 0)).with_context(|| format!("binding receiver on {ip}"))?;
        sock.set_nonblocking(true)?;
        let addr = sock.local_addr()?;
        let thread = std::thread::Builder::new()
            .name(format!("receiver-{ip}"))
            .spawn(move || serve(&sock, path, epoch, &stop))?;
        Ok(Receiver { addr, thread })
    }

    /// Wait for the thread; returns the packets the bottleneck dropped.
    pub fn join(self) -> Result<u64> {
        self.thread
            .join()
            .map_err(|_| anyhow::anyhow!("receiver thread panicked"))?
    }
}

fn serve(sock: &UdpSocket, path: PathSpec, epoch: Instant, stop: &AtomicBool) -> Result<u64> {
    let delay_us = u64::try_from(path.one_way_delay.as_micros()).unwrap_or(u64::MAX);
    let mut link = EmulatedLink::new(path.rate_bytes_per_sec, path.queue_bytes, delay_us);
    let mut buf = vec![0u8; 65_536];
    let mut out = Vec::with_capacity(64);
    let now_us = || u64::try_from(epoch.elapsed().as_micros()).unwrap_or(u64::MAX);
    while !stop.load(Ordering::Relaxed) {
        let now = now_us();
        // Deliver (acknowledge) everything that has crossed the link.
        while let Some((ack, to)) = link.poll_arrival(now) {
            ack_to(sock, &ack, to, &mut out)?;
        }
        let wait_us = link
            .next_arrival()
            .map_or(50_000, |t| t.saturating_sub(now).clamp(1, 50_000));
        if !crate::wait::readable(sock, Duration::from_micros(wait_us))? {
            continue;
        }
        match sock.recv_from(&mut buf) {
            Ok((n, from)) => {
                if let Some(d) = Data::decode(&buf[..n]) {
                    let ack = Ack {
                        flow: d.flow,
                        seq: d.seq,
                        echo_us: d.sent_us,
                        len: u32::try_from(n).unwrap_or(u32::MAX),
                    };
                    // The IP and UDP headers cross the bottleneck too.
                    link.offer(now_us(), n as u64 + 28, (ack, from));
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e).context("receiver recv"),
        }
    }
    Ok(link.dropped)
}

fn ack_to(sock: &UdpSocket, ack: &Ack, to: SocketAddr, out: &mut Vec<u8>) -> Result<()> {
    ack.encode(out);
    match sock.send_to(out, to) {
        Ok(_) => Ok(()),
        // A full socket buffer loses the ack, as a network would.
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => Ok(()),
        Err(e) => Err(e).context("receiver send"),
    }
}
