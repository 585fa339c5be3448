//! The receiving host: a UDP socket, behind a user-space bottleneck on
//! loopback or at the end of a real emulated path (cm-netem). Every data
//! datagram that survives the bottleneck is acknowledged to its sender
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
    /// Bind `ip` on an ephemeral port and serve until `stop`. `path`: the
    /// user-space bottleneck in front of the socket (loopback), or `None`
    /// when a real path already is the bottleneck.
    pub fn spawn(
        ip: &str,
        path: Option<PathSpec>,
        epoch: Instant,
        stop: Arc<AtomicBool>,
    ) -> Result<Self> {
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

fn serve(
    sock: &UdpSocket,
    path: Option<PathSpec>,
    epoch: Instant,
    stop: &AtomicBool,
) -> Result<u64> {
    // No user-space bottleneck (a real path is the bottleneck): acknowledge
    // at once.
    let mut link = path.map(|p| {
        let delay_us = u64::try_from(p.one_way_delay.as_micros()).unwrap_or(u64::MAX);
        EmulatedLink::new(p.rate_bytes_per_sec, p.queue_bytes, delay_us)
    });
    let mut buf = vec![0u8; 65_536];
    let mut out = Vec::with_capacity(64);
    let now_us = || u64::try_from(epoch.elapsed().as_micros()).unwrap_or(u64::MAX);
    while !stop.load(Ordering::Relaxed) {
        let now = now_us();
        // Deliver (acknowledge) everything that has crossed the link.
        if let Some(link) = link.as_mut() {
            while let Some((ack, to)) = link.poll_arrival(now) {
                ack_to(sock, &ack, to, &mut out)?;
            }
        }
        let wait_us = link
            .as_ref()
            .and_then(EmulatedLink::next_arrival)
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
                    match link.as_mut() {
                        // The IP and UDP headers cross the bottleneck too.
                        Some(link) => {
                            link.offer(now_us(), n as u64 + 28, (ack, from));
                        }
                        None => ack_to(sock, &ack, from, &mut out)?,
                    }
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e).context("receiver recv"),
        }
    }
    Ok(link.map_or(0, |l| l.dropped))
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
