//! Fuzz target for the CM protocol's decoders and state machines (issue
//! 15, item 5).
//!
//! Protocol datagrams come from the network, from anyone. Each input is
//! tried two ways:
//!
//! * as one datagram: `cm_proto::Packet::decode` never panics, and what
//!   decodes re-encodes to something that decodes to the same packet;
//! * as a stream of datagrams (each prefixed by a length byte) delivered
//!   to both ends of a negotiated association, with data sent in between:
//!   nothing panics, and no report credits more than was sent.
#![no_main]

use cm_core::Instant;
use cm_proto::endpoint::{Endpoint, EndpointConfig};
use cm_proto::wire::Packet;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(p) = Packet::decode(data) {
        let again = Packet::decode(&p.encode()).expect("re-encoded packet decodes");
        assert_eq!(again, p, "round trip");
    }

    let t = |ms: u64| Instant::from_micros(ms * 1000);
    let mut a: Endpoint<u8> = Endpoint::new(EndpointConfig::default(), 1);
    let mut b: Endpoint<u8> = Endpoint::new(EndpointConfig::default(), 2);
    a.connect(t(0), 2);
    let (_, syn) = a.poll_transmit().expect("SYN");
    b.on_datagram(t(1), t(1), 1, &syn);
    let (_, ack) = b.poll_transmit().expect("SYN-ACK");
    a.on_datagram(t(2), t(2), 2, &ack);
    let mut sent = 0u64;
    let mut rest = data;
    let mut ms = 3;
    while let Some((&len, tail)) = rest.split_first() {
        let n = usize::from(len).min(tail.len());
        let (dgram, tail) = tail.split_at(n);
        rest = tail;
        ms += 1;
        if let Some(h) = a.on_send(t(ms), 2, 7, 100) {
            sent += 100;
            let mut d = h.to_vec();
            d.resize(100, 0);
            b.on_datagram(t(ms), t(ms), 1, &d);
        }
        // The hostile datagram, to both ends.
        a.on_datagram(t(ms), t(ms), 2, dgram);
        b.on_datagram(t(ms), t(ms), 1, dgram);
        a.handle_timeout(t(ms + 600));
        while let Some((to, pkt)) = a.poll_transmit() {
            if to == 2 {
                b.on_datagram(t(ms), t(ms), 1, &pkt);
            }
        }
        while let Some((to, pkt)) = b.poll_transmit() {
            if to == 1 {
                a.on_datagram(t(ms), t(ms), 2, &pkt);
            }
        }
    }
    let mut credited = 0u64;
    while let Some((_, r)) = a.poll_report() {
        assert!(r.feedback.nrecd <= r.feedback.nsent);
        credited += r.feedback.nrecd.get();
    }
    assert!(credited <= sent, "credited {credited} of {sent} sent");
});
