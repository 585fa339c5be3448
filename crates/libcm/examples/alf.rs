//! A request/callback (ALF) sender, the Rust example of docs/api.md: 1000
//! datagrams to a local echo receiver, each sent when the CM grants it, each
//! echo reported with an RTT sample, what is not echoed within 200 ms lost.
//! Runs against the daemon when one is running, embedded otherwise.

use std::net::UdpSocket;
use std::time::{Duration as StdDuration, Instant as StdInstant};

use libcm::{Cm, CmEvent, Duration, Feedback, LossMode};

const COUNT: usize = 1000;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // The receiver echoes each datagram's 8-byte sequence number.
    let rx = UdpSocket::bind("127.0.0.1:0")?;
    let dst = rx.local_addr()?;
    std::thread::spawn(move || {
        let mut buf = [0u8; 1500];
        while let Ok((n, from)) = rx.recv_from(&mut buf) {
            let _ = rx.send_to(&buf[..n.min(8)], from);
        }
    });
    let sock = UdpSocket::bind("127.0.0.1:0")?;
    sock.connect(dst)?;
    sock.set_read_timeout(Some(StdDuration::from_millis(1)))?;

    let mut cm = Cm::new()?; // the daemon if one listens, else an embedded CM
    let flow = cm.open(None, dst)?; // cm_open
    let mtu = cm.mtu(flow)? as usize; // cm_mtu
    // Per datagram: when it left and its length, until acked or lost.
    let mut sent: Vec<Option<(StdInstant, u64)>> = Vec::new();
    let (mut acked, mut lost, mut last_ack) = (0, 0, StdInstant::now());
    cm.request(flow)?; // cm_request
    while acked + lost < COUNT {
        while let Some(ev) = cm.poll_event()? {
            if let CmEvent::Send { flow, bytes } = ev {
                // cmapp_send: decide now what to send, up to `bytes`.
                let len = (bytes.get() as usize).min(mtu).min(1200);
                let mut pkt = vec![0u8; len];
                pkt[..8].copy_from_slice(&(sent.len() as u64).to_le_bytes());
                sock.send(&pkt)?;
                sent.push(Some((StdInstant::now(), len as u64)));
                cm.notify(flow, len as u64)?; // cm_notify
                if sent.len() < COUNT {
                    cm.request(flow)?;
                }
            }
        }
        let mut ack = [0u8; 8];
        while let Ok(8) = sock.recv(&mut ack) {
            let seq = u64::from_le_bytes(ack) as usize;
            if let Some((at, len)) = sent.get_mut(seq).and_then(Option::take) {
                // At least 1 µs: the CM refuses a zero RTT sample.
                let rtt = Duration::from_micros((at.elapsed().as_micros() as u64).max(1));
                cm.update(flow, Feedback::acked(len, rtt))?; // cm_update
                (acked, last_ack) = (acked + 1, StdInstant::now());
            }
        }
        if last_ack.elapsed() > StdDuration::from_millis(200) {
            // Nothing came back for a while: what is outstanding is lost.
            let gone: Vec<u64> = sent
                .iter_mut()
                .filter_map(Option::take)
                .map(|(_, l)| l)
                .collect();
            if !gone.is_empty() {
                let bytes = gone.iter().sum();
                cm.update(flow, Feedback::lossy(bytes, 0, LossMode::Persistent))?;
                lost += gone.len();
            }
            last_ack = StdInstant::now();
        }
    }
    let est = cm.query(flow)?; // cm_query: None until the CM has an estimate
    println!(
        "acked {acked}, lost {lost}: rate {:?}, srtt {:?}",
        est.rate, est.srtt
    );
    cm.close(flow)?; // cm_close
    Ok(())
}
