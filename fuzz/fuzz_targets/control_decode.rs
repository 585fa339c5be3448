//! Fuzz target for the control-socket decoder (issue 4, item 7).
//!
//! The daemon decodes untrusted bytes from any local user as `ToDaemon`
//! frames, and libcm decodes the daemon's bytes as `ToClient` frames, so
//! every input is tried as both. Beyond "never panics", every frame that
//! decodes is re-encoded with `cm_ipc::Frame` and must round-trip:
//!
//! * the re-encoded frame decodes, to as many messages;
//! * re-encoding those gives the same bytes again (encode is a fixed point
//!   of decode; byte equality also covers f64 fields holding NaN, for which
//!   `PartialEq` is false);
//! * each message equals its round-tripped self under `PartialEq`, unless
//!   it holds a NaN (detected as `m != m`), where the bytes decide;
//! * `decode_frame_into` agrees with `decode_frame`, and on error keeps
//!   exactly the messages before the bad one, each of which round-trips.
//!
//! The re-encoding need not equal the input byte for byte: the codec
//! accepts some non-canonical encodings (an absent optional u64 whose
//! placeholder is not 0), which decode to the same message.
#![no_main]

use std::fmt::Debug;

use cm_ipc::{Frame, MAX_MESSAGES, Message, ToClient, ToDaemon, decode_frame, decode_frame_into};
use libfuzzer_sys::fuzz_target;

fn encode<M: Message>(msgs: &[M]) -> Vec<u8> {
    let mut f = Frame::new();
    for m in msgs {
        f.push(m);
    }
    assert_eq!(f.len(), msgs.len());
    let so_far = f.bytes().to_vec();
    let out = f.finish();
    assert_eq!(so_far, out, "Frame::bytes and Frame::finish disagree");
    assert!(f.is_empty(), "Frame::finish did not reset the builder");
    out
}

/// `msgs` came out of the decoder: they must survive encode → decode.
fn round_trip<M: Message + PartialEq + Debug>(msgs: &[M]) {
    let bytes = encode(msgs);
    let again: Vec<M> = match decode_frame(&bytes) {
        Ok(v) => v,
        Err(e) => {
            panic!("re-encoded frame does not decode: {e}\nmessages: {msgs:?}\nbytes: {bytes:02x?}")
        }
    };
    assert_eq!(
        again.len(),
        msgs.len(),
        "message count changed in the round trip"
    );
    let bytes_again = encode(&again);
    assert_eq!(
        bytes, bytes_again,
        "encode(decode(encode(m))) != encode(m)\nfirst: {msgs:?}\nsecond: {again:?}"
    );
    for (a, b) in msgs.iter().zip(&again) {
        // `a != a` only when an f64 field is NaN; the byte check above
        // already compared those exactly.
        #[allow(clippy::eq_op)]
        let comparable = a == a;
        if comparable {
            assert_eq!(a, b, "message changed in the round trip");
        }
    }
}

fn check<M: Message + PartialEq + Debug>(data: &[u8]) {
    let whole = decode_frame::<M>(data);
    let mut partial: Vec<M> = Vec::new();
    let into = decode_frame_into(data, &mut partial);
    match (&whole, &into) {
        (Ok(_), Ok(())) => {}
        (Err(a), Err(b)) => assert_eq!(a, b, "decode_frame and decode_frame_into disagree"),
        _ => panic!("decode_frame {whole:?} vs decode_frame_into {into:?}"),
    }
    match whole {
        Ok(msgs) => {
            assert!(msgs.len() <= MAX_MESSAGES);
            assert_eq!(
                data.get(4..6)
                    .map(|c| usize::from(u16::from_le_bytes([c[0], c[1]]))),
                Some(msgs.len()),
                "decoded a different number of messages than the header's count"
            );
            round_trip(&msgs);
        }
        Err(_) => {
            // The messages before the bad one were well-formed.
            round_trip(&partial);
        }
    }
}

fuzz_target!(|data: &[u8]| {
    check::<ToDaemon>(data);
    check::<ToClient>(data);
});
