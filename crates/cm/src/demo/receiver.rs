//! The receiving host: a UDP socket, behind a user-space bottleneck on
//! loopback or at the end of a real emulated path (cm-netem). The data
//! datagrams that survive the bottleneck are acknowledged to their sender
//! with CC-UDP's acks (application-level feedback, cm-implementation-linux
//! §3.3; [`Acks`]).

use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::{Context, Result};
use cm_transport::ccudp::wire::{self, Packet};

use super::bottleneck::Bottleneck;
use crate::ccudp_acks::{Acks, is_transient, send_ack};

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
    pub fn spawn(ip: &str, path: Option<PathSpec>, stop: Arc<AtomicBool>) -> Result<Self> {
        let sock = UdpSocket::bind((ip, 0)).with_context(|| format!("binding receiver on {ip}"))?;
        sock.set_nonblocking(true)?;
        let addr = sock.local_addr()?;
        let thread = std::thread::Builder::new()
            .name(format!("receiver-{ip}"))
            .spawn(move || serve(&sock, path, &stop))?;
        Ok(Receiver { addr, thread })
    }

    /// Wait for the thread; returns the packets the bottleneck dropped.
    pub fn join(self) -> Result<u64> {
        self.thread
            .join()
            .map_err(|_| anyhow::anyhow!("receiver thread panicked"))?
    }
}

fn serve(sock: &UdpSocket, path: Option<PathSpec>, stop: &AtomicBool) -> Result<u64> {
    // No user-space bottleneck (a real path is the bottleneck): data is
    // acknowledged as it arrives.
    let mut link = path.map(|p| {
        let delay_us = u64::try_from(p.one_way_delay.as_micros()).unwrap_or(u64::MAX);
        Bottleneck::new(p.rate_bytes_per_sec, p.queue_bytes, delay_us)
    });
    let mut buf = vec![0u8; 65_536];
    let mut acks = Acks::default();
    let now_us = || cm_clock::now().as_micros();
    while !stop.load(Ordering::Relaxed) {
        // Deliver everything that has crossed the link.
        if let Some(link) = link.as_mut() {
            let now = cm_clock::now();
            while let Some((h, len, from)) = link.poll_arrival(now.as_micros()) {
                if let Some((to, ack)) = acks.on_data(&h, len, from, now) {
                    send_ack(sock, to, &ack)?;
                }
            }
        }
        for (to, ack) in acks.drained(cm_clock::now()) {
            send_ack(sock, to, &ack)?;
        }
        let now = now_us();
        let wait_us = link
            .as_ref()
            .and_then(Bottleneck::next_arrival)
            .map_or(50_000, |t| t.saturating_sub(now).clamp(1, 50_000));
        if !crate::wait::readable(sock, Duration::from_micros(wait_us))? {
            continue;
        }
        loop {
            let (n, from) = match sock.recv_from(&mut buf) {
                Ok(x) => x,
                Err(e) if is_transient(&e) => break,
                Err(e) => return Err(e).context("receiver recv"),
            };
            let Ok(Packet::Data { header, .. }) = wire::decode(&buf[..n]) else {
                continue;
            };
            match link.as_mut() {
                // The IP and UDP headers cross the bottleneck too.
                Some(link) => {
                    link.offer(now_us(), n as u64 + 28, (header, n, from));
                }
                None => {
                    if let Some((to, ack)) = acks.on_data(&header, n, from, cm_clock::now()) {
                        send_ack(sock, to, &ack)?;
                    }
                }
            }
        }
    }
    Ok(link.map_or(0, |l| l.dropped))
}
