#![allow(clippy::unwrap_used)]
//! The rule table, one requirement set per row: the expected transport,
//! controller and a substring of the reason; then the error cases.

use cm_select::{Buffering, Controller, Requirements, SelectError, Transport, select};

use Controller::*;
use Transport::*;

/// (requirements in text form, transport, controller, reason substring)
const ROWS: &[(&str, Transport, Option<Controller>, &str)] = &[
    // 1. TAPS defaults: a reliable ordered stream.
    ("", LinuxTcp, None, "reliable ordered stream needs TCP"),
    // 2. Reliable and delay-sensitive: TCP with Nagle off.
    ("delay-ms=100", LinuxTcp, None, "Nagle off"),
    // 3. Reliable greedy on/off: TCP with a send buffer (RFC 2861).
    (
        "rate=8M behaviour=greedy+on-off:on=2s,off=500ms",
        LinuxTcp,
        None,
        "RFC 2861",
    ),
    // 4. Voice: unreliable, 150 ms, 64 kbit/s.
    (
        "profile=datagram delay-ms=150 rate=64k behaviour=app-limited",
        CcUdp,
        Some(Tfrc),
        "target 150 ms",
    ),
    // 5. Reliability only preferred, delay-sensitive video: unreliable TFRC.
    (
        "reliability=prefer preserve-order=prefer delay=200ms rate=2M",
        CcUdp,
        Some(Tfrc),
        "dropped for the delay target",
    ),
    // 6. Greedy unreliable bulk: AIMD.
    (
        "profile=datagram",
        CcUdp,
        Some(Aimd),
        "greedy unreliable bulk",
    ),
    // 7. Layered media: SQRT.
    (
        "profile=datagram behaviour=app-limited steps=32k,64k,128k",
        CcUdp,
        Some(Sqrt),
        "3 rate steps",
    ),
    // 8. Adaptive codec within bounds: IIAD.
    (
        "profile=datagram behaviour=app-limited bounds=32k..256k",
        CcUdp,
        Some(Iiad),
        "rate-bounded",
    ),
    // 9. NACK-based streaming: ISCC.
    (
        "profile=datagram feedback=nack rate=1M behaviour=app-limited",
        CcUdp,
        Some(Iscc),
        "iscc",
    ),
    // 10. Application-limited unreliable stream at a target rate: TFRC.
    (
        "profile=datagram behaviour=app-limited rate=500k",
        CcUdp,
        Some(Tfrc),
        "application-limited",
    ),
    // 11. Congestion control prohibited: raw UDP.
    (
        "profile=datagram congestion-control=prohibit",
        Udp,
        None,
        "explicitly Prohibited",
    ),
    // 12. Congestion control only avoided: still CC-UDP, with a note.
    (
        "profile=datagram congestion-control=avoid",
        CcUdp,
        Some(Aimd),
        "Avoid not honoured",
    ),
    // 13. No preference on reliability, ordering not wanted: unreliable.
    (
        "reliability=no-preference preserve-order=no-preference",
        CcUdp,
        Some(Aimd),
        "raw UDP refused",
    ),
    // 14. No preference on reliability, ordering required: TCP.
    ("reliability=no-preference", LinuxTcp, None, "TCP"),
    // 15. Reliable with message boundaries only preferred: TCP, noted.
    (
        "preserve-msg-boundaries=prefer",
        LinuxTcp,
        None,
        "not kept (byte stream)",
    ),
    // 16. Greedy unreliable on/off sender with a rate: AIMD with a buffer.
    (
        "profile=datagram rate=1M behaviour=on-off:on=1s,off=1s",
        CcUdp,
        Some(Aimd),
        "greedy",
    ),
];

#[test]
fn rule_table() {
    for (i, (text, transport, controller, reason)) in ROWS.iter().enumerate() {
        let req: Requirements = text.parse().unwrap();
        let c = select(&req).unwrap_or_else(|e| panic!("row {}: {text:?}: {e}", i + 1));
        let line = c.reason();
        assert_eq!(c.transport, *transport, "row {}: {line}", i + 1);
        assert_eq!(c.controller, *controller, "row {}: {line}", i + 1);
        assert!(
            line.contains(reason),
            "row {}: {line:?} lacks {reason:?}",
            i + 1
        );
        assert!(!line.contains('\n'), "row {}: one line", i + 1);
        if c.transport == CcUdp {
            assert!(line.contains("raw UDP refused"), "row {}: {line}", i + 1);
        }
    }
}

#[test]
fn voice_reason_line_and_tuning() {
    let req: Requirements = "profile=datagram delay-ms=150 rate=64k behaviour=app-limited"
        .parse()
        .unwrap();
    let c = select(&req).unwrap();
    assert_eq!(c.packet_size, Some(160));
    assert_eq!(c.buffering, Buffering::Packets(1));
    assert_eq!(c.controller_spec().as_deref(), Some("tfrc:s=176"));
    assert_eq!(
        c.reason(),
        "CC-UDP with TFRC, 160-byte packets, queue 1: unreliable, delay-sensitive (target 150 ms) \
         media needs a smooth TCP-friendly rate (RFC 5348); raw UDP refused because congestion \
         control is not prohibited"
    );
    assert_eq!(
        c.summary(),
        "transport=ccudp controller=tfrc:s=176 packet=160 queue=1p"
    );
}

#[test]
fn on_off_buffers_by_hand() {
    // 8 Mbit/s = 1e6 B/s, on 2 s, off 0.5 s: 1e6 * 2 * 0.5 / 2.5 = 400000.
    let c = select(
        &"rate=8M behaviour=greedy+on-off:on=2s,off=500ms"
            .parse()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(c.buffering, Buffering::Bytes(400_000));
    // 1 Mbit/s = 125000 B/s, 1 s on, 1 s off: 62500.
    let c = select(
        &"profile=datagram rate=1M behaviour=on-off:on=1s,off=1s"
            .parse()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(c.buffering, Buffering::Bytes(62_500));
    assert_eq!(c.packet_size, Some(1456));
}

fn err(text: &str) -> SelectError {
    let req: Requirements = text.parse().unwrap();
    match select(&req) {
        Ok(c) => panic!("{text:?} chose {c}"),
        Err(e) => e,
    }
}

#[test]
fn errors_not_guesses() {
    let all = "reliability=prohibit preserve-order=prohibit preserve-msg-boundaries=prohibit \
               congestion-control=prohibit";
    assert_eq!(err(all), SelectError::EverythingProhibited);
    assert!(err(all).to_string().contains("all Prohibited"));
    assert_eq!(
        err("congestion-control=prohibit"),
        SelectError::ReliableWithoutCongestionControl
    );
    let e = err("preserve-msg-boundaries=require");
    assert!(matches!(e, SelectError::NeedsSctp(_)), "{e}");
    assert!(e.to_string().contains("SCTP"), "{e}");
    assert!(matches!(
        err("preserve-order=prohibit"),
        SelectError::NeedsSctp(_)
    ));
    assert_eq!(
        err("reliability=avoid"),
        SelectError::OrderWithoutReliability
    );
    assert_eq!(
        err("reliability=prohibit preserve-order=no-preference preserve-msg-boundaries=prohibit"),
        SelectError::UnreliableStream
    );
    assert_eq!(
        err("profile=datagram congestion-control=prohibit preserve-order=require"),
        SelectError::OrderWithoutReliability
    );
    for bad in [
        "min-rate=128k rate=64k",
        "delay-ms=0",
        "profile=datagram steps=64k,32k",
        "profile=datagram bounds=256k..32k",
        "profile=datagram steps=32k,64k rate=48k",
        "profile=datagram bounds=32k..64k min-rate=100k",
        "behaviour=on-off:on=0s,off=1s",
    ] {
        assert!(matches!(err(bad), SelectError::Invalid(_)), "{bad}");
    }
    let e = err("profile=datagram delay-ms=10 rate=64k");
    assert!(
        matches!(e, SelectError::DelayUnreachable { payload: 10, .. }),
        "{e}"
    );
}

#[test]
fn bad_text_is_an_error() {
    for bad in [
        "reliability=maybe",
        "rate=fast",
        "delay=150",
        "delay-ms=-3",
        "colour=blue",
        "steps=",
        "behaviour=on-off:on=2s",
        "profile=video",
        "novalue",
    ] {
        assert!(bad.parse::<Requirements>().is_err(), "{bad}");
    }
}

#[test]
fn every_controller_spec_parses() {
    for (c, text) in [
        (Aimd, "aimd"),
        (Tfrc, "tfrc"),
        (Iscc, "iscc:l=2"),
        (Sqrt, "binomial:k=0.5,l=0.5"),
        (Iiad, "binomial:k=1,l=0"),
    ] {
        let cfg = c.config(160).unwrap();
        assert!(cfg.validate().is_ok(), "{c}");
        assert!(cfg.to_string().starts_with(text), "{c}: {cfg}");
    }
}
