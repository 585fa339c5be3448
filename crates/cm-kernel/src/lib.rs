//! # cm-kernel: the `cm` Linux TCP congestion control
//!
//! Unmodified programs' TCP connections join CM macroflows. `cmd
//! --kernel-tcp` loads a BPF `tcp_congestion_ops` named `cm`
//! (`bpf/cm_tcp.bpf.c`); every connection that selects it, by
//! `sysctl net.ipv4.tcp_congestion_control=cm` (per network namespace) or
//! `setsockopt(TCP_CONGESTION, "cm")`, reports to the daemon through a ring
//! buffer, and the daemon writes back the connection's share of its
//! destination's macroflow window.
//!
//! ```text
//!   kernel TCP ──(ring buffer: open, ACK batches, loss, RTO, ECN, close)──▶ cmd ─▶ cm-core
//!   cong_avoid ◀──────────(array map: cwnd per connection, time-stamped)──── cmd
//! ```
//!
//! An allowance older than [`wire::STALE`] (500 ms), or none yet, leaves
//! the connection to Reno on its own state, so a daemon that is slow or
//! gone never stalls a connection. This crate holds the BPF program, its
//! loader ([`KernelTcp`]) and the record formats ([`wire`]); the daemon's
//! side is `cm_daemon`'s `kernel` module.
//!
//! Needs root (or `CAP_BPF` + `CAP_NET_ADMIN`), a kernel with BTF and BPF
//! struct_ops links (5.13+), and clang when building.
#![warn(missing_docs)]

mod loader;
pub mod wire;

pub use loader::{KernelError, KernelTcp, NAME, built, monotonic_ns, registered, unsupported};
pub use wire::{Event, EventKind};
