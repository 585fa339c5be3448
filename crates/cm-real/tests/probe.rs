//! CC-UDP driven by the CM protocol on real emulated paths: the quick
//! `real-probe-feedback` claims, and the cases where a CC-UDP sender must
//! neither go unlimited nor hang: a receiver without a receiver CM
//! (fallback), a receiver that loses its CM state mid-transfer (restart),
//! and a plain UDP socket that never answers anything. They need root
//! (namespaces, qdiscs, TUN devices); without it they say so and pass
//! vacuously (CI runs them as root).
#![allow(clippy::unwrap_used)]

use std::io::ErrorKind;
use std::net::{SocketAddr, SocketAddrV4, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use cm_netem::{Node, Path, PathConfig};
use cm_real::harness::{HostOptions, Job, Rig};
use cm_real::probe_feedback::LINK_BPS;
use cm_real::{RealOpts, run};
use cm_ttcp::{CcUdpReceiverOptions, Summary, Transport};

mod common;
use common::{my_namespaces, root};

/// `f` on a thread of its own, failing the test if it takes longer than
/// `limit` (a hang fails instead of blocking the test run).
fn bounded<T: Send + 'static>(limit: Duration, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(limit) {
        Ok(v) => v,
        Err(_) => panic!("did not finish within {limit:?}: hung"),
    }
}

/// One CC-UDP transfer on a fresh path whose CC-UDP receiver is `rx`,
/// with the bottleneck's drops during it; bounded by `limit` of wall time.
fn transfer(loss: f64, rx: CcUdpReceiverOptions, job: Job, limit: Duration) -> (Summary, u64) {
    let t = Instant::now();
    let (s, drops) = bounded(limit, move || {
        let rig = Rig::build(
            PathConfig::default(),
            HostOptions::sack(false).with_ccudp(rx),
        )
        .unwrap();
        rig.path().set_loss(loss).unwrap();
        let before = rig.path().stats().unwrap().bottleneck.dropped;
        let mut r = rig.run(&[job], Some(Duration::from_millis(100))).unwrap();
        let drops = rig.path().stats().unwrap().bottleneck.dropped - before;
        rig.finish().unwrap();
        (r.pop().unwrap(), drops)
    });
    let mut d = s.ccudp.clone().unwrap();
    d.sent_progress.clear();
    eprintln!(
        "{s} in {:.1} s wall; bottleneck drops {drops}\n{d:?}",
        t.elapsed().as_secs_f64()
    );
    assert!(my_namespaces().is_empty(), "namespaces left behind");
    (s, drops)
}

/// Neither unlimited nor flooding the queue: the sending rate over any
/// second stays near the bottleneck's (an unlimited sender would offer
/// what the CPU can), and the queue drops stay a small part of what was
/// sent.
fn assert_bounded(s: &Summary, drops: u64) {
    let d = s.ccudp.as_ref().unwrap();
    assert!(
        d.peak_send_bps < 1.5 * LINK_BPS,
        "peak sending rate {:.2} Mbit/s over a 10 Mbit/s bottleneck",
        d.peak_send_bps / 1e6
    );
    assert!(
        (drops as f64) < 0.1 * d.datagrams_sent as f64,
        "{drops} queue drops of {} datagrams sent",
        d.datagrams_sent
    );
}

#[test]
fn real_probe_feedback_tracks_reno_with_fallback_and_restart() {
    let Some(_serial) = root() else {
        return;
    };
    let opts = RealOpts {
        quick: true,
        quiet: true,
    };
    let out = run("real-probe-feedback", &opts).unwrap();
    assert!(my_namespaces().is_empty(), "namespaces left behind");
    eprintln!("{:#?}", out.summary);
    // Fallback and restart hold on every run.
    for c in out
        .checks
        .iter()
        .filter(|c| c.metric != "median_ratio_reno")
    {
        assert!(
            c.pass,
            "{} = {:.3} fails {} (summary: {:#?})",
            c.metric, c.ours, c.accept, out.summary
        );
    }
    // The ratio's acceptance band [0.8, 1.25] is the full run's (median
    // 0.89 in experiments/results/real). A quick run is too short to pin
    // it: Reno without SACK on 2 MB transfers at 2-5% loss swings from run
    // to run, and nine quick runs gave medians from 0.73 to 1.06. So the
    // quick test checks what one short run shows reliably, against Reno
    // measured in the same run: CC-UDP on probes alone is neither starved
    // nor aggressive.
    let ratio = out.metrics["median_ratio_reno"].as_f64().unwrap();
    assert!(
        (0.6..=1.5).contains(&ratio),
        "CC-UDP / Reno {ratio:.3} (summary: {:#?})",
        out.summary
    );
    let peak = out.metrics["peak_send_over_link"].as_f64().unwrap();
    assert!(peak < 1.5, "a sender peaked at {peak:.2}x the bottleneck");
}

/// A receiver without a receiver CM: the sender's SYNs go unanswered, so
/// it runs on CC-UDP's acks from the first round trip and falls back after
/// 1 + 2 + 4 s; it stays at about the bottleneck's rate and stops at its
/// time limit.
#[test]
fn fallback_to_acks_is_bounded_and_stops_in_time() {
    let Some(_serial) = root() else {
        return;
    };
    let rx = CcUdpReceiverOptions {
        cm_protocol: false,
        restart_after: None,
    };
    let job = Job::now(100_000_000, Transport::CcUdp).for_at_most(Duration::from_secs(9));
    let (s, drops) = transfer(0.01, rx, job, Duration::from_secs(40));
    let d = s.ccudp.as_ref().unwrap();
    assert_eq!(d.state, "fallback");
    assert_eq!(d.cm_sent, 0);
    assert!(d.acks_received > 0);
    let early = s
        .progress
        .iter()
        .filter(|p| p.t <= 1.0 + 1e-6)
        .map(|p| p.bytes)
        .max()
        .unwrap_or(0);
    assert!(early > 0, "nothing acknowledged in the first second");
    assert!(
        !s.complete && s.seconds < 10.0,
        "stopped after {} s",
        s.seconds
    );
    assert!(s.bytes > 1_000_000, "{} bytes in 9 s", s.bytes);
    assert_bounded(&s, drops);
}

/// The receiving socket replaced halfway: RST, a new handshake, the
/// transfer completes negotiated, bounded all along.
#[test]
fn receiver_restart_resyncs_and_completes() {
    let Some(_serial) = root() else {
        return;
    };
    let rx = CcUdpReceiverOptions {
        cm_protocol: true,
        restart_after: Some(2_000_000),
    };
    let job = Job::now(4_000_000, Transport::CcUdp).for_at_most(Duration::from_secs(30));
    let (s, drops) = transfer(0.01, rx, job, Duration::from_secs(60));
    let d = s.ccudp.as_ref().unwrap();
    assert_eq!(d.receiver_restarts, 1);
    assert!(d.resets >= 1, "no RST seen: {d:?}");
    assert_eq!(d.state, "negotiated");
    assert!(s.complete && d.drained, "{s}");
    // CC-UDP does not retransmit, so the receiver misses the path's random
    // loss (1%), the queue's drops and whatever the restart itself lost.
    // The queue's drops are bounded by `assert_bounded`; they are not
    // always small: a slow start that no random loss ends early overshoots
    // the queue once, as TCP's would, and the probes report it one probe
    // interval after an ack would (the receiver settles a loss at the next
    // probe). One such run dropped 174 of 2748 datagrams (6%), where most
    // drop none. Everything else, the restart included, stays within 3%.
    let got = d.receiver_datagrams.unwrap();
    assert!(
        (got + drops) as f64 >= 0.97 * d.datagrams_sent as f64,
        "receiver got {got} datagrams of {} sent, {drops} dropped at the queue",
        d.datagrams_sent
    );
    assert_bounded(&s, drops);
}

fn addr(ip: std::net::Ipv4Addr, port: u16) -> SocketAddr {
    SocketAddr::V4(SocketAddrV4::new(ip, port))
}

/// A plain UDP socket at the other end: nobody acknowledges, nobody
/// answers the handshake. The CC-UDP sender sends its initial window and
/// then only a few datagrams per backed-off timeout, non-blocking sends
/// return WouldBlock, and a blocking send with a write timeout returns.
#[test]
fn a_silent_plain_udp_peer_gets_a_bounded_trickle() {
    let Some(_serial) = root() else {
        return;
    };
    let path = Path::build(PathConfig::default()).unwrap();
    let (snd, rcv) = (path.sender_addr(), path.receiver_addr());
    let stop = Arc::new(AtomicBool::new(false));
    let got = Arc::new(AtomicU64::new(0));
    let (flag, count) = (stop.clone(), got.clone());
    let receiver = path
        .spawn_in(Node::Receiver, move || {
            let s = UdpSocket::bind(addr(rcv, 6000)).unwrap();
            s.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
            let mut buf = [0u8; 2048];
            while !flag.load(Ordering::Relaxed) {
                if s.recv(&mut buf).is_ok() {
                    count.fetch_add(1, Ordering::Relaxed);
                }
            }
        })
        .unwrap();
    const SECS: u64 = 8;
    let sender = path
        .spawn_in(Node::Sender, move || {
            use std::{cell::RefCell, rc::Rc};
            let cm = Rc::new(RefCell::new(
                libcm::Cm::embedded(libcm::Config::default()).unwrap(),
            ));
            let mut s =
                libcm::ccudp::CcUdpSocket::open(&cm, addr(snd, 6001), addr(rcv, 6000)).unwrap();
            s.set_nonblocking(true).unwrap();
            let data = vec![0u8; 1200];
            let start = Instant::now();
            let (mut would_block, mut ok) = (0u64, 0u64);
            // (seconds, datagrams sent) whenever the count moves.
            let mut sent_at: Vec<(f64, u64)> = Vec::new();
            while start.elapsed() < Duration::from_secs(SECS) {
                match s.send(&data) {
                    Ok(_) => ok += 1,
                    Err(e) if e.kind() == ErrorKind::WouldBlock => {
                        would_block += 1;
                        s.drive().unwrap();
                        std::thread::sleep(Duration::from_millis(1));
                    }
                    Err(e) => panic!("send: {e}"),
                }
                let n = s.stats().sent;
                if sent_at.last().is_none_or(|&(_, m)| m != n) {
                    sent_at.push((start.elapsed().as_secs_f64(), n));
                }
            }
            let loop_secs = start.elapsed().as_secs_f64();
            // Blocking, with a write timeout: returns WouldBlock in time.
            s.set_nonblocking(false).unwrap();
            s.set_write_timeout(Some(Duration::from_millis(500)))
                .unwrap();
            let t = Instant::now();
            let blocked = loop {
                match s.send(&data) {
                    Ok(_) => {
                        if t.elapsed() > Duration::from_secs(5) {
                            break None;
                        }
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break Some(t.elapsed()),
                    Err(e) => panic!("blocking send: {e}"),
                }
            };
            (s.stats(), sent_at, would_block, ok, loop_secs, blocked)
        })
        .unwrap();
    let (st, sent_at, would_block, ok, loop_secs, blocked) =
        bounded(Duration::from_secs(SECS + 20), move || {
            sender.join().unwrap()
        });
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, Ordering::Relaxed);
    receiver.join().unwrap();
    path.teardown().unwrap();
    let got = got.load(Ordering::Relaxed);
    // Datagrams sent by the non-blocking loop from `t` on.
    let in_loop = sent_at.last().map_or(0, |p| p.1);
    let after = |t: f64| {
        in_loop
            - sent_at
                .iter()
                .filter(|p| p.0 < t)
                .map(|p| p.1)
                .max()
                .unwrap_or(0)
    };
    eprintln!(
        "sent {} datagrams ({} queued by send, {would_block} WouldBlock), {} after 0.5 s, {} after 4 s; \
         receiver got {got} (SYNs included); state {}, {} SYNs; timeline {sent_at:?}; blocking send returned after {blocked:?}",
        st.sent,
        ok,
        after(0.5),
        after(4.0),
        st.proto.state,
        st.proto.syns
    );
    assert!(
        would_block > 0,
        "non-blocking sends never returned WouldBlock"
    );
    assert!(
        loop_secs < SECS as f64 + 1.0,
        "the send loop overran: {loop_secs} s"
    );
    let blocked = blocked.expect("a blocking send with a write timeout never returned WouldBlock");
    assert!(
        blocked < Duration::from_millis(900),
        "write timeout 500 ms, returned after {blocked:?}"
    );
    assert_eq!(st.proto.state, "fallback");
    // The initial window (10 MTUs: 12 datagrams), then a trickle: a few
    // datagrams per (backed-off) timeout. Measured: 11 at once, then 4, 3,
    // 1, 3 at 1, 2, 3, 4 s and 1 at 7 s (12 to 15 after the first half
    // second, 1 to 4 in the last 4 s).
    assert!(
        after(0.0) <= 12 + 20,
        "{} datagrams to a peer that never answered",
        after(0.0)
    );
    assert!(
        after(0.5) <= 20,
        "{} datagrams after the initial window",
        after(0.5)
    );
    assert!(after(4.0) <= 8, "{} datagrams in the last 4 s", after(4.0));
    // The path is lossless: what left arrived (plus the handshake's SYNs).
    assert!(
        got >= st.sent && got <= st.sent + st.proto.syns,
        "received {got} of {}",
        st.sent
    );
}
