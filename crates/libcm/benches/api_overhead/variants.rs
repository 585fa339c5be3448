//! The CM variants: `buffered` (`cm_send`) and request/callback ALF, per
//! call (`alf`) or batched (`alf-bulk`), on a fresh handle each run.

use std::cell::RefCell;
use std::net::UdpSocket;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::time::{Duration as StdDuration, Instant};

use libcm::{Cm, CmError, Duration, Feedback, FlowId};

use crate::W;
use crate::placement::{LOST, diag};
use crate::raw::{Receiver, drain_acks, packet, sender_socket, wait_readable};

#[derive(Clone, Copy, PartialEq)]
pub enum Api {
    Buffered,
    Alf,
    AlfBulk,
}

struct AlfState {
    sock: UdpSocket,
    next: u64,
    n: u64,
    size: usize,
    sent_at: Vec<Instant>,
    buf: Vec<u8>,
}

/// One of the CM variants on a fresh handle `cm`.
pub fn run_cm(mut cm: Cm, api: Api, n: u64, size: usize) -> StdDuration {
    let rx = Receiver::start();
    let sock = sender_socket(&rx);
    let ack_sock = sock.try_clone().unwrap();
    let t0 = Instant::now();
    let mut acked = 0u64;
    let rtt_of =
        |sent: &[Instant], seq: u64| rtt_since(sent.get(seq as usize).copied().unwrap_or(t0));
    if api == Api::Buffered {
        let flow = cm.open_buffered(sock, rx.addr).unwrap();
        let mut queued = 0u64;
        let mut buf = Vec::new();
        let mut sent_at = vec![t0; n as usize];
        let mut idle = Instant::now();
        while acked < n {
            while queued < n && queued - acked < W {
                packet(queued, size, &mut buf);
                match cm.send(flow, &buf) {
                    Ok(()) => {
                        sent_at[queued as usize] = Instant::now();
                        queued += 1;
                    }
                    Err(CmError::QueueFull(_)) => break,
                    Err(e) => panic!("{e}"),
                }
            }
            cm.dispatch().unwrap();
            diag(1, acked);
            diag(2, queued);
            diag(3, cm.buffered_sent(flow).unwrap());
            let mut got = 0;
            let mut fbs = Vec::new();
            drain_acks(&ack_sock, |seq| {
                // RTT from when libcm sent it, not from when it was queued.
                let at = cm
                    .buffered_send_time(flow, seq)
                    .unwrap_or(sent_at[seq as usize]);
                fbs.push((flow, Feedback::acked(size as u64, rtt_since(at))));
                got += 1;
            });
            for (f, fb) in fbs {
                cm.update(f, fb).unwrap();
            }
            acked += got;
            if got == 0 {
                let t = cm.next_timeout().unwrap_or(StdDuration::from_millis(200));
                wait_for_acks(&mut cm, &ack_sock, t);
                if idle.elapsed() > StdDuration::from_secs(2) {
                    // A stall is a bug to see, not a number to print.
                    let st = cm.stat().unwrap();
                    eprintln!(
                        "buffered stall: acked {acked} queued {queued} backlog {} sent {} \
                         next_timeout {:?} mf {:?} flows {:?}",
                        cm.backlog(flow).unwrap(),
                        cm.buffered_sent(flow).unwrap(),
                        cm.next_timeout(),
                        st.macroflows,
                        st.flows
                    );
                    std::process::exit(3);
                }
                if idle.elapsed() > StdDuration::from_millis(200) && cm.backlog(flow).unwrap() == 0
                {
                    let sent = cm.buffered_sent(flow).unwrap();
                    LOST.fetch_add(sent - acked, Ordering::Relaxed);
                    acked = sent;
                    idle = Instant::now();
                }
            } else {
                idle = Instant::now();
            }
        }
        let e = t0.elapsed();
        debug_counters(&mut cm, flow);
        return e;
    }
    let flow = cm.open(None, rx.addr).unwrap();
    let st = Rc::new(RefCell::new(AlfState {
        sock,
        next: 0,
        n,
        size,
        sent_at: vec![t0; n as usize],
        buf: Vec::new(),
    }));
    let s2 = st.clone();
    // cmapp_send: one datagram per granted MTU (the core may answer several
    // one-MTU requests with one grant), then tell the CM what left.
    cm.register_send(move |cm, flow: FlowId, bytes| {
        let mut s = s2.borrow_mut();
        let slots = (bytes.get() / 1460).max(1);
        let mut sent = 0u64;
        let mut failed = 0u64;
        for _ in 0..slots {
            if s.next >= s.n {
                break;
            }
            let (seq, size) = (s.next, s.size);
            let mut buf = std::mem::take(&mut s.buf);
            packet(seq, size, &mut buf);
            let ok = s.sock.send(&buf).is_ok();
            s.buf = buf;
            if ok {
                s.sent_at[seq as usize] = Instant::now();
                s.next += 1;
                sent += size as u64;
            } else {
                failed += 1;
            }
        }
        drop(s);
        cm.notify(flow, sent).unwrap();
        // A full socket buffer: ask again rather than lose the slots.
        for _ in 0..failed {
            cm.request(flow).unwrap();
        }
    });
    let mut requested = W.min(n);
    if api == Api::AlfBulk {
        // Batch calls to the daemon (sent every 32 calls and before sleeping).
        cm.set_autoflush(false);
        if let Some(b) = std::env::var("CM_BENCH_BATCH")
            .ok()
            .and_then(|v| v.parse().ok())
        {
            cm.set_batch_limit(b);
        }
        cm.bulk_request(&vec![(flow, 1); requested as usize])
            .unwrap();
    } else {
        for _ in 0..requested {
            cm.request(flow).unwrap();
        }
    }
    let mut fbs = Vec::with_capacity(W as usize);
    let mut lost_guard = Instant::now();
    while acked < n {
        cm.dispatch().unwrap();
        diag(1, acked);
        diag(2, requested);
        diag(3, st.borrow().next);
        fbs.clear();
        {
            let s = st.borrow();
            drain_acks(&ack_sock, |seq| {
                fbs.push((flow, Feedback::acked(size as u64, rtt_of(&s.sent_at, seq))));
            });
        }
        let got = fbs.len() as u64;
        acked += got;
        let more = got.min(n - requested);
        requested += more;
        match api {
            Api::AlfBulk => {
                if got > 0 {
                    cm.bulk_update(&fbs).unwrap();
                    cm.bulk_request(&vec![(flow, 1); more as usize]).unwrap();
                }
            }
            _ => {
                for &(f, fb) in &fbs {
                    cm.update(f, fb).unwrap();
                }
                for _ in 0..more {
                    cm.request(flow).unwrap();
                }
            }
        }
        if got == 0 {
            let t = cm.next_timeout().unwrap_or(StdDuration::from_millis(200));
            if !t.is_zero() {
                wait_for_acks(&mut cm, &ack_sock, t);
            }
            if lost_guard.elapsed() > StdDuration::from_millis(200) {
                // Datagrams lost on loopback (a full receive buffer): count
                // them as done and keep the window of requests full.
                let sent = st.borrow().next;
                if std::env::var_os("CM_BENCH_DEBUG").is_some() {
                    let stat = cm.stat().unwrap();
                    eprintln!(
                        "stall: acked {acked} sent {sent} requested {requested} mf {:?} flows {:?} events {:?}",
                        stat.macroflows,
                        stat.flows,
                        cm.next_timeout()
                    );
                }
                LOST.fetch_add(sent - acked, Ordering::Relaxed);
                acked = sent;
                let more = (acked + W).min(n).saturating_sub(requested);
                requested += more;
                for _ in 0..more {
                    cm.request(flow).unwrap();
                }
                lost_guard = Instant::now();
            }
        } else {
            lost_guard = Instant::now();
        }
    }
    let e = t0.elapsed();
    debug_counters(&mut cm, flow);
    e
}

/// The RTT sample of a datagram sent at `at` and acknowledged now (at
/// least 1 µs).
fn rtt_since(at: Instant) -> Duration {
    cm_clock::from_std_duration(at.elapsed()).max(Duration::from_micros(1))
}

/// Sleep until acks arrive on `sock`, the CM has work (daemon mode: its
/// pollable descriptor) or `t` (at most 200 ms) passes.
fn wait_for_acks(cm: &mut Cm, sock: &UdpSocket, t: StdDuration) {
    let fd = if cm.mode() == libcm::Mode::Daemon {
        Some(cm.pollable_fd().unwrap())
    } else {
        None
    };
    wait_readable(sock, fd, t.min(StdDuration::from_millis(200)));
}

/// `CM_BENCH_DEBUG`: the run's macroflow's window and RTT (the daemon
/// keeps earlier runs' macroflows a while: the one with `flow`) and the IPC
/// counters.
fn debug_counters(cm: &mut Cm, flow: FlowId) {
    if std::env::var_os("CM_BENCH_DEBUG").is_some() {
        let st = cm.stat().unwrap();
        let mf = st
            .flows
            .iter()
            .find(|f| f.id == flow.to_u64())
            .unwrap()
            .macroflow;
        let m = st.macroflows.iter().find(|m| m.id == mf).unwrap();
        eprintln!(
            "    window {} srtt {}us rttvar {}us ipc (frames out, in, calls) {:?}",
            m.window,
            m.estimate.srtt_us,
            m.estimate.rttvar_us,
            cm.ipc_counters()
        );
    }
}

/// A CM variant: the API used, and embedded (`None`) or the daemon over a
/// transport.
pub type Variant = (Api, Option<libcm::Transport>);
