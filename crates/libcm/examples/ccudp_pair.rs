//! A congestion-controlled UDP sender and receiver on loopback, with a
//! user-space bottleneck between them, printing the rate as the CM adapts.
//!
//! ```sh
//! cargo run --release -p libcm --example ccudp_pair -- [Mbit/s] [seconds] [--daemon]
//! ```
//!
//! The bottleneck (a thread) forwards sender → receiver at the given rate
//! (default 4 Mbit/s) through a 20-datagram DropTail queue with 10 ms of
//! delay each way; halfway through, its rate halves, and the sender
//! follows. `--daemon` runs a CM daemon on a thread and uses it instead of
//! an embedded CM.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::net::{SocketAddr, UdpSocket};
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use libcm::ccudp::CcUdpSocket;
use libcm::{Cm, Config};

const LOCAL: &str = "127.0.0.1:0";

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let daemon = args.iter().any(|a| a == "--daemon");
    let nums: Vec<f64> = args.iter().filter_map(|a| a.parse().ok()).collect();
    let mbit = nums.first().copied().unwrap_or(4.0);
    let secs = nums.get(1).copied().unwrap_or(10.0);

    let _d;
    let cm_path = if daemon {
        let d = cm_daemon::TempDaemon::start()?;
        let p = d.socket().to_path_buf();
        _d = d;
        Some(p)
    } else {
        None
    };
    let make_cm = move || -> Result<Cm, libcm::CmError> {
        match &cm_path {
            Some(p) => Cm::connect(p),
            None => Cm::embedded(Config::default()),
        }
    };

    // The bottleneck's rate in bytes/s, changeable while it runs.
    let rate = Arc::new(AtomicU64::new((mbit * 1e6 / 8.0) as u64));
    let stop = Arc::new(AtomicBool::new(false));
    let received = Arc::new(AtomicU64::new(0));

    // Receiver thread: its own Cm (a Cm is not Send), counts payload bytes.
    let (addr_tx, addr_rx) = std::sync::mpsc::channel();
    let (peer_tx, peer_rx) = std::sync::mpsc::channel::<SocketAddr>();
    let (stop_r, recv_r, make_r) = (stop.clone(), received.clone(), make_cm.clone());
    let receiver = std::thread::spawn(move || -> std::io::Result<()> {
        let cm = Rc::new(RefCell::new(make_r().map_err(std::io::Error::other)?));
        let mut sock = CcUdpSocket::bind(&cm, LOCAL)?;
        let _ = addr_tx.send(sock.local_addr()?);
        sock.connect(peer_rx.recv().map_err(std::io::Error::other)?)?;
        sock.set_read_timeout(Some(Duration::from_millis(100)))?;
        let mut buf = [0u8; 2048];
        while !stop_r.load(Ordering::Relaxed) {
            match sock.recv(&mut buf) {
                Ok(n) => {
                    recv_r.fetch_add(n as u64, Ordering::Relaxed);
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    });
    let recv_addr = addr_rx.recv()?;

    // Sender: in this thread.
    let cm = Rc::new(RefCell::new(make_cm()?));
    let mut sender = CcUdpSocket::bind(&cm, LOCAL)?;
    let (to_relay, from_relay) =
        spawn_bottleneck(sender.local_addr()?, recv_addr, rate.clone(), stop.clone())?;
    peer_tx.send(from_relay)?;
    sender.connect(to_relay)?;
    println!(
        "{} CM; bottleneck {mbit} Mbit/s, 20-datagram queue, 10 ms each way",
        if daemon { "daemon" } else { "embedded" }
    );
    println!("  time   offered-to-CM  sent Mbit/s  goodput Mbit/s  CM rate Mbit/s  srtt ms  lost");

    let payload = vec![0x5a; 1000];
    let start = Instant::now();
    let mut last = (Duration::ZERO, sender.stats(), 0u64);
    let mut halved = false;
    sender.set_write_timeout(Some(Duration::from_millis(100)))?;
    while start.elapsed().as_secs_f64() < secs {
        // Blocking send: waits (driving the CM and reading acks) while the
        // queue is full, so this loop offers far more than the path takes.
        match sender.send(&payload) {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e.into()),
        }
        let el = start.elapsed();
        if !halved && el.as_secs_f64() >= secs / 2.0 {
            halved = true;
            rate.store(rate.load(Ordering::Relaxed) / 2, Ordering::Relaxed);
            println!("  -- bottleneck halved to {} Mbit/s --", mbit / 2.0);
        }
        if el - last.0 >= Duration::from_millis(500) {
            let st = sender.stats();
            let rx = received.load(Ordering::Relaxed);
            let dt = (el - last.0).as_secs_f64();
            let sent_mbit = (st.sent - last.1.sent) as f64 * 1016.0 * 8.0 / dt / 1e6;
            let good_mbit = (rx - last.2) as f64 * 8.0 / dt / 1e6;
            let e = sender.estimate()?;
            println!(
                "{:6.1}s  {:>12}  {:11.2}  {:14.2}  {:14.2}  {:7.1}  {}",
                el.as_secs_f64(),
                format!("{} queued", st.queued),
                sent_mbit,
                good_mbit,
                e.rate.map_or(0.0, |r| r.bytes_per_sec() as f64 * 8.0 / 1e6),
                e.srtt.map_or(0.0, |d| d.as_micros() as f64 / 1000.0),
                st.lost,
            );
            last = (el, st, rx);
        }
    }
    let st = sender.stats();
    println!(
        "sent {} datagrams: {} acknowledged, {} lost ({:.2}%), {} timeouts",
        st.sent,
        st.acked,
        st.lost,
        100.0 * st.lost as f64 / (st.acked + st.lost).max(1) as f64,
        st.timeouts
    );
    stop.store(true, Ordering::Relaxed);
    receiver
        .join()
        .map_err(|_| "receiver panicked")?
        .map_err(|e| format!("receiver: {e}"))?;
    Ok(())
}

/// A DropTail bottleneck from `sender` to `receiver` (acks go back after
/// the same delay, unshaped). Returns (address for the sender to connect
/// to, address for the receiver to connect to).
fn spawn_bottleneck(
    sender: SocketAddr,
    receiver: SocketAddr,
    rate: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
) -> std::io::Result<(SocketAddr, SocketAddr)> {
    let a = UdpSocket::bind(LOCAL)?;
    let b = UdpSocket::bind(LOCAL)?;
    a.set_nonblocking(true)?;
    b.set_nonblocking(true)?;
    let ends = (a.local_addr()?, b.local_addr()?);
    let delay = Duration::from_millis(10);
    std::thread::spawn(move || {
        let mut queue: VecDeque<Vec<u8>> = VecDeque::new();
        let mut line: VecDeque<(Instant, bool, Vec<u8>)> = VecDeque::new();
        let mut free = Instant::now();
        let mut buf = vec![0u8; 65536];
        while !stop.load(Ordering::Relaxed) {
            let now = Instant::now();
            while let Ok(n) = a.recv(&mut buf) {
                if queue.len() < 20 {
                    queue.push_back(buf[..n].to_vec());
                }
            }
            while let Ok(n) = b.recv(&mut buf) {
                line.push_back((now + delay, false, buf[..n].to_vec()));
            }
            while free <= now {
                let Some(d) = queue.pop_front() else { break };
                let bps = rate.load(Ordering::Relaxed).max(1) as f64;
                free = free.max(now - Duration::from_millis(1))
                    + Duration::from_secs_f64(d.len() as f64 / bps);
                let at = free + delay;
                let pos = line.iter().rposition(|e| e.0 <= at).map_or(0, |p| p + 1);
                line.insert(pos, (at, true, d));
            }
            while line.front().is_some_and(|e| e.0 <= now) {
                if let Some((_, fwd, d)) = line.pop_front() {
                    let _ = if fwd {
                        b.send_to(&d, receiver)
                    } else {
                        a.send_to(&d, sender)
                    };
                }
            }
            std::thread::sleep(Duration::from_micros(200));
        }
    });
    Ok(ends)
}
