//! The codec's tests: every example message round-trips, optional values
//! and strings have one encoding, and bounds hold.

use core::fmt::Debug;

use cm_core::LossMode;

use super::Message;
use crate::DecodeError;
use crate::ToDaemon;
use crate::msg::examples;
use crate::{Frame, decode_frame};

/// The messages survive a frame alone and all batched in one.
fn round_trip<M: Message + PartialEq + Debug>(msgs: &[M]) {
    for m in msgs {
        let mut f = Frame::new();
        f.push(m);
        assert_eq!(
            decode_frame::<M>(&f.finish()).unwrap(),
            std::slice::from_ref(m)
        );
    }
    let mut f = Frame::new();
    for m in msgs {
        f.push(m);
    }
    assert_eq!(decode_frame::<M>(&f.finish()).unwrap(), msgs);
}

#[test]
fn every_call_round_trips() {
    round_trip(&examples::to_daemon());
}

#[test]
fn every_answer_round_trips() {
    round_trip(&examples::to_client());
}

/// An absent RTT sample or macroflow target has one encoding: a
/// nonzero value behind a clear flag is refused.
#[test]
fn an_optional_value_without_its_flag_is_refused() {
    let calls = [
        (
            ToDaemon::Update {
                flow: 7,
                nsent: 1460,
                nrecd: 1460,
                loss: LossMode::None,
                rtt_us: None,
                lost_age_us: None,
            },
            "lost data's age without its flag",
        ),
        (
            ToDaemon::SetMacroflow {
                seq: 1,
                flow: 7,
                target: None,
            },
            "target without its flag",
        ),
        (
            ToDaemon::SetCapacity {
                flow: 7,
                capacity: None,
            },
            "capacity without its flag",
        ),
    ];
    for (m, what) in calls {
        let mut body = Vec::new();
        let tag = m.encode_body(&mut body);
        assert_eq!(ToDaemon::decode_body(tag, &body), Ok(m));
        // The value is the body's last field: make its top byte nonzero.
        *body.last_mut().expect("a body") = 1;
        assert_eq!(
            ToDaemon::decode_body(tag, &body),
            Err(DecodeError::Invalid(what))
        );
    }
}

/// A controller spec is bounded text: longer than `MAX_SPEC` or not
/// UTF-8 is refused by the decoder (the daemon never sees it), and the
/// encoder never writes what the decoder would refuse.
#[test]
fn a_spec_is_bounded_utf8_text() {
    let set = |spec: String| ToDaemon::SetController {
        seq: 1,
        flow: 7,
        spec,
    };
    let longest = set("x".repeat(crate::MAX_SPEC));
    let mut body = Vec::new();
    let tag = longest.encode_body(&mut body);
    assert_eq!(ToDaemon::decode_body(tag, &body), Ok(longest));

    // One byte over, written by hand (the encoder would cut it).
    let mut body = Vec::new();
    body.extend_from_slice(&1u32.to_le_bytes());
    body.extend_from_slice(&7u64.to_le_bytes());
    let n = crate::MAX_SPEC + 1;
    body.extend_from_slice(&u16::try_from(n).unwrap().to_le_bytes());
    body.extend(std::iter::repeat_n(b'x', n));
    let too_long = ToDaemon::decode_body(tag, &body);
    assert!(
        matches!(too_long, Err(DecodeError::Invalid(_))),
        "{too_long:?}"
    );

    // Not UTF-8.
    let mut body = Vec::new();
    body.extend_from_slice(&1u32.to_le_bytes());
    body.extend_from_slice(&7u64.to_le_bytes());
    body.extend_from_slice(&2u16.to_le_bytes());
    body.extend_from_slice(&[0xc3, 0x28]);
    let bad = ToDaemon::decode_body(tag, &body);
    assert!(matches!(bad, Err(DecodeError::Invalid(_))), "{bad:?}");

    // The encoder cuts an over-long string at a character boundary, so
    // what it writes decodes.
    let over = set("é".repeat(crate::MAX_SPEC));
    let mut body = Vec::new();
    over.encode_body(&mut body);
    match ToDaemon::decode_body(tag, &body) {
        Ok(ToDaemon::SetController { spec, .. }) => {
            assert_eq!(spec, "é".repeat(crate::MAX_SPEC / 2));
        }
        other => panic!("{other:?}"),
    }
}
