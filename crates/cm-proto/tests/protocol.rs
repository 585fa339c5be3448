//! The prober against a responder over a channel that loses, duplicates
//! and reorders, with forged packets mixed in.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;

use proptest::prelude::*;

use cm_core::{Duration, Instant, LossMode};
use cm_proto::endpoint::{Endpoint, EndpointConfig};
use cm_proto::prober::{PeerState, Prober, ProberConfig, Report};
use cm_proto::wire::{FlowReport, Hint, Packet, Response};

const A: u8 = 1;
const B: u8 = 2;

/// A two-host run: `A` sends `packets` datagrams of 1000 bytes on flows
/// 0..flows to `B`, one every ms; the channel drops with probability
/// `loss`, duplicates with `dup`, and delays each datagram by 20 ms plus up
/// to `jitter` ms (reordering). Returns A's endpoint, the reports, and the
/// bytes sent per flow.
#[allow(clippy::type_complexity)]
fn run(
    seed: u64,
    packets: u32,
    flows: u32,
    loss: f64,
    dup: f64,
    jitter: u64,
    forge: bool,
) -> (Endpoint<u8>, Vec<Report>, BTreeMap<u32, u64>) {
    let mut rng = seed | 1;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        (rng >> 11) as f64 / (1u64 << 53) as f64
    };
    let mut a = Endpoint::new(EndpointConfig::default(), seed);
    let mut b = Endpoint::new(EndpointConfig::default(), !seed);
    // (arrival µs, tiebreak, destination, bytes)
    let mut wire: BTreeMap<(u64, u64), (u8, Vec<u8>)> = BTreeMap::new();
    let mut tie = 0u64;
    let mut reports = Vec::new();
    let mut sent: BTreeMap<u32, u64> = BTreeMap::new();
    let t = |us: u64| Instant::from_micros(us);
    a.connect(t(0), B);
    let end = u64::from(packets) * 1000 + 3_000_000;
    let mut now = 0u64;
    let mut sent_count = 0u32;
    while now < end {
        // Transmit what the endpoints queued.
        for (from, ep) in [(A, &mut a), (B, &mut b)] {
            while let Some((to, bytes)) = ep.poll_transmit() {
                for _ in 0..(1 + u32::from(next() < dup)) {
                    if next() >= loss {
                        let at = now + 20_000 + (next() * jitter as f64 * 1000.0) as u64;
                        tie += 1;
                        wire.insert((at, tie), (to, bytes.clone()));
                    }
                }
                let _ = from;
            }
        }
        // One datagram per ms from A.
        if now % 1000 == 0 && sent_count < packets {
            let flow = sent_count % flows;
            // 1000-byte datagrams, the CM header included when there is one.
            let d = match a.on_send(t(now), B, flow, 1000) {
                Some(h) => {
                    *sent.entry(flow).or_default() += 1000;
                    let mut v = h.to_vec();
                    v.extend_from_slice(&[0; 984]);
                    v
                }
                None => {
                    a.on_send_bare(B, flow, 1000);
                    *sent.entry(flow).or_default() += 1000;
                    vec![0xAA; 1000]
                }
            };
            for _ in 0..(1 + u32::from(next() < dup)) {
                if next() >= loss {
                    let at = now + 20_000 + (next() * jitter as f64 * 1000.0) as u64;
                    tie += 1;
                    wire.insert((at, tie), (B, d.clone()));
                }
            }
            sent_count += 1;
        }
        if forge && now % 7_000 == 0 {
            // An off-path host guessing: random probe numbers and counts.
            let r = Packet::Response(Response {
                this_probe: (next() * 1e9) as u64,
                last_probe: 0,
                delay_us: 0,
                flows: vec![FlowReport {
                    flow: 0,
                    bytes: (next() * 1e9) as u64,
                    lost: 0,
                    hint: Hint::default(),
                    packets: 0,
                }],
            });
            tie += 1;
            wire.insert((now + 1, tie), (A, r.encode()));
            tie += 1;
            wire.insert(
                (now + 1, tie),
                (
                    A,
                    Packet::Rst {
                        seq: (next() * 1e9) as u64,
                    }
                    .encode(),
                ),
            );
        }
        // Deliver what is due.
        while let Some((&(at, k), _)) = wire.first_key_value() {
            if at > now {
                break;
            }
            let Some((to, bytes)) = wire.remove(&(at, k)) else {
                break;
            };
            let (ep, from) = if to == A { (&mut a, B) } else { (&mut b, A) };
            ep.on_datagram(t(now), t(now), from, &bytes);
        }
        a.handle_timeout(t(now));
        b.handle_timeout(t(now));
        while let Some((_, r)) = a.poll_report() {
            reports.push(r);
        }
        now += 500;
    }
    (a, reports, sent)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Whatever the channel does, and whatever a guessing host injects, the
    /// reports never credit more bytes than were sent, flow by flow, and
    /// each report's received bytes stay within its sent bytes.
    #[test]
    fn a_response_never_credits_more_than_was_sent(
        seed in any::<u64>(),
        loss in 0.0f64..0.2,
        dup in 0.0f64..0.1,
        jitter in 0u64..30,
        flows in 1u32..4,
    ) {
        let (_, reports, sent) = run(seed, 400, flows, loss, dup, jitter, true);
        let mut resolved: BTreeMap<u32, (u64, u64)> = BTreeMap::new();
        for r in &reports {
            prop_assert!(r.feedback.nrecd <= r.feedback.nsent);
            let e = resolved.entry(r.flow).or_default();
            e.0 += r.feedback.nsent.get();
            e.1 += r.feedback.nrecd.get();
        }
        for (flow, (s, rcv)) in resolved {
            let total = sent.get(&flow).copied().unwrap_or(0);
            prop_assert!(s <= total, "flow {flow}: {s} resolved of {total} sent");
            prop_assert!(rcv <= s);
        }
    }
}

/// On a clean channel every byte is resolved and credited, the handshake's
/// bare bytes included, and no loss is reported.
#[test]
fn a_clean_channel_credits_everything() {
    let (a, reports, sent) = run(7, 500, 2, 0.0, 0.0, 0, false);
    let p = a.prober(&B).unwrap();
    assert_eq!(p.state(), PeerState::Negotiated);
    let mut credited: BTreeMap<u32, u64> = BTreeMap::new();
    for r in &reports {
        assert_eq!(r.feedback.loss, LossMode::None);
        *credited.entry(r.flow).or_default() += r.feedback.nrecd.get();
    }
    assert_eq!(credited, sent);
    assert!(p.srtt().is_some_and(|s| s.as_micros() >= 40_000));
}

/// With random loss and no reordering, the receiver's declared losses
/// match the packets dropped (the last few, which no later packet
/// reveals, aside), so the loss estimate is the true one.
#[test]
fn the_loss_estimate_tracks_the_true_loss() {
    let (a, reports, _) = run(11, 4000, 1, 0.02, 0.0, 0, false);
    let p = a.prober(&B).unwrap();
    let est = p.loss_estimate().unwrap();
    assert!((0.012..0.03).contains(&est), "estimate {est}");
    assert!(
        reports
            .iter()
            .any(|r| r.feedback.loss == LossMode::Transient)
    );
}

/// A's endpoint negotiated with B's (SYN at 0 ms, SYN-ACK back at 20 ms).
fn negotiated_endpoints() -> (Endpoint<u8>, Endpoint<u8>) {
    let t = |ms: u64| Instant::from_micros(ms * 1000);
    let mut a: Endpoint<u8> = Endpoint::new(EndpointConfig::default(), 3);
    let mut b: Endpoint<u8> = Endpoint::new(EndpointConfig::default(), 4);
    a.connect(t(0), B);
    let (_, syn) = a.poll_transmit().unwrap();
    b.on_datagram(t(10), t(10), A, &syn);
    let (_, ack) = b.poll_transmit().unwrap();
    a.on_datagram(t(20), t(20), B, &ack);
    (a, b)
}

/// A receiver that loses its state answers the next probe with RST; the
/// prober resolves what it had outstanding and handshakes again.
#[test]
fn rst_resynchronises() {
    let t = |ms: u64| Instant::from_micros(ms * 1000);
    let (mut a, _) = negotiated_endpoints();
    a.on_send(t(21), B, 0, 500).unwrap();
    // B restarts: a fresh endpoint with no association.
    let mut b: Endpoint<u8> = Endpoint::new(EndpointConfig::default(), 5);
    a.handle_timeout(t(40));
    let (_, probe) = a.poll_transmit().unwrap();
    b.on_datagram(t(50), t(50), A, &probe);
    let (_, rst) = b.poll_transmit().unwrap();
    assert!(matches!(Packet::decode(&rst), Ok(Packet::Rst { .. })));
    a.on_datagram(t(60), t(60), B, &rst);
    assert_eq!(a.state(&B), Some(PeerState::Handshaking));
    let (_, r) = a.poll_report().unwrap();
    assert_eq!((r.feedback.nsent.get(), r.feedback.nrecd.get()), (500, 0));
    assert_eq!(r.feedback.loss, LossMode::NotCongestion);
    // The new SYN goes out and the association comes back.
    let (_, syn) = a.poll_transmit().unwrap();
    b.on_datagram(t(70), t(70), A, &syn);
    let (_, ack) = b.poll_transmit().unwrap();
    a.on_datagram(t(80), t(80), B, &ack);
    assert_eq!(a.state(&B), Some(PeerState::Negotiated));
    assert_eq!(a.prober(&B).unwrap().counters.resets, 1);
}

/// No SYN-ACK: three SYNs (1, 2, 4 s apart), then fallback, then a retry
/// after `retry_after`.
#[test]
fn no_receiver_cm_falls_back_and_retries() {
    let t = |ms: u64| Instant::from_micros(ms * 1000);
    let mut a: Endpoint<u8> = Endpoint::new(EndpointConfig::default(), 3);
    a.connect(t(0), B);
    let mut syns = 0;
    let mut ms = 0;
    while a.state(&B) == Some(PeerState::Handshaking) && ms < 20_000 {
        while a.poll_transmit().is_some() {
            syns += 1;
        }
        ms += 10;
        a.handle_timeout(t(ms));
    }
    assert_eq!(a.state(&B), Some(PeerState::Fallback));
    assert_eq!(syns, 3);
    assert!((7_000..7_100).contains(&ms), "fell back at {ms} ms");
    a.handle_timeout(t(ms + 30_000));
    assert_eq!(a.state(&B), Some(PeerState::Handshaking));
}

/// A peer that goes silent with data outstanding: after a retransmission
/// timeout of unanswered probes the outstanding bytes are reported as
/// persistent congestion and the handshake starts again, so a sender
/// never waits for ever. An idle pause before new data is not silence.
#[test]
fn a_silent_peer_is_persistent_congestion_not_a_hang() {
    let t = |ms: u64| Instant::from_micros(ms * 1000);
    let (mut a, _) = negotiated_endpoints();
    // Idle for a minute, then data: the first probe goes out as usual.
    a.on_send(t(60_000), B, 0, 500).unwrap();
    a.handle_timeout(t(60_010));
    assert!(matches!(a.poll_transmit(), Some((_, ref p)) if Packet::decode(p).is_ok()));
    assert_eq!(a.state(&B), Some(PeerState::Negotiated));
    // No answer, ever: probes continue until the timeout, then persistent
    // loss and a new SYN.
    let mut ms = 60_010;
    while a.state(&B) == Some(PeerState::Negotiated) && ms < 65_000 {
        ms += 10;
        a.handle_timeout(t(ms));
        while a.poll_transmit().is_some() {}
    }
    assert_eq!(a.state(&B), Some(PeerState::Handshaking));
    assert!((61_000..62_000).contains(&ms), "gave up at {ms} ms");
    let (_, r) = a.poll_report().unwrap();
    assert_eq!(r.feedback.loss, LossMode::Persistent);
    assert_eq!((r.feedback.nsent.get(), r.feedback.nrecd.get()), (500, 0));
    assert_eq!(a.prober(&B).unwrap().counters.silences, 1);
}

/// A negotiated prober (SYN at 0 ms, SYN-ACK at 20 ms: srtt 20 ms, so
/// probes every 10 ms) and a response to probe `seq` with `bytes` and
/// `packets` received on flow 0.
fn negotiated() -> Prober {
    let mut p = Prober::new(ProberConfig::default(), Instant::from_micros(0), 9);
    let Some(Packet::Syn { isn }) = p.poll_transmit() else {
        panic!("no SYN");
    };
    p.on_packet(Instant::from_micros(20_000), &Packet::SynAck { isn })
        .unwrap();
    assert_eq!(p.state(), PeerState::Negotiated);
    p
}

fn response(seq: u64, bytes: u64, packets: u32) -> Packet {
    Packet::Response(Response {
        this_probe: seq,
        last_probe: seq - 1,
        delay_us: 0,
        flows: vec![FlowReport {
            flow: 0,
            bytes,
            lost: 0,
            hint: Hint::default(),
            packets,
        }],
    })
}

fn probe_seq(p: &mut Prober) -> u64 {
    match p.poll_transmit() {
        Some(Packet::Probe { seq }) => seq,
        other => panic!("expected a probe, got {other:?}"),
    }
}

/// Probes follow the timer, half an srtt apart while data is unresolved
/// (§4.2.1), and a response to a probe that covered nothing new is still
/// reported with its RTT sample (an empty report: the receiver answered,
/// so the core does not age the macroflow).
#[test]
fn a_response_that_resolves_nothing_new_is_still_reported() {
    let t = |ms: u64| Instant::from_micros(ms * 1000);
    let mut p = negotiated();
    p.on_send(t(21), 0, 1000).unwrap();
    assert_eq!(p.poll_timeout(), Some(t(31)));
    p.handle_timeout(t(31));
    let p1 = probe_seq(&mut p);
    p.on_send(t(35), 0, 1000).unwrap();
    p.handle_timeout(t(41));
    let p2 = probe_seq(&mut p);
    // P1 answered: 1000 bytes resolved, 1000 still out; the timer keeps
    // its time.
    p.on_packet(t(48), &response(p1, 1000, 1)).unwrap();
    let r = p.poll_report().unwrap();
    assert_eq!(
        (r.feedback.nsent.get(), r.feedback.nrecd.get()),
        (1000, 1000)
    );
    assert_eq!(p.poll_timeout(), Some(t(51)));
    p.handle_timeout(t(51));
    let p3 = probe_seq(&mut p);
    // P2 resolves the rest; P3 covered nothing new, but its response is
    // still reported, empty, with its RTT.
    p.on_packet(t(61), &response(p2, 2000, 2)).unwrap();
    let r = p.poll_report().unwrap();
    assert_eq!(
        (r.feedback.nsent.get(), r.feedback.nrecd.get()),
        (1000, 1000)
    );
    p.on_packet(t(68), &response(p3, 2000, 2)).unwrap();
    let r = p.poll_report().unwrap();
    assert_eq!(r.feedback.nsent.get(), 0);
    assert_eq!(r.feedback.loss, LossMode::None);
    assert_eq!(r.feedback.rtt, Some(Duration::from_millis(17)));
    assert!(p.poll_report().is_none());
}

/// On a path of tens of microseconds, probes are no more frequent than
/// `min_probe_interval` (250 µs by default), not twice per RTT; with the
/// floor at zero they follow the RTT as the paper has it (§4.2.1).
#[test]
fn probes_on_a_very_short_path_are_at_least_the_floor_apart() {
    let us = Instant::from_micros;
    for (floor, want) in [(None, 250), (Some(0), 20)] {
        let mut cfg = ProberConfig::default();
        if let Some(f) = floor {
            cfg.min_probe_interval = Duration::from_micros(f);
        }
        let mut p = Prober::new(cfg, us(0), 9);
        let Some(Packet::Syn { isn }) = p.poll_transmit() else {
            panic!("no SYN");
        };
        // SYN-ACK after 40 µs: srtt 40 µs, half of it 20 µs.
        p.on_packet(us(40), &Packet::SynAck { isn }).unwrap();
        p.on_send(us(41), 0, 1000).unwrap();
        assert_eq!(p.poll_timeout(), Some(us(41 + want)), "floor {floor:?}");
    }
}

/// A sender that heads datagrams as it queues them (`assign_seq`) and
/// counts a batch's departures at once (`on_departed_run`) is seen by the
/// responder exactly as one that counts each datagram: consecutive
/// numbers, the same bytes resolved.
#[test]
fn a_run_of_departures_counts_as_its_datagrams_one_by_one() {
    let t = |ms: u64| Instant::from_micros(ms * 1000);
    let (mut one, mut run) = (negotiated(), negotiated());
    let mut seqs = Vec::new();
    for _ in 0..5 {
        let (seq, epoch) = run.assign_seq(0).unwrap();
        let (pkt, e1) = one.assign(0).unwrap();
        assert_eq!(
            pkt.encode(),
            cm_proto::wire::datagram_header(0, seq).to_vec()
        );
        assert_eq!(epoch, e1);
        seqs.push(seq);
        assert!(one.on_departed(t(21), 0, 1000, epoch));
    }
    assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1), "{seqs:?}");
    let epoch = run.assign_seq(0).map(|(_, e)| e).unwrap();
    run.unassign(0);
    assert!(run.on_departed_run(t(21), 0, 5000, 5, epoch));
    // A stale epoch is not counted.
    assert!(!run.on_departed_run(t(21), 0, 1000, 1, epoch + 1));
    for p in [&mut one, &mut run] {
        assert_eq!(p.poll_timeout(), Some(t(31)));
        p.handle_timeout(t(31));
        let s = probe_seq(p);
        p.on_packet(t(45), &response(s, 5000, 5)).unwrap();
        let r = p.poll_report().unwrap();
        assert_eq!(
            (r.feedback.nsent.get(), r.feedback.nrecd.get()),
            (5000, 5000)
        );
    }
}
