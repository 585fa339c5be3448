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
//!   within a few µs of their deadline even on a busy machine. Packets leave it spaced
//!   at least one transmission time (at the bottleneck's rate) apart, as the line sent
//!   them, so a read a few µs late does not squeeze a back-to-back pair (packet-bunch
//!   capacity estimates read the line's rate). Reading a packet costs
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
//!   tears down on SIGINT/SIGTERM, and so does any program that calls
//!   [`teardown_on_signals`] (`cm experiment`, `cm demo`). Namespaces of SIGKILLed processes are swept by
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
//!     burst_bytes: None,                          // tbf's default bucket
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
//!
//! ## Topologies
//!
//! [`Network::build`] builds a multi-node network from a
//! [`cm_sim::spec::TopologySpec`], the `[topology]` table the simulator reads
//! (named host and router nodes, duplex links with `rate_bps`,
//! `reverse_rate_bps`, `delay_ms`, `queue_packets`), so one file describes the
//! simulated and the emulated network; [`parse_topology`] takes it out of a
//! scenario file or a topology-only file. Each direction of a link is built in
//! its transmitting node, here for link `i` from X to Y:
//!
//! ```text
//!  node X (netns cmn<pid>x<k>-t<x>)                                      node Y
//! +-------------------------------------------------------------+      +--------+
//! | route <every address behind link i>/32 dev qi               |      |        |
//! |   v                                                         |      |        |
//! | qi (TUN): tbf rate, burst; pfifo limit queue_packets + 1    | veth |        |
//! |   v                                                         |  li  |        |
//! | delay box of link i (its X end) ==> qi ==> rule iif qi      |----->| li ... |
//! |   lookup table 1000+i: default via Y's address dev li onlink|      |        |
//! +-------------------------------------------------------------+      +--------+
//! ```
//!
//! - **One namespace per node**, `cmn<pid>x<k>-t<index>` (swept by
//!   [`sweep_stale`] like a path's), `lo` up, IPv6 off, no redirects, no
//!   reverse-path filter. **One veth pair per duplex link**, `l<i>` at both ends,
//!   on `10.<i/256>.<i%256>.0/24`: the `a` end is `.1`, the `b` end `.2`; a node's
//!   first address is [`Network::node_addr`].
//! - **Routes**: the simulator's own hop-count routes ([`cm_sim::Sim::path`]:
//!   ties to the lowest link id, hosts never forward), as one `/32` per address
//!   of every other node into the TUN of the link its route starts with, also
//!   for a link's own peer, so every packet between nodes crosses the queue and
//!   delay of each link on its way. What the delay box writes back enters the
//!   node again from the TUN and policy routing sends it out of the veth; so
//!   hosts forward too, but only from their TUNs (`forwarding = 0` on their
//!   veths: a host forwards nobody else's packets), and `accept_local` lets a
//!   host's own packets back in.
//! - **Rate and queue**: a `tbf` (rate at the IP level: a TUN has no link-layer
//!   header) with a `pfifo` under it. A packet count, not bytes, because the
//!   spec's DropTail counts packets as ns-2's and the simulator's do: a `tbf`
//!   byte limit of 50 × 1500 B would hold 625 of the collapse experiment's
//!   120-byte packets. `queue_packets + 1`, because a `tbf` keeps the packet that
//!   waits for its tokens in the queue, where ns-2 and the simulator hold
//!   `queue_packets` plus the one in transmission. The burst is the smallest that
//!   passes a full-size packet, [`topo::link_burst`]: one MTU plus 100 B, or
//!   1 ms of tokens when that is more. Two differences from a serializing link
//!   remain: a packet that finds the bucket full leaves at once instead of
//!   after size / rate (96 ms for 120 B at 10 kbit/s), and after an idle period
//!   up to a burst (1600 B: 13 such packets) leaves back to back; once a queue
//!   has formed, packets leave at exactly the rate.
//! - **A host's own egress**: the first link's queue sits in the sending host,
//!   as in ns-2. UDP senders that overflow it see no error (the kernel counts
//!   the drop; with `IP_RECVERR` the socket gets `ENOBUFS`), like ns-2's drop at
//!   the host's link. A TCP sender does not fill it: TCP small queues and the
//!   socket's send buffer hold the data back in the socket instead, so the
//!   drops a simulated TCP sees at its own link do not happen there.
//! - **Delay**: one delay box per duplex link (the path's, with its TUN of one
//!   direction in `a` and of the other in `b`), after the queue as in a real
//!   link. A link with `delay_ms = 0` still passes its box, which adds its
//!   wake-up latency (tens of µs).
//! - **Teardown**: [`Network`]'s `Drop` (also on panic and for a build that
//!   fails half-way) stops the boxes and deletes the namespaces; the CLI tears
//!   down on SIGINT/SIGTERM.
//!
//! [`Network::self_test`] measures every link direction between the link's two
//! ends, all at once: the one-way delay of sparse timestamped probes (every
//! namespace shares the process's monotonic clock), then a flood that fills the
//! queue and keeps it full (its steady arrival rate against the rate; the
//! `tc` backlog in the middle of it against `queue_packets + 1`). Slow links get
//! small datagrams (about 100 per second of the rate, at least 64 B), so the
//! whole test takes some 6 s on the collapse topology, whose 10 kbit/s links
//! decide it. `cm-netem topo experiments/topologies/collapse-fig1.toml
//! --selftest` prints the table (on a 2-core VM: all ten directions within
//! 0.2 % of the rate, a backlog of 50–51 packets, minimum one-way delays of
//! 5.0–5.2 ms for 5 ms).
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let text = std::fs::read_to_string("experiments/topologies/collapse-fig1.toml")?;
//! let net = cm_netem::Network::build(&cm_netem::parse_topology(&text)?)?;
//! let n4 = net.node_addr("n4")?;
//! let sink = net.spawn_in("n4", move || std::net::UdpSocket::bind((n4, 5000)))?;
//! let sink = sink.join().expect("thread")?;
//! net.exec("n0", "true")?.status()?; // a program in n0's namespace
//! println!("{}", net.self_test(&Default::default())?);
//! println!("{:?}", net.link_stats(8)?); // n3 -> n5: sent, dropped, backlog
//! drop(sink);
//! # Ok(())
//! # }
//! ```

pub mod config;
mod delaybox;
pub mod error;
mod interrupt;
pub mod netns;
mod path;
pub mod selftest;
mod sys;
mod teardown;
pub mod topo;

pub use config::{ConfigError, PathConfig, Queue, parse_duration, parse_queue, parse_rate};
pub use delaybox::{DelayBoxStats, DirectionStats};
pub use error::{BuildStep, NetemError, Result};
pub use interrupt::teardown_on_signals;
pub use netns::{is_root, sweep_stale};
pub use path::{Node, Path, PathStats, QdiscStats, tbf_burst};
pub use selftest::{
    FractionCheck, LossRule, ReorderCheck, SelfTestError, SelfTestFailed, SelfTestOptions,
    SelfTestReport,
};
pub use topo::{
    LinkCheck, Network, TopoLink, TopoNode, TopoSelfTestOptions, TopoSelfTestReport, TopologySpec,
    parse_topology,
};
