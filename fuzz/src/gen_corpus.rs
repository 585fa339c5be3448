//! Writes the seed corpora of the fuzz targets under `fuzz/seeds/`, each
//! input made by the real encoder:
//!
//! * `control_decode`: one frame per message kind of each direction
//!   (`cm_ipc::examples`), a batched frame of each, and an empty frame;
//! * `proto_decode`: one datagram per `cm_proto` packet type (a response
//!   empty and with counters), and a stream of them in the target's
//!   length-prefixed form;
//! * `session`: scripts in the `session` target's byte language: a client
//!   that says hello, opens a flow and sends one message of each kind on
//!   it; a full send cycle; two users reaching for each other's flows with
//!   the clock jumping past the macroflows' linger.
//!
//! `ring_consume`'s three seeds are checked in as they are (ring memory
//! images, not encoder output). Usage, from `fuzz/`:
//! `cargo run --bin gen_corpus [-- DIR]` (default `seeds`); it replaces the
//! files of the three directories it writes.

use std::path::{Path, PathBuf};

use cm_ipc::{Frame, Message, ToClient, ToDaemon};
use cm_proto::wire::{FlowReport, Hint, Packet, Response};

fn frame<M: Message>(msgs: &[M]) -> Vec<u8> {
    let mut f = Frame::new();
    for m in msgs {
        f.push(m);
    }
    f.finish()
}

fn control_decode() -> Vec<(String, Vec<u8>)> {
    let daemon = cm_ipc::examples::to_daemon();
    let client = cm_ipc::examples::to_client();
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
    }
    files
}

fn proto_decode() -> Vec<(String, Vec<u8>)> {
    let report = |flow: u32| FlowReport {
        flow,
        bytes: 100 * u64::from(flow),
        lost: 1,
        packets: flow,
        hint: Hint {
            weight: 3,
            rate: 1000,
        },
    };
    let packets = [
        ("syn", Packet::Syn { isn: 0x11 }),
        ("synack", Packet::SynAck { isn: 0x12 }),
        ("rst", Packet::Rst { seq: 0x13 }),
        ("probe", Packet::Probe { seq: 0x14 }),
        (
            "response-empty",
            Packet::Response(Response {
                this_probe: 0x14,
                last_probe: 0x13,
                delay_us: 0,
                flows: Vec::new(),
            }),
        ),
        (
            "response",
            Packet::Response(Response {
                this_probe: 6,
                last_probe: 5,
                delay_us: 100,
                flows: vec![report(7), report(8)],
            }),
        ),
        (
            "data",
            Packet::Data {
                protocol: 17,
                flow: 7,
                seq: 1,
            },
        ),
    ];
    let mut files = Vec::new();
    let mut stream = Vec::new();
    for (name, p) in &packets {
        let bytes = p.encode();
        assert_eq!(Packet::decode(&bytes).as_ref(), Ok(p), "seed {name}");
        stream.push(u8::try_from(bytes.len()).expect("a seed datagram under 256 bytes"));
        stream.extend_from_slice(&bytes);
        files.push((name.to_string(), bytes));
    }
    files.push(("stream".into(), stream));
    files
}

/// A `session` script (see `fuzz_targets/session.rs` for the language).
struct Script(Vec<u8>);

/// 7 flows per client, 4 clients, 4 per user, no rate limit that bites,
/// shared memory offered, users do not share macroflows.
const CONFIG: u8 = 0x3e;

impl Script {
    fn new(config: u8) -> Self {
        Script(vec![config])
    }
    /// A client of uid 0, 1000 or 1001 (index 0..3) connects and says hello.
    fn connect(mut self, uid: u8) -> Self {
        self.0.extend([0, uid, 1]);
        self
    }
    /// Client `tok` (index among the live ones) sends one message: `seq`,
    /// `kind` (the target's numbering) and its field bytes.
    fn msg(mut self, tok: u8, kind: u8, fields: &[u8]) -> Self {
        self.0.extend([4, tok, 0, 7, kind]);
        self.0.extend_from_slice(fields);
        self
    }
    /// Client `tok` opens a flow to 10.0.0.2 (or 192.0.2.`host`).
    fn open(self, tok: u8, host: Option<u8>) -> Self {
        let dst: &[u8] = match host {
            None => &[0, 0, 0, 0],
            Some(h) => &[0, 1, h, 0x50, 0],
        };
        self.msg(tok, 1, dst)
    }
    /// The clock jumps `n` × 10 s.
    fn jump(mut self, n: u8) -> Self {
        self.0.extend([2, n, 3]);
        self
    }
    fn hang_up(mut self, tok: u8) -> Self {
        self.0.extend([1, tok]);
        self
    }
}

fn session() -> Vec<(String, Vec<u8>)> {
    let mut files = Vec::new();
    // One message of each of the 22 kinds on the client's first flow
    // (field bytes left out read as zeros: flow index 0).
    for kind in 0..22u8 {
        let s = Script::new(CONFIG)
            .connect(1)
            .open(0, None)
            .msg(0, kind, &[]);
        files.push((format!("kind-{kind:02}"), s.0));
    }
    // Request, grant, notify, feedback, close.
    let s = Script::new(CONFIG)
        .connect(1)
        .open(0, None)
        .msg(0, 3, &[0, 2])
        .msg(0, 4, &[0, 2])
        .msg(0, 5, &[0, 2, 2, 1, 2])
        .msg(0, 2, &[0]);
    files.push(("send-cycle".into(), s.0));
    // Two users; each tries the other's flows; a private macroflow; the
    // clock passes the linger; one hangs up.
    let s = Script::new(CONFIG)
        .connect(1)
        .connect(2)
        .open(0, Some(1))
        .open(1, Some(1))
        .msg(1, 2, &[0])
        .msg(0, 11, &[1, 0])
        .msg(1, 11, &[1, 2, 0])
        .jump(61)
        .msg(0, 13, &[])
        .hang_up(0)
        .jump(61);
    files.push(("two-users".into(), s.0));
    // Rate-limited client (config bit 7) flooding pings.
    let mut s = Script::new(CONFIG | 0x80).connect(0);
    for _ in 0..30 {
        s = s.msg(0, 15, &[]);
    }
    files.push(("rate-limited".into(), s.0));
    files
}

fn write(dir: &Path, files: &[(String, Vec<u8>)]) {
    if dir.exists() {
        std::fs::remove_dir_all(dir).expect("remove old seeds");
    }
    std::fs::create_dir_all(dir).expect("create seed dir");
    for (name, bytes) in files {
        std::fs::write(dir.join(name), bytes).expect("write seed");
    }
    println!("wrote {} seeds to {}", files.len(), dir.display());
}

fn main() {
    let root = PathBuf::from(std::env::args().nth(1).unwrap_or_else(|| "seeds".into()));
    write(&root.join("control_decode"), &control_decode());
    write(&root.join("proto_decode"), &proto_decode());
    write(&root.join("session"), &session());
}
