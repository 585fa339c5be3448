//! One message of every kind in each direction, with fixed values: the codec's
//! round-trip tests and the fuzzer's seed corpus (`fuzz/src/gen_corpus.rs`)
//! both start from these. A new message adds its example here.

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use cm_core::LossMode;

use super::{ErrorCode, Estimate, FlowStat, MacroflowStat, PeerMode, PeerStat, ToClient, ToDaemon};

fn v4() -> SocketAddr {
    SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)), 5001)
}

fn v6() -> SocketAddr {
    SocketAddr::new(IpAddr::V6(Ipv6Addr::LOCALHOST), 443)
}

/// An estimate with every field known.
fn est() -> Estimate {
    Estimate {
        rate: 1_250_000,
        srtt_us: 40_000,
        rttvar_us: 5_000,
        loss: 0.01,
    }
}

/// "No estimate yet" in every field.
fn none() -> Estimate {
    Estimate {
        rate: -1,
        srtt_us: -1,
        rttvar_us: -1,
        loss: -1.0,
    }
}

/// Every client → daemon call, some in two forms (optional fields set and
/// not).
pub fn to_daemon() -> Vec<ToDaemon> {
    let (v4, v6) = (v4(), v6());
    vec![
        ToDaemon::Hello {
            version: crate::VERSION,
        },
        ToDaemon::Open {
            seq: 1,
            src: None,
            dst: v4,
        },
        ToDaemon::Open {
            seq: 2,
            src: Some(v6),
            dst: v6,
        },
        ToDaemon::Close { flow: 7 },
        ToDaemon::Request { flow: 7, k: 4 },
        ToDaemon::Notify {
            flow: 7,
            nsent: 1460,
        },
        ToDaemon::Update {
            flow: 7,
            nsent: 2920,
            nrecd: 1460,
            loss: LossMode::Transient,
            rtt_us: Some(40_000),
            lost_age_us: Some(52_000),
        },
        ToDaemon::Update {
            flow: 7,
            nsent: 1460,
            nrecd: 1460,
            loss: LossMode::None,
            rtt_us: None,
            lost_age_us: None,
        },
        ToDaemon::Query { seq: 3, flow: 7 },
        ToDaemon::Mtu { seq: 4, flow: 7 },
        ToDaemon::RateUpdates { flow: 7, on: true },
        ToDaemon::Thresh {
            flow: 7,
            rate_down: 2.0,
            rate_up: 2.0,
            rtt_down: 1.5,
            rtt_up: 1.5,
        },
        ToDaemon::GetMacroflow { seq: 5, flow: 7 },
        ToDaemon::SetMacroflow {
            seq: 6,
            flow: 7,
            target: Some(3),
        },
        ToDaemon::SetMacroflow {
            seq: 7,
            flow: 8,
            target: None,
        },
        ToDaemon::SetWeight {
            flow: 7,
            weight: 10,
        },
        ToDaemon::Stat { seq: 8 },
        ToDaemon::QueryHost {
            seq: 9,
            dst: v4.ip(),
        },
        ToDaemon::Ping { seq: 10 },
        ToDaemon::Attach { seq: 11 },
        ToDaemon::SocketDoorbell { on: true },
        ToDaemon::SetController {
            seq: 12,
            flow: 7,
            spec: "iscc:l=2,m_d=2,m_i=20".into(),
        },
        ToDaemon::SetPeer {
            flow: 7,
            peer: Some(PeerStat {
                mode: PeerMode::Fallback,
                probe_srtt_us: None,
                loss_ppm: None,
                probes: 0,
                responses: 0,
            }),
        },
        ToDaemon::SetPeer {
            flow: 7,
            peer: None,
        },
        ToDaemon::SetFeedbackLag {
            flow: 7,
            lag: Some(250),
        },
        ToDaemon::SetFeedbackLag { flow: 7, lag: None },
        ToDaemon::SetCapacity {
            flow: 7,
            capacity: Some(1_250_000),
        },
        ToDaemon::SetCapacity {
            flow: 7,
            capacity: None,
        },
        ToDaemon::CapacitySample {
            flow: 7,
            sample: 190_000,
        },
    ]
}

/// Every daemon → client message.
pub fn to_client() -> Vec<ToClient> {
    let (v4, v6, est, none) = (v4(), v6(), est(), none());
    vec![
        ToClient::Welcome {
            version: crate::VERSION,
            client: 1,
            uid: 1000,
            mtu: 1500,
        },
        ToClient::Grant {
            flow: 7,
            bytes: 1460,
        },
        ToClient::RateUpdate {
            flow: 7,
            estimate: est,
        },
        ToClient::GrantExpired {
            flow: 7,
            bytes: 1460,
        },
        ToClient::Opened { seq: 1, flow: 7 },
        ToClient::Estimate {
            seq: 3,
            estimate: none,
        },
        ToClient::Mtu { seq: 4, mtu: 1500 },
        ToClient::Macroflow { seq: 5, id: 3 },
        ToClient::Error {
            seq: 0,
            flow: 7,
            code: ErrorCode::UnknownFlow,
        },
        ToClient::StatMacroflow {
            seq: 8,
            stat: MacroflowStat {
                id: 3,
                dst: Some(v6.ip()),
                uid: 1000,
                window: 14_600,
                estimate: est,
                in_flight: 2920,
                flows: 2,
                controller: "iscc".into(),
                capacity: Some(1_250_000),
                reductions: 17,
                timeouts: 2,
            },
        },
        ToClient::StatMacroflow {
            seq: 9,
            stat: MacroflowStat {
                id: 4,
                dst: None,
                uid: u32::MAX,
                window: 2920,
                estimate: none,
                in_flight: 0,
                flows: 0,
                controller: "aimd".into(),
                capacity: None,
                reductions: 0,
                timeouts: 0,
            },
        },
        ToClient::StatFlow {
            seq: 8,
            stat: FlowStat {
                id: 7,
                macroflow: 3,
                uid: 1000,
                pid: 4242,
                dst: v4,
                share: 0.5,
                in_flight: 1460,
                sent: 1_000_000,
                lost: 1460,
                estimate: est,
                peer: None,
                kernel: Some(SocketAddr::from(([10, 0, 0, 1], 41000))),
            },
        },
        ToClient::StatFlow {
            seq: 8,
            stat: FlowStat {
                id: 8,
                macroflow: 3,
                uid: 1000,
                pid: 4242,
                dst: v4,
                share: 0.5,
                in_flight: 2920,
                sent: 2_000_000,
                lost: 0,
                estimate: est,
                peer: Some(PeerStat {
                    mode: PeerMode::Negotiated,
                    probe_srtt_us: Some(61_000),
                    loss_ppm: Some(12_000),
                    probes: 300,
                    responses: 297,
                }),
                kernel: None,
            },
        },
        ToClient::StatEnd { seq: 8 },
        ToClient::Pong { seq: 10 },
        ToClient::Attached {
            seq: 11,
            ring_bytes: 135_168,
        },
        ToClient::Done { seq: 12 },
        ToClient::Refused {
            seq: 13,
            flow: 7,
            code: ErrorCode::InvalidArgument,
            why: "controller \"iscc:l=0.5\": l must be >= 1".into(),
        },
    ]
}
