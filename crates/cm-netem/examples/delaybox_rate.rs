//! How many packets per second the delay box forwards: a 1 Gbit/s, 5 ms path, one
//! unpaced UDP sender for 2 s per packet size, packets counted by the delay box and
//! by the receiver. Needs root.
//!
//! `cargo run --release -p cm-netem --example delaybox_rate`

use std::net::UdpSocket;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use cm_netem::{Node, Path, PathConfig, Queue};

fn main() -> anyhow::Result<()> {
    let path = Path::build(PathConfig {
        rate_bps: 1_000_000_000,
        one_way_delay: Duration::from_millis(5),
        queue: Queue::Bytes(2_000_000),
        loss: 0.0,
        reverse_rate_bps: None,
        ..PathConfig::default()
    })?;
    let secs = 2.0;
    for payload in [18usize, 1200, 1472] {
        let rcv_addr = path.receiver_addr();
        let rcv = path
            .spawn_in(Node::Receiver, move || UdpSocket::bind((rcv_addr, 0)))?
            .join()
            .map_err(|_| anyhow::anyhow!("panic"))??;
        let _ = rustix::net::sockopt::set_socket_recv_buffer_size_force(&rcv, 16 << 20);
        rcv.set_read_timeout(Some(Duration::from_millis(50)))?;
        let dst = rcv.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let got = Arc::new(AtomicU64::new(0));
        let (s2, g2) = (Arc::clone(&stop), Arc::clone(&got));
        let receiver = std::thread::spawn(move || {
            let mut buf = [0u8; 2048];
            while !s2.load(Ordering::Relaxed) {
                if rcv.recv(&mut buf).is_ok() {
                    g2.fetch_add(1, Ordering::Relaxed);
                }
            }
        });
        let before = path.stats()?;
        let t0 = Instant::now();
        let sent = path
            .spawn_in(Node::Sender, move || -> std::io::Result<u64> {
                let s = UdpSocket::bind("0.0.0.0:0")?;
                s.connect(dst)?;
                let buf = vec![0u8; payload];
                let mut n = 0u64;
                let start = Instant::now();
                while start.elapsed().as_secs_f64() < secs {
                    for _ in 0..64 {
                        if s.send(&buf).is_ok() {
                            n += 1;
                        }
                    }
                }
                Ok(n)
            })?
            .join()
            .map_err(|_| anyhow::anyhow!("panic"))??;
        let elapsed = t0.elapsed().as_secs_f64();
        std::thread::sleep(Duration::from_millis(300));
        stop.store(true, Ordering::Relaxed);
        receiver.join().map_err(|_| anyhow::anyhow!("panic"))?;
        let after = path.stats()?;
        let fwd = after.delay_box.forward.packets - before.delay_box.forward.packets;
        let bytes = after.delay_box.forward.bytes - before.delay_box.forward.bytes;
        println!(
            "payload {payload:4} B: sent {:8.0} pkt/s, delay box forwarded {:8.0} pkt/s ({:7.1} Mbit/s IP), receiver got {:8.0} pkt/s; box late {:.1} µs mean, {:.0} µs max, tbf drops {}",
            sent as f64 / elapsed,
            fwd as f64 / elapsed,
            bytes as f64 * 8.0 / elapsed / 1e6,
            got.load(Ordering::Relaxed) as f64 / elapsed,
            after.delay_box.forward.mean_late_us,
            after.delay_box.forward.max_late_us,
            after.bottleneck.dropped - before.bottleneck.dropped,
        );
    }
    Ok(path.teardown()?)
}
