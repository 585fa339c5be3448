//! Fuzz target for the daemon's handling of its clients (issue 21, part 5):
//! not one decode but whole sessions.
//!
//! The input is read as a daemon configuration (its client and flow
//! limits, sharing across users, shared memory, the message rate) and then
//! a script of steps against `cm_daemon::Harness`, the daemon driven in
//! process with a simulated clock: clients connect (as one of three uids)
//! and hang up, the clock jumps (microseconds to past the macroflows'
//! ten-minute linger), and clients send frames of `ToDaemon` messages
//! (built from the input, on the flows and macroflows the daemon has
//! handed out, anyone's, or made-up ones) or raw bytes.
//!
//! Oracle, after every step: nothing panics; every frame the daemon queues
//! decodes; every `Grant`, `GrantExpired` and `RateUpdate` a client gets
//! names an open flow of that client; `Harness::check` holds
//! (sessions, flows per client and flows in all within the limits, the
//! daemon's owners of flows agree with the core); the owners of macroflows
//! it remembers stay within twice the most macroflows there were; a client
//! that hung up leaves no flows and no client in the core. At the end
//! every client hangs up and, once the linger has passed, no flow and no
//! macroflow is left.
#![no_main]

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use cm_core::{Instant, LossMode};
use cm_daemon::{DaemonConfig, Harness};
use cm_ipc::{Frame, ToClient, ToDaemon};
use libfuzzer_sys::fuzz_target;

/// Steps per input: keeps every run short.
const MAX_STEPS: usize = 512;
/// One second, in the harness's microseconds.
const SEC: u64 = 1_000_000;

/// The input, read a field at a time; zeros once it runs out.
struct Input<'a>(&'a [u8]);

impl Input<'_> {
    fn u8(&mut self) -> u8 {
        match self.0.split_first() {
            Some((&b, rest)) => {
                self.0 = rest;
                b
            }
            None => 0,
        }
    }
    fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.u8(), self.u8()])
    }
    fn u32(&mut self) -> u32 {
        u32::from(self.u16()) | (u32::from(self.u16()) << 16)
    }
    fn u64(&mut self) -> u64 {
        u64::from(self.u32()) | (u64::from(self.u32()) << 32)
    }
    fn bool(&mut self) -> bool {
        self.u8() & 1 == 1
    }
    fn bytes(&mut self, n: usize) -> &[u8] {
        let (a, b) = self.0.split_at(n.min(self.0.len()));
        self.0 = b;
        a
    }
    /// One of `xs` (not empty).
    fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[usize::from(self.u8()) % xs.len()]
    }
}

/// What the script has seen the daemon hand out.
#[derive(Default)]
struct Seen {
    flows: Vec<u64>,
    macroflows: Vec<u64>,
}

impl Seen {
    /// A flow id: mostly one the daemon handed out (to anyone), sometimes
    /// any number.
    fn flow(&self, i: &mut Input) -> u64 {
        let b = i.u8();
        if b < 240 && !self.flows.is_empty() {
            self.flows[usize::from(b) % self.flows.len()]
        } else {
            i.u64()
        }
    }
    fn macroflow(&self, i: &mut Input) -> Option<u64> {
        match i.u8() % 4 {
            0 => None,
            1 => Some(i.u64()),
            _ if !self.macroflows.is_empty() => {
                Some(self.macroflows[usize::from(i.u8()) % self.macroflows.len()])
            }
            _ => None,
        }
    }
}

const SPECS: &[&str] = &[
    "aimd",
    "iiad",
    "sqrt",
    "binomial:k=1,l=0",
    "binomial:k=0.5,l=0.5,mode=rate",
    "iscc:l=2,m_d=2,m_i=20",
    "tfrc",
    "tcp-vegas",
    "aimd:alpha=-1",
];

fn dst(i: &mut Input) -> SocketAddr {
    let ip = match i.u8() % 4 {
        0 => IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)),
        1 => IpAddr::V4(Ipv4Addr::new(192, 0, 2, i.u8())),
        2 => IpAddr::V6(Ipv6Addr::LOCALHOST),
        _ => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
    };
    SocketAddr::new(ip, i.u16())
}

fn float(i: &mut Input) -> f64 {
    i.pick(&[0.0, 1.0, 1.5, 2.0, -1.0, f64::NAN, f64::INFINITY, 1e300])
}

/// One client message, every kind reachable.
fn message(i: &mut Input, seen: &Seen) -> ToDaemon {
    let seq = u32::from(i.u8());
    match i.u8() % 22 {
        0 => ToDaemon::Hello {
            version: if i.bool() { cm_ipc::VERSION } else { i.u8() },
        },
        1 => ToDaemon::Open {
            seq,
            src: if i.bool() { Some(dst(i)) } else { None },
            dst: dst(i),
        },
        2 => ToDaemon::Close { flow: seen.flow(i) },
        3 => ToDaemon::Request {
            flow: seen.flow(i),
            k: i.pick(&[0, 1, 4, 64, 65, u32::MAX]),
        },
        4 => ToDaemon::Notify {
            flow: seen.flow(i),
            nsent: i.pick(&[0, 1, 1460, 5840, 1 << 40, u64::MAX]),
        },
        5 => ToDaemon::Update {
            flow: seen.flow(i),
            nsent: i.pick(&[0, 1460, 2920, u64::MAX]),
            nrecd: i.pick(&[0, 1460, 2920, u64::MAX]),
            loss: i.pick(&[
                LossMode::None,
                LossMode::Transient,
                LossMode::Persistent,
                LossMode::Ecn,
                LossMode::NotCongestion,
            ]),
            rtt_us: i.pick(&[None, Some(0), Some(40_000), Some(u64::MAX)]),
            lost_age_us: i.pick(&[None, Some(0), Some(30_000), Some(u64::MAX)]),
        },
        6 => ToDaemon::Query {
            seq,
            flow: seen.flow(i),
        },
        7 => ToDaemon::Mtu {
            seq,
            flow: seen.flow(i),
        },
        8 => ToDaemon::RateUpdates {
            flow: seen.flow(i),
            on: i.bool(),
        },
        9 => ToDaemon::Thresh {
            flow: seen.flow(i),
            rate_down: float(i),
            rate_up: float(i),
            rtt_down: float(i),
            rtt_up: float(i),
        },
        10 => ToDaemon::GetMacroflow {
            seq,
            flow: seen.flow(i),
        },
        11 => ToDaemon::SetMacroflow {
            seq,
            flow: seen.flow(i),
            target: seen.macroflow(i),
        },
        12 => ToDaemon::SetWeight {
            flow: seen.flow(i),
            weight: i.pick(&[0, 1, 10, 65_535, 65_536, u32::MAX]),
        },
        13 => ToDaemon::Stat { seq },
        14 => ToDaemon::QueryHost {
            seq,
            dst: dst(i).ip(),
        },
        15 => ToDaemon::Ping { seq },
        16 => ToDaemon::Attach { seq },
        17 => ToDaemon::SocketDoorbell { on: i.bool() },
        18 => {
            let flow = seen.flow(i);
            let spec = if i.bool() {
                i.pick(SPECS).to_string()
            } else {
                let n = usize::from(i.u8() % 32);
                String::from_utf8_lossy(i.bytes(n)).into_owned()
            };
            ToDaemon::SetController { seq, flow, spec }
        }
        19 => ToDaemon::SetCapacity {
            flow: seen.flow(i),
            capacity: i.pick(&[None, Some(0), Some(1_250_000), Some(u64::MAX)]),
        },
        20 => ToDaemon::SetFeedbackLag {
            flow: seen.flow(i),
            lag: i.pick(&[None, Some(0), Some(250), Some(u16::MAX)]),
        },
        _ => {
            let flow = seen.flow(i);
            // The examples hold both forms of the peer state.
            let peer = cm_ipc::examples::to_daemon()
                .into_iter()
                .filter_map(|m| match m {
                    ToDaemon::SetPeer { peer, .. } => Some(peer),
                    _ => None,
                })
                .nth(usize::from(i.u8() % 2))
                .flatten();
            ToDaemon::SetPeer { flow, peer }
        }
    }
}

fn config(i: &mut Input) -> DaemonConfig {
    let b = i.u8();
    DaemonConfig {
        share_across_users: b & 1 != 0,
        shared_memory: b & 2 != 0,
        max_flows_per_client: 1 + usize::from((b >> 2) & 3) * 2,
        max_clients: 1 + usize::from((b >> 4) & 3),
        max_clients_per_user: if b & 0x40 != 0 { 1 } else { 4 },
        max_messages_per_sec: if b & 0x80 != 0 { 20 } else { 2_000_000 },
        ..DaemonConfig::default()
    }
}

/// Take every session's output and check what it names.
fn collect(h: &mut Harness, seen: &mut Seen) {
    for t in h.tokens() {
        let out = match h.output(t) {
            Ok(o) => o,
            Err(e) => panic!("{e}"),
        };
        for m in out {
            match m {
                // Not checked against ownership: a later message of the
                // same frame may have closed it already.
                ToClient::Opened { flow, .. } if seen.flows.len() < 64 => {
                    seen.flows.push(flow);
                }
                ToClient::Grant { flow, .. }
                | ToClient::GrantExpired { flow, .. }
                | ToClient::RateUpdate { flow, .. } => {
                    assert!(h.owns(t, flow), "{m:?} to session {t}, not its open flow");
                }
                ToClient::Macroflow { id, .. }
                    if seen.macroflows.len() < 64 && !seen.macroflows.contains(&id) =>
                {
                    seen.macroflows.push(id);
                }
                _ => {}
            }
        }
    }
}

/// `Harness::check`, and the daemon's memory of macroflow owners within
/// twice the most macroflows the core held (`peak`), plus a few.
fn check(h: &Harness, peak: &mut usize) {
    if let Err(e) = h.check() {
        panic!("daemon invariant: {e}");
    }
    *peak = (*peak).max(h.macroflow_count());
    let owners = h.macroflow_owners();
    assert!(
        owners <= 2 * *peak + Harness::OWNER_SLACK,
        "owners of {owners} macroflows remembered, at most {} ever existed",
        *peak
    );
}

fuzz_target!(|data: &[u8]| {
    cm_daemon::log::set_silent(true);
    let mut i = Input(data);
    let Ok(mut h) = Harness::new(config(&mut i)) else {
        return;
    };
    let mut now = SEC;
    let mut seen = Seen::default();
    let mut peak = 0;
    let mut tokens: Vec<u64> = Vec::new();
    for _ in 0..MAX_STEPS {
        if i.0.is_empty() {
            break;
        }
        now += 100;
        let t = |i: &mut Input, tokens: &[u64]| {
            (!tokens.is_empty()).then(|| tokens[usize::from(i.u8()) % tokens.len()])
        };
        match i.u8() % 8 {
            0 => {
                let uid = i.pick(&[0, 1000, 1001]);
                let hello = i.bool();
                if let Ok(Some(tok)) = h.connect(uid, 4242, Instant::from_micros(now)) {
                    tokens.push(tok);
                    if hello {
                        let mut f = Frame::new();
                        f.push(&ToDaemon::Hello {
                            version: cm_ipc::VERSION,
                        });
                        h.frame(tok, &f.finish(), Instant::from_micros(now));
                    }
                }
            }
            1 => {
                if let Some(tok) = t(&mut i, &tokens) {
                    let client = h.client_of(tok);
                    h.disconnect(tok, Instant::from_micros(now));
                    tokens.retain(|&x| x != tok);
                    if let Some(c) = client {
                        assert!(!h.core_has_client(c), "client {c} outlived its session");
                    }
                }
            }
            2 => {
                let n = u64::from(i.u8());
                now += match i.u8() % 4 {
                    0 => n,
                    1 => n * 1_000,
                    2 => n * SEC / 10,
                    // Past the 600 s linger of empty macroflows.
                    _ => n * 10 * SEC,
                };
            }
            3 => {
                if let Some(tok) = t(&mut i, &tokens) {
                    let n = usize::from(i.u8() % 64);
                    let raw = i.bytes(n).to_vec();
                    h.frame(tok, &raw, Instant::from_micros(now));
                }
            }
            _ => {
                if let Some(tok) = t(&mut i, &tokens) {
                    let mut f = Frame::new();
                    for _ in 0..1 + i.u8() % 4 {
                        f.push(&message(&mut i, &seen));
                    }
                    h.frame(tok, &f.finish(), Instant::from_micros(now));
                }
            }
        }
        h.advance(Instant::from_micros(now));
        collect(&mut h, &mut seen);
        check(&h, &mut peak);
    }
    for tok in h.tokens() {
        h.disconnect(tok, Instant::from_micros(now));
    }
    check(&h, &mut peak);
    assert_eq!(h.flow_count(), 0, "flows left after every client hung up");
    // Every empty macroflow expires once its linger has passed.
    for _ in 0..4 {
        now += 601 * SEC;
        h.advance(Instant::from_micros(now));
    }
    assert_eq!(h.macroflow_count(), 0, "macroflows left after the linger");
    check(&h, &mut peak);
});
