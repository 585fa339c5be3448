//! # cm-netem: emulated network paths between network namespaces
//!
//! Builds a real, emulated network path on one Linux machine, out of three network
//! namespaces, so real sockets (TCP, UDP, the Congestion Manager's flows) can be run
//! over a path with a given bottleneck rate, queue, one-way delay, random loss, and
//! optional reordering and duplication:
//!
//! ```text
//!  cmn<pid>x<k>-snd           cmn<pid>x<k>-rtr                               cmn<pid>x<k>-rcv
//! +--------------+   veth   +----------------------------------------+  veth  +---------------+
//! | sender       |          | router (ip_forward=1, rp_filter=0)     |        | receiver      |
//! | 10.k.1.2 eth0|--------->|r-snd 10.k.1.1          10.k.2.1 r-rcv  |------->|eth0 10.k.2.2  |
//! |              |          |   |  route 10.k.2.2 -> tunf    ^       |        |   ^           |
//! |              |          |   v                            |       |        |   |           |
//! |              |          | [tbf rate/burst/limit] on tunf |       |        | clsact ingress|
//! |              |          |   |  (the bottleneck queue)    |       |        | cBPF filter:  |
//! |              |          |   v                            |       |        | ld rand; drop |
//! |              |          | tunf ==> DELAY BOX thread ==> tunf     |        | with prob. p  |
//! |              |          |   (read, stamp, write back at t + d;   |        |               |
//! |              |          |    iif tunf -> table 100 -> r-rcv)     |        |               |
//! |              |<---------| tunr <== same, reverse direction <==   |<-------|               |
//! +--------------+          +----------------------------------------+        +---------------+
//! ```
//!
//! ## Why each piece
//!
//! - **No `netem`**: the kernel this project runs on has no `netem` qdisc (nor `fq`,
//!   `fq_codel`) and cannot load modules, so delay and loss are built from what exists.
//! - **Rate and queue: `tbf` on the router's egress** toward the receiver (on the
//!   forward TUN device, before the delay), not on the sender's own interface: there,
//!   TCP small queues and the socket's back-pressure would keep the queue from ever
//!   filling, hiding exactly the queueing the Congestion Manager must react to. `burst`
//!   is the smallest that works (two MTUs or 1 ms of tokens, whichever is larger) so
//!   the rate is smooth; `limit` is the queue size.
//! - **Delay in user space**: a TUN "delay box" thread owned by [`Path`] reads every
//!   packet the router routes into `tunf` (forward) or `tunr` (reverse), and writes it
//!   back into the same device one one-way delay later; policy routing (`ip rule iif
//!   tunf lookup 100`) sends it on to its veth. It sleeps in `ppoll` with a ns timeout,
//!   wakes slightly early and spins the last µs, and runs `SCHED_FIFO`, so writes land
//!   within a few µs of their deadline even on a busy machine. Reading a packet costs
//!   a wake-up, so each direction adds some 20–100 µs to the configured delay on a
//!   2-core VM (the self-test measures it: under 5 % for one-way delays of ≥ 2 ms).
//!   The router's own addresses are reached directly (no delay, no bottleneck). It forwards >100k
//!   packets/s on 2 cores (measure with the
//!   `delaybox_rate` example), far above 100 Mbit/s of 1500-byte packets (~8.5k/s).
//! - **Loss at the receiver's ingress**: a classic-BPF `tc` filter in direct-action
//!   mode (`ld rand; jge #⌊p·2³²⌉, pass, drop`) on a `clsact` qdisc, `protocol ip` so
//!   ARP is never dropped. Not at the sender or router egress: a drop on a local
//!   egress is reported back to the sending socket (`ENOBUFS`, TSQ), which is not what
//!   a lossy network does. [`Path::set_loss`] swaps the filter in place.
//! - **Reordering and duplication in the delay box** (sender → receiver only, like
//!   loss): with probability `reorder` a packet is held back `reorder_delay` beyond
//!   its due time, so packets behind it overtake it; with probability `duplicate` it
//!   is written to the TUN twice. netem's model, except that the chosen packet is the
//!   late one (netem sends its chosen packets early), so `reorder` is the fraction of
//!   late packets. [`Path::set_reorder`] and [`Path::set_duplicate`] change them
//!   while the path runs (shared atomics the box reads per packet).
//! - **Teardown on every exit path**: [`Path`]'s `Drop` (which also runs on panic
//!   unwinding and for a build that fails half-way) stops the delay box and deletes the
//!   namespaces, which deletes the veths, TUNs, qdiscs and filters with them. The CLI
//!   tears down on SIGINT/SIGTERM. Namespaces of SIGKILLed processes are swept by
//!   [`sweep_stale`] (also run by every [`Path::build`] and `cm-netem cleanup`).
//!
//! ## Example
//!
//! ```no_run
//! use std::time::Duration;
//! use cm_netem::{Node, Path, PathConfig, Queue};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let path = Path::build(PathConfig {
//!     rate_bps: 10_000_000,
//!     one_way_delay: Duration::from_millis(30),
//!     queue: Queue::Packets(64),
//!     loss: 0.01,
//!     reverse_rate_bps: None,
//!     reorder: 0.05,                              // 5 % of packets held back ...
//!     reorder_delay: Duration::from_millis(5),    // ... 5 ms, so later ones pass them
//!     duplicate: 0.0,
//! })?;
//! // A socket created on a thread in the receiver's namespace lives there.
//! let rcv = path.receiver_addr();
//! let server = path.spawn_in(Node::Receiver, move || {
//!     std::net::UdpSocket::bind((rcv, 5000))
//! })?.join().expect("thread")?;
//! // Or run a program there.
//! let status = path.command(Node::Sender, "true").status()?;
//! assert!(status.success());
//! println!("{}", path.self_test()?); // Err (with every number) when >5 % off
//! path.set_loss(0.0)?;
//! drop(server);
//! path.teardown()?; // or just drop the path
//! # Ok(())
//! # }
//! ```
//!
//! Every operation fails with a [`NetemError`] that says what was being
//! done (the `ip`/`tc` command line and its stderr, the system call).
//!
//! The `cm-netem` binary does the same from the command line: `cm-netem up --rate
//! 10mbit --delay 30ms --queue 64pkt --loss 0.01 [--reorder 0.05 --reorder-delay 5ms
//! --duplicate 0.02]`, `cm-netem selftest ...`, `cm-netem cleanup`.

pub mod config;
mod delaybox;
pub mod error;
pub mod netns;
mod path;
pub mod selftest;
mod sys;
pub mod topo;

pub use config::{ConfigError, PathConfig, Queue, parse_duration, parse_queue, parse_rate};
pub use delaybox::{DelayBoxStats, DirectionStats};
pub use error::{BuildStep, NetemError, Result};
pub use netns::{is_root, sweep_stale};
pub use path::{Node, Path, PathStats, QdiscStats, tbf_burst};
pub use selftest::{
    FractionCheck, LossRule, ReorderCheck, SelfTestError, SelfTestFailed, SelfTestOptions,
    SelfTestReport,
};
pub use topo::{
    LinkCheck, Network, TopoLink, TopoNode, TopoSelfTestOptions, TopoSelfTestReport, parse_topology,
};
