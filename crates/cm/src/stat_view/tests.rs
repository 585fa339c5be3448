//! `cm stat`'s view and table, on a fixed snapshot.

use super::*;
use cm_ipc::Estimate;

fn snapshot() -> Stat {
    let none = Estimate {
        rate: -1,
        srtt_us: -1,
        rttvar_us: -1,
        loss: -1.0,
    };
    let known = Estimate {
        rate: 1_250_000,
        srtt_us: 850,
        rttvar_us: 120,
        loss: 0.01,
    };
    let flow = |id, port, estimate| FlowStat {
        id,
        macroflow: 1,
        uid: 1000,
        pid: 4000 + u32::try_from(id).unwrap(),
        dst: SocketAddr::from(([127, 0, 0, 1], port)),
        share: 0.5,
        in_flight: 2920,
        sent: 1_000_000,
        lost: 0,
        estimate,
        peer: (id == 4).then_some(libcm::PeerStat {
            mode: libcm::PeerMode::Negotiated,
            probe_srtt_us: Some(61_400),
            loss_ppm: Some(12_000),
            probes: 40,
            responses: 39,
        }),
        kernel: (id == 5).then(|| SocketAddr::from(([127, 0, 0, 1], 41000))),
    };
    Stat {
        macroflows: vec![
            MacroflowStat {
                id: 2,
                dst: None,
                uid: u32::MAX,
                window: 14600,
                estimate: none,
                in_flight: 0,
                flows: 0,
                controller: "aimd".into(),
                capacity: None,
                reductions: 0,
                timeouts: 0,
            },
            MacroflowStat {
                id: 1,
                dst: Some(IpAddr::from([127, 0, 0, 1])),
                uid: 1000,
                window: 29200,
                estimate: known,
                in_flight: 5840,
                flows: 2,
                controller: "iscc".into(),
                capacity: Some(12_500_000),
                reductions: 17,
                timeouts: 2,
            },
        ],
        flows: vec![flow(5, 9002, none), flow(4, 9001, known)],
    }
}

#[test]
fn flows_are_grouped_and_sorted_and_no_estimate_is_null() {
    let v = StatView::new(&snapshot());
    assert_eq!(v.macroflows[0].id, 1);
    let flows = v.macroflows[0].flows.as_ref().unwrap();
    assert_eq!(flows.iter().map(|f| f.id).collect::<Vec<_>>(), [4, 5]);
    assert_eq!(v.macroflows[0].rate_mbit, Some(10.0));
    assert_eq!(v.macroflows[1].uid, None, "shared by all users");
    assert!(v.unattached_flows.is_empty());
    let j = serde_json::to_value(&v).unwrap();
    assert_eq!(j["macroflows"][1]["srtt_us"], serde_json::Value::Null);
    assert_eq!(
        j["macroflows"][0]["flows"][1]["rate_mbit"],
        serde_json::Value::Null
    );
    assert_eq!(j["macroflows"][0]["dst"], "127.0.0.1");
    assert_eq!(j["macroflows"][0]["controller"], "iscc");
    assert_eq!(j["macroflows"][0]["capacity_mbit"], 100.0);
    assert_eq!(
        j["macroflows"][1]["capacity_bytes_per_sec"],
        serde_json::Value::Null
    );
    assert!(j["macroflows"][0].get("send_mbit").is_none());
    assert_eq!(j["macroflows"][0]["flows"][0]["peer"]["mode"], "negotiated");
    assert!(j["macroflows"][0]["flows"][1]["peer"].is_null());
    let text = render(&v, false);
    assert!(text.contains("negotiated/61ms/1.20%"), "{text}");
    assert!(text.contains("127.0.0.1:41000>127.0.0.1:9002"), "{text}");
    assert_eq!(j["macroflows"][0]["flows"][1]["kernel"], "127.0.0.1:41000");
}

#[test]
fn the_table_is_aligned_and_prints_dashes() {
    let text = render(&StatView::new(&snapshot()), false);
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("MACROFLOW  DESTINATION"), "{text}");
    assert!(lines[1].starts_with("1          127.0.0.1"), "{text}");
    assert!(
        lines[1].contains("10.00") && lines[1].contains("850 us"),
        "{text}"
    );
    assert!(lines[0].contains("CONTROLLER  CAPACITY(Mbit/s)"), "{text}");
    assert!(lines[0].trim_end().ends_with("FLOWS  CUTS  RTOS"), "{text}");
    assert!(lines[1].trim_end().ends_with("2    17     2"), "{text}");
    let j = serde_json::to_value(StatView::new(&snapshot())).unwrap();
    assert_eq!(
        (
            &j["macroflows"][0]["reductions"],
            &j["macroflows"][0]["timeouts"]
        ),
        (&serde_json::json!(17), &serde_json::json!(2))
    );
    assert!(
        lines[1].contains("iscc") && lines[1].contains("100.0"),
        "{text}"
    );
    // The flow table: header and rows end at the same column.
    let flow_lines: Vec<&str> = lines[2..5].to_vec();
    let ends: Vec<usize> = flow_lines.iter().map(|l| l.len()).collect();
    assert!(ends.iter().all(|&e| e == ends[0]), "{text}");
    assert!(flow_lines[2].trim_end().ends_with('-'), "{text}");
    let shared = lines.iter().find(|l| l.starts_with("2 ")).unwrap();
    assert!(shared.contains("all"), "{text}");
}

#[test]
fn measured_rates_add_up_per_macroflow() {
    let mut v = StatView::new(&snapshot());
    v.set_send_rates(&HashMap::from([(4, 1.5), (5, 2.0)]));
    assert_eq!(v.macroflows[0].send_mbit, Some(3.5));
    assert_eq!(v.macroflows[1].send_mbit, None);
    assert!(render(&v, true).contains("SENDING(Mbit/s)"));
}
