//! Writes the seed corpus for the `control_decode` fuzz target: one valid
//! frame per message kind of each direction, a batched frame of each, and an
//! empty frame. Usage: `cargo run --bin gen_corpus -- DIR` (from `fuzz/`).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::PathBuf;

use cm_core::LossMode;
use cm_ipc::{ErrorCode, Estimate, FlowStat, Frame, MacroflowStat, Message, ToClient, ToDaemon};

fn frame<M: Message>(msgs: &[M]) -> Vec<u8> {
    let mut f = Frame::new();
    for m in msgs {
        f.push(m);
    }
    f.finish()
}

fn main() {
    let dir = PathBuf::from(
        std::env::args()
            .nth(1)
            .unwrap_or_else(|| "corpus/control_decode".into()),
    );
    std::fs::create_dir_all(&dir).expect("create corpus dir");

    let v4 = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)), 5001);
    let v6 = SocketAddr::new(IpAddr::V6(Ipv6Addr::LOCALHOST), 443);
    let est = Estimate {
        rate: 1_250_000,
        srtt_us: 40_000,
        rttvar_us: 5_000,
        loss: 0.01,
    };
    let none = Estimate {
        rate: -1,
        srtt_us: -1,
        rttvar_us: -1,
        loss: -1.0,
    };

    let daemon = [
        ToDaemon::Hello {
            version: cm_ipc::VERSION,
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
        },
        ToDaemon::Update {
            flow: 7,
            nsent: 1460,
            nrecd: 1460,
            loss: LossMode::None,
            rtt_us: None,
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
    ];
    let client = [
        ToClient::Welcome {
            version: cm_ipc::VERSION,
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
            },
        },
        ToClient::StatEnd { seq: 8 },
        ToClient::Pong { seq: 10 },
        ToClient::Attached {
            seq: 11,
            ring_bytes: 135_168,
        },
    ];

    let mut files: Vec<(String, Vec<u8>)> = vec![("empty".into(), frame::<ToDaemon>(&[]))];
    for (i, m) in daemon.iter().enumerate() {
        files.push((format!("daemon-{i:02}"), frame(std::slice::from_ref(m))));
    }
    files.push(("daemon-batch".into(), frame(&daemon)));
    for (i, m) in client.iter().enumerate() {
        files.push((format!("client-{i:02}"), frame(std::slice::from_ref(m))));
    }
    files.push(("client-batch".into(), frame(&client)));

    for (name, bytes) in &files {
        // The seeds must decode; a generator bug would otherwise go unnoticed.
        let ok = cm_ipc::decode_frame::<ToDaemon>(bytes).is_ok()
            || cm_ipc::decode_frame::<ToClient>(bytes).is_ok();
        assert!(ok, "seed {name} does not decode");
        std::fs::write(dir.join(name), bytes).expect("write seed");
    }
    println!("wrote {} seeds to {}", files.len(), dir.display());
}
