//! Layered audio: encoding choice, self-clocking, feedback to `cm_update`.
#![allow(clippy::unwrap_used)]

use cm_core::{Bytes, Duration, Instant, LossMode, PathEstimate, Rate};
use cm_transport::{AudioConfig, AudioReceiver, AudioReceiverConfig, AudioSender, CmCall};

fn ms(v: u64) -> Instant {
    Instant::from_micros(v * 1000)
}

fn est(bytes_per_sec: u64) -> PathEstimate {
    PathEstimate {
        rate: Some(Rate::from_bytes_per_sec(bytes_per_sec)),
        ..PathEstimate::default()
    }
}

#[test]
fn starts_lowest_and_picks_the_highest_encoding_not_above_the_rate() {
    let mut a = AudioSender::new(AudioConfig::default(), Instant::ZERO).unwrap();
    assert_eq!(a.encoding_kbps(), 10);
    // 10-12 kB/s is 80-96 kbit/s: 80 fits, 160 does not (sigcomm1999 §5.2).
    for r in [10_000, 11_000, 12_000] {
        a.on_rate_update(ms(1), est(r));
        assert_eq!(a.encoding_kbps(), 80, "rate {r} B/s");
    }
    a.on_rate_update(ms(2), est(20_000));
    assert_eq!(a.encoding_kbps(), 160);
    a.on_rate_update(ms(3), est(19_999));
    assert_eq!(a.encoding_kbps(), 80);
    a.on_rate_update(ms(4), est(6_000));
    assert_eq!(a.encoding_kbps(), 40);
    a.on_rate_update(ms(5), est(1_000_000));
    assert_eq!(a.encoding_kbps(), 320);
    a.on_rate_update(ms(6), est(100));
    assert_eq!(a.encoding_kbps(), 10);
    a.on_rate_update(ms(7), PathEstimate::default());
    assert_eq!(a.encoding_kbps(), 10, "no rate, no change");
}

#[test]
fn sends_at_the_encoding_rate_and_charges_every_packet() {
    let mut a = AudioSender::new(AudioConfig::default(), Instant::ZERO).unwrap();
    a.on_rate_update(Instant::ZERO, est(11_000)); // 80 kbit/s: 1000 B per 100 ms
    let mut sent = Vec::new();
    while let Some(t) = a.poll_timeout().filter(|&t| t < ms(2000)) {
        sent.extend(a.poll_transmit(t));
    }
    assert_eq!(sent.len(), 20);
    assert!(sent.iter().all(|p| p.len == 1000 && p.encoding_kbps == 80));
    assert_eq!(
        sent[1].sent_at - sent[0].sent_at,
        Duration::from_millis(100)
    );
    let calls: Vec<_> = std::iter::from_fn(|| a.poll_cm()).collect();
    assert_eq!(calls, vec![CmCall::Notify(Bytes(1000)); 20]);
    // Step up: 320 kbit/s is one packet per 25 ms.
    a.on_rate_update(ms(2000), est(50_000));
    let t0 = a.poll_timeout().unwrap();
    a.poll_transmit(t0);
    assert_eq!(a.poll_timeout().unwrap() - t0, Duration::from_millis(25));
}

#[test]
fn tracks_time_and_packets_per_encoding() {
    let mut a = AudioSender::new(AudioConfig::default(), Instant::ZERO).unwrap();
    a.on_rate_update(ms(1000), est(11_000));
    a.on_rate_update(ms(4000), est(5_000));
    let t = a.time_at_encoding(ms(5000));
    assert_eq!(t[0], (10, Duration::from_secs(1)));
    assert_eq!(t[3], (80, Duration::from_secs(3)));
    assert_eq!(t[2], (40, Duration::from_secs(1)));
    assert_eq!(
        t.iter().map(|x| x.1).fold(Duration::ZERO, |a, b| a + b),
        Duration::from_secs(5)
    );
}

#[test]
fn receiver_feedback_becomes_cm_updates_with_losses() {
    let mut a = AudioSender::new(AudioConfig::default(), Instant::ZERO).unwrap();
    a.on_rate_update(Instant::ZERO, est(11_000));
    let mut r = AudioReceiver::new(AudioReceiverConfig::default());
    let delay = Duration::from_millis(30);
    let mut updates = Vec::new();
    let mut now = Instant::ZERO;
    while now < ms(1000) {
        if let Some(p) = a.poll_transmit(now) {
            // Lose packets 3 and 4.
            if p.seq != 3 && p.seq != 4 {
                r.handle_packet(now + delay, &p);
            }
        }
        if let Some(fb) = r.poll_transmit(now + delay) {
            a.handle_feedback(now + delay + delay, &fb);
        }
        while let Some(c) = a.poll_cm() {
            if let CmCall::Update(fb) = c {
                updates.push(fb);
            }
        }
        now += Duration::from_millis(10);
    }
    assert!(!updates.is_empty());
    let nsent: u64 = updates.iter().map(|f| f.nsent.get()).sum();
    let nrecd: u64 = updates.iter().map(|f| f.nrecd.get()).sum();
    assert_eq!(nsent - nrecd, 2000, "two 1000-byte packets lost");
    let lossy: Vec<_> = updates
        .iter()
        .filter(|f| f.loss == LossMode::Transient)
        .collect();
    assert!(!lossy.is_empty());
    assert!(lossy.iter().all(|f| f.nrecd < f.nsent));
    // RTT = two one-way delays (the receiver's holding time is subtracted).
    assert!(
        updates
            .iter()
            .any(|f| f.rtt == Some(Duration::from_millis(60)))
    );
    assert!(
        updates
            .iter()
            .all(|f| f.rtt.is_none_or(|r| r <= Duration::from_millis(60)))
    );
}

#[test]
fn receiver_reports_every_n_packets_when_configured() {
    let mut r = AudioReceiver::new(AudioReceiverConfig {
        interval: Duration::from_secs(10),
        every_packets: Some(3),
    });
    let p = |seq| cm_transport::AudioPacket {
        seq,
        len: 1000,
        encoding_kbps: 80,
        sent_at: Instant::ZERO,
    };
    r.handle_packet(ms(1), &p(0));
    assert!(
        r.poll_transmit(ms(1)).is_some(),
        "first packet reported at once"
    );
    r.handle_packet(ms(2), &p(1));
    r.handle_packet(ms(3), &p(2));
    assert!(r.poll_transmit(ms(3)).is_none());
    r.handle_packet(ms(4), &p(3));
    let fb = r.poll_transmit(ms(4)).unwrap();
    assert_eq!((fb.highest_seq, fb.received_count), (3, 4));
}
