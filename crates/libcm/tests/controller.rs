//! Choosing a macroflow's controller and handing it a capacity estimate
//! (`Cm::set_controller`, `Cm::set_capacity`), in embedded mode and against
//! the daemon over both transports, with the same assertions; and the
//! daemon's handling of controller specs from a hostile client.

#![allow(clippy::unwrap_used)]

mod common;

use std::net::SocketAddr;

use common::{TestDaemon, next_event};
use libcm::{CmError, CmEvent, ControllerConfig, Duration, ErrorCode, Feedback, FlowId, Rate};

fn dst(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

/// The one macroflow record of the caller's view with id `mf`.
fn record(cm: &mut libcm::Cm, mf: libcm::MacroflowId) -> libcm::MacroflowStat {
    let s = cm.stat().unwrap();
    let found = s.macroflows.into_iter().find(|m| m.id == mf.to_u64());
    found.expect("the macroflow is in the listing")
}

both_modes!(
    controller_and_capacity_show_in_stat,
    |h: &common::Harness| {
        let mut cm = h.cm();
        let a = cm.open(None, dst(9)).unwrap();
        let b = cm.open(None, dst(10)).unwrap();
        let mf = cm.macroflow_of(a).unwrap();
        let m = record(&mut cm, mf);
        assert_eq!((m.controller.as_str(), m.capacity), ("aimd", None));

        // ISCC on the macroflow of `a`, which `b` shares.
        cm.set_controller(a, &"iscc:l=2".parse().unwrap()).unwrap();
        let m = record(&mut cm, mf);
        assert_eq!((m.controller.as_str(), m.capacity), ("iscc", None));
        cm.set_capacity(b, Some(Rate::from_bits_per_sec(10_000_000)))
            .unwrap();
        let m = record(&mut cm, mf);
        assert_eq!(m.capacity, Some(1_250_000));
        // The stat views agree across the two calls of `cm query <host>`.
        let q = cm.query_host("127.0.0.1".parse().unwrap()).unwrap();
        assert_eq!(q[0].controller, "iscc");
        assert_eq!(q[0].capacity, Some(1_250_000));

        // The macroflow keeps sending under its new controller.
        cm.request(a).unwrap();
        match next_event(&mut cm) {
            CmEvent::Send { flow, bytes } => {
                assert_eq!(flow, a);
                cm.notify(a, bytes.get()).unwrap();
                cm.update(a, Feedback::acked(bytes.get(), Duration::from_millis(20)))
                    .unwrap();
            }
            other => panic!("expected a grant, got {other:?}"),
        }
        assert!(cm.query(a).unwrap().rate.is_some());

        // Forgetting the capacity, and back to AIMD: the capacity stays with
        // the macroflow, whatever it runs.
        cm.set_capacity(a, None).unwrap();
        assert_eq!(record(&mut cm, mf).capacity, None);
        cm.set_capacity(a, Some(Rate::from_bytes_per_sec(500_000)))
            .unwrap();
        cm.set_controller(b, &ControllerConfig::default()).unwrap();
        let m = record(&mut cm, mf);
        assert_eq!((m.controller.as_str(), m.capacity), ("aimd", Some(500_000)));
        cm.set_controller(b, &"iiad:mode=window".parse().unwrap())
            .unwrap();
        assert_eq!(record(&mut cm, mf).controller, "iiad");
    }
);

both_modes!(
    packet_bunch_samples_become_the_macroflows_capacity,
    |h: &common::Harness| {
        let mut cm = h.cm();
        let a = cm.open(None, dst(9)).unwrap();
        let b = cm.open(None, dst(10)).unwrap();
        let mf = cm.macroflow_of(a).unwrap();
        cm.set_controller(a, &"iscc:l=2".parse().unwrap()).unwrap();
        // Samples from both flows feed one filter; it needs three before
        // it gives an estimate, and a zero sample carries nothing.
        cm.capacity_sample(a, Rate::from_bytes_per_sec(190_000))
            .unwrap();
        cm.capacity_sample(b, Rate::from_bytes_per_sec(0)).unwrap();
        cm.capacity_sample(b, Rate::from_bytes_per_sec(189_000))
            .unwrap();
        assert_eq!(record(&mut cm, mf).capacity, None);
        cm.capacity_sample(a, Rate::from_bytes_per_sec(191_000))
            .unwrap();
        let c = record(&mut cm, mf).capacity.expect("an estimate");
        assert!((189_000..=191_000).contains(&c), "{c}");
        // An unknown flow is ENOENT.
        let bogus = FlowId::from_u64(0xdead_beef);
        let e = cm
            .capacity_sample(bogus, Rate::from_bytes_per_sec(1))
            .unwrap_err();
        assert_eq!(e.code(), -2, "{e}");
    }
);

both_modes!(
    an_unusable_controller_is_refused_and_the_cm_keeps_serving,
    |h: &common::Harness| {
        let mut cm = h.cm();
        let f = cm.open(None, dst(9)).unwrap();
        let mf = cm.macroflow_of(f).unwrap();
        // Parameters no parser would give, built by hand.
        let bad = ControllerConfig::Iscc(libcm_iscc(0.5));
        match cm.set_controller(f, &bad) {
            Err(e @ CmError::Refused { .. }) => {
                assert_eq!(e.code(), -22, "EINVAL");
                assert!(e.to_string().contains("l > 1"), "{e}");
            }
            other => panic!("expected a refusal, got {other:?}"),
        }
        // Text that does not parse is the same refusal, through `?`.
        let parsed: Result<ControllerConfig, CmError> = "iscc:l=0.5"
            .parse::<ControllerConfig>()
            .map_err(CmError::from);
        assert!(matches!(
            parsed,
            Err(CmError::Refused {
                code: ErrorCode::InvalidArgument,
                ..
            })
        ));
        // An unknown flow is ENOENT, as for every call.
        let bogus = FlowId::from_u64(0xdead_beef);
        let e = cm
            .set_controller(bogus, &ControllerConfig::default())
            .unwrap_err();
        assert_eq!(e.code(), -2, "{e}");
        // Nothing changed, and the CM still answers.
        assert_eq!(record(&mut cm, mf).controller, "aimd");
        cm.request(f).unwrap();
        assert!(matches!(next_event(&mut cm), CmEvent::Send { .. }));
    }
);

/// An ISCC config with decrease power `l` (the other fields default).
fn libcm_iscc(l: f64) -> cm_core::controller::IsccConfig {
    cm_core::controller::IsccConfig {
        l,
        ..Default::default()
    }
}

/// A configuration the text form cannot carry (an AIMD initial window)
/// runs embedded, and is refused before it is sent to the daemon rather
/// than sent as something else.
#[test]
fn a_config_without_an_exact_text_form_stays_out_of_the_daemon() {
    let custom = ControllerConfig::Aimd(cm_core::controller::AimdConfig {
        initial_window: Some(libcm::Bytes(4 * 1460)),
        ..Default::default()
    });
    let mut cm = common::Harness::embedded().cm();
    let f = cm.open(None, dst(9)).unwrap();
    cm.set_controller(f, &custom).unwrap();
    let d = TestDaemon::start();
    let mut cm = d.client();
    let f = cm.open(None, dst(9)).unwrap();
    assert!(matches!(
        cm.set_controller(f, &custom),
        Err(CmError::Invalid(_))
    ));
}

/// The daemon parses the spec a client sends and never trusts it: text
/// that does not parse gets a refusal with the parser's reason, text over
/// `MAX_SPEC` bytes or not UTF-8 a `Malformed` error, and the client (and
/// everyone else) is served on.
#[test]
fn the_daemon_refuses_bad_spec_text_and_serves_on() {
    use cm_ipc::{Frame, ToClient, ToDaemon};
    let d = TestDaemon::start();
    let mut good = d.client();
    // Another host: a macroflow of its own.
    let g = good
        .open(None, SocketAddr::from(([127, 0, 0, 2], 7)))
        .unwrap();
    let fd = common::raw::connect_raw(&d.path);
    let mut fr = Frame::new();
    fr.push(&ToDaemon::Hello {
        version: cm_ipc::VERSION,
    });
    fr.push(&ToDaemon::Open {
        seq: 1,
        src: None,
        dst: dst(8),
    });
    let r = common::raw::roundtrip(&fd, &fr.finish());
    let Some(ToClient::Opened { flow, .. }) = r.get(1) else {
        panic!("{r:?}");
    };
    let flow = *flow;

    // Specs that do not parse, each refused in words.
    let bad = [
        "iscc:l=0.5",
        "no-such-controller",
        "iiad:k=1,l",
        "binomial:k=NaN,l=1",
        ":::",
        "",
        "aimd:mode=sideways",
    ];
    for (i, spec) in bad.iter().enumerate() {
        let seq = 10 + u32::try_from(i).unwrap();
        fr.push(&ToDaemon::SetController {
            seq,
            flow,
            spec: (*spec).into(),
        });
        let r = common::raw::roundtrip(&fd, &fr.finish());
        match &r[..] {
            [
                ToClient::Refused {
                    seq: s,
                    flow: f,
                    code: cm_ipc::ErrorCode::InvalidArgument,
                    why,
                },
            ] => {
                assert_eq!((*s, *f), (seq, flow));
                let expect = spec.parse::<ControllerConfig>().unwrap_err().to_string();
                assert_eq!(*why, expect);
            }
            other => panic!("{spec:?}: {other:?}"),
        }
    }
    // Another client's flow looks like no flow.
    fr.push(&ToDaemon::SetController {
        seq: 30,
        flow: g.to_u64(),
        spec: "iscc".into(),
    });
    let r = common::raw::roundtrip(&fd, &fr.finish());
    assert!(
        matches!(
            r[..],
            [ToClient::Error {
                seq: 30,
                code: cm_ipc::ErrorCode::UnknownFlow,
                ..
            }]
        ),
        "{r:?}"
    );
    // Too long, and not UTF-8, written by hand: the frame is malformed.
    for text in [vec![b'x'; cm_ipc::MAX_SPEC + 1], vec![0xc3, 0x28]] {
        let mut body = Vec::new();
        body.extend_from_slice(&31u32.to_le_bytes());
        body.extend_from_slice(&flow.to_le_bytes());
        body.extend_from_slice(&u16::try_from(text.len()).unwrap().to_le_bytes());
        body.extend_from_slice(&text);
        let mut bytes = vec![0x43, 0x4d, cm_ipc::VERSION, 0, 1, 0, 0x13];
        bytes.extend_from_slice(&u16::try_from(body.len()).unwrap().to_le_bytes());
        bytes.extend_from_slice(&body);
        let r = common::raw::roundtrip(&fd, &bytes);
        assert!(
            matches!(
                r[..],
                [ToClient::Error {
                    code: cm_ipc::ErrorCode::Malformed,
                    ..
                }]
            ),
            "{r:?}"
        );
    }
    // A good spec is applied, and the daemon still answers everyone.
    fr.push(&ToDaemon::SetController {
        seq: 40,
        flow,
        spec: "iscc:l=3".into(),
    });
    fr.push(&ToDaemon::SetCapacity {
        flow,
        capacity: Some(125_000),
    });
    fr.push(&ToDaemon::Ping { seq: 41 });
    let r = common::raw::roundtrip(&fd, &fr.finish());
    assert_eq!(
        r,
        [ToClient::Done { seq: 40 }, ToClient::Pong { seq: 41 }],
        "{r:?}"
    );
    let s = good.stat().unwrap();
    let mf = s
        .flows
        .iter()
        .find(|f| f.id == g.to_u64())
        .map(|f| f.macroflow)
        .unwrap();
    let own = s.macroflows.iter().find(|m| m.id == mf).unwrap();
    assert_eq!(own.controller, "aimd", "another macroflow is left alone");
    let mut raw_view = Frame::new();
    raw_view.push(&ToDaemon::Stat { seq: 42 });
    let r = common::raw::roundtrip(&fd, &raw_view.finish());
    let theirs: Vec<_> = r
        .iter()
        .filter_map(|m| match m {
            ToClient::StatMacroflow { stat, .. } => Some(stat),
            _ => None,
        })
        .collect();
    assert!(
        theirs
            .iter()
            .any(|m| m.controller == "iscc" && m.capacity == Some(125_000)),
        "{theirs:?}"
    );
}
