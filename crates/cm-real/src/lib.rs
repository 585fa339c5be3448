//! # cm-real: the CM papers' experiments on real (emulated) networks
//!
//! Each experiment builds a real path with [`cm_netem`] (network
//! namespaces, a `tbf` bottleneck on the router, the TUN delay box, random
//! loss from a tc-BPF filter at the receiver's ingress), runs real
//! transfers over it with [`cm_ttcp`] — TCP/CM (cm-transport's TCP over
//! UDP, congestion control by libcm's CM), the kernel's TCP, and libcm's
//! CC-UDP (`CcUdpSocket`, congestion controlled by the CM protocol's
//! probes when the receiver sends nothing back) — and returns the same [`Output`] as the simulator's experiments (CSV, SVG
//! plot, JSON metrics beside the paper's numbers, notes).
//!
//! | experiment | paper | metric |
//! |---|---|---|
//! | `real-tcp-friendly` | cm-implementation-linux Fig 3 | `median_ratio_reno` |
//! | `real-throughput` | Figs 4-5 (§4.1) | `throughput_ratio`, CPU per MB |
//! | `real-sharing` | Fig 7 (§4.3) | `later_improvement` |
//! | `real-ensemble` | sigcomm1999 §1/§5.1 | `outside_share_cm`, `jain_ensemble_cm` |
//! | `real-probe-feedback` | sigcomm1999 §4.2–4.3 | `median_ratio_reno` (CC-UDP on probes alone ÷ Reno), fallback, restart |
//! | `real-collapse` | transport-selection-middleware §3, Figs 2–3 | `udp_collapse_ratio`, `cc_to_bottleneck` (Fig 1 topology, UDP vs CM proxies) |
//! | `real-voip-proxy` | §4.3, Figs 6–7, Table 1 | `with_proxies_worst_off_capacity`, `without_fall_1x1_to_10x10`, delays per branch |
//! | `real-delayed-feedback` | cm-implementation-linux §4.4, Fig 10 | the first rate report's delay, rate steps delayed / per-RTT (feedback delayed by min(500 acks, 2 s)) |
//! | `real-layered` | cm-implementation-linux §3.4–3.5, Figs 8–9 | `worst_tracking_error`, `alf_switches_minus_rate`, `stream_to_reno_min/max`, `alf_ahead_stream_to_reno` (layered streaming on a rate schedule; Fig 8's server sending ahead) |
//! | `real-bw-estimate` | iscc §VI-B, Fig 5 | samples within 2% (2 flows) and 7% (32 flows) of the T1 rate, the flows' agreement |
//! | `real-scalability-t1` | iscc §VI-C, Fig 6 | `ISCC p_max / AIMD p_max`, the schemes' order (NACK-based video streams on a T1) |
//! | `real-vat` | cm-implementation-linux §3.6, Fig 2 | `head_p95_to_fifo_p95`, `head_rate_to_fifo_rate`; `head_buffer_p95_to_fifo_buffer_p95` reported (vat's drop-from-head vs FIFO buffer vs raw UDP beside Reno) |
//! | `kernel-ensemble` | sigcomm1999 §1/§5.1 with unmodified kernel TCP (`cmd --kernel-tcp`) | `outside_share_cm`, `worst_outside_share_cm`, `outside_share_reno`, `jain_cm` |
//! | `kernel-sharing` | cm-implementation-linux Fig 7 with unmodified kernel TCP | `later_improvement` |
//! | `kernel-throughput` | cm-implementation-linux §4.1 with unmodified kernel TCP | `throughput_ratio`, the daemon's CPU per MB |
//! | `quic-ensemble` | sigcomm1999 §1/§5.1 with quinn QUIC on the CM (`cm_quic`) | `outside_share_cm` |
//! | `real-wrap` | transport-selection-middleware §3, §4.3 | `wrapped_udp_to_tcp`, `unwrapped_udp_link_share` (an unmodified `iperf3 -u` under `cm wrap`) |
//!
//! They need root (namespaces, qdiscs, TUN devices) and say so. Paths are
//! torn down on every exit path ([`cm_netem::Path`]'s `Drop`). Each runs on
//! the [`harness`]'s [`harness::Rig`] and fails with a [`RealError`].
//!
//! ```no_run
//! let opts = cm_real::RealOpts { quick: true, quiet: false };
//! let out = cm_real::run("real-sharing", &opts).unwrap();
//! println!("{}", out.json());
//! ```
#![warn(missing_docs)]

pub mod bw_estimate;
pub mod collapse;
pub mod delayed_feedback;
pub mod ensemble;
pub mod ensemble_sets;
pub mod error;
pub mod forced;
pub mod harness;
pub mod kernel_ensemble;
pub mod kernel_rig;
pub mod kernel_sharing;
pub mod kernel_throughput;
pub mod layered;
pub mod probe_feedback;
pub mod proc;
pub mod quic_ensemble;
pub mod scalability;
pub mod sharing;
pub mod tcp_friendly;
pub mod throughput;
pub mod vat;
pub mod voip;
pub mod wrap;

pub use cm_experiments::experiments::Output;
pub use error::{RealError, Result};

/// Run parameters of a real experiment.
#[derive(Clone, Copy, Debug)]
pub struct RealOpts {
    /// The short variant (fewer points, smaller transfers).
    pub quick: bool,
    /// No progress bar.
    pub quiet: bool,
}

/// A real experiment's entry point.
pub type RealFn = fn(&RealOpts) -> Result<Output>;

/// Every real experiment: name, description, entry point.
pub const EXPERIMENTS: &[(&str, &str, RealFn)] = &[
    (
        "real-tcp-friendly",
        "cm-implementation-linux Fig 3: TCP/CM vs Linux Reno/SACK/CUBIC vs loss, 10 Mbit/s 60 ms (root)",
        tcp_friendly::run,
    ),
    (
        "real-throughput",
        "cm-implementation-linux Figs 4-5: long transfer on 100 Mbit/s, throughput and CPU/MB (root)",
        throughput::run,
    ),
    (
        "real-sharing",
        "cm-implementation-linux Fig 7: 9 sequential 128 KB retrievals, TCP/CM vs fresh Linux TCP (root)",
        sharing::run,
    ),
    (
        "real-ensemble",
        "4 TCP/CM flows in one macroflow vs 1 outside Reno, and 4 Linux TCP vs 1 (root)",
        ensemble::run,
    ),
    (
        "real-probe-feedback",
        "sigcomm1999 §4.2-4.3: CC-UDP on CM-protocol probes alone (no acks) vs Linux Reno vs loss; fallback and restart (root)",
        probe_feedback::run,
    ),
    (
        "real-collapse",
        "transport-selection-middleware Figs 2-3: congestion collapse on the Fig 1 topology, UDP vs through CM proxies (root)",
        voip::run_collapse,
    ),
    (
        "real-voip-proxy",
        "transport-selection-middleware Figs 6-7, Table 1: VoIP senders with and without CM proxies (TFRC, MAXQ) on Fig 1 (root)",
        voip::run_voip,
    ),
    (
        "real-layered",
        "cm-implementation-linux Figs 8-9: layered streaming (ALF vs rate callbacks) on a 4 -> 1 -> 2.5 -> 4 Mbit/s path beside Linux Reno (root)",
        layered::run,
    ),
    (
        "real-vat",
        "cm-implementation-linux §3.6, Fig 2: vat audio with drop-from-head vs FIFO buffering vs raw UDP, beside 5 Linux Reno transfers (root)",
        vat::run,
    ),
    (
        "real-scalability-t1",
        "iscc Fig 6 §VI-C on a real path: loss of 2-32 NACK-based video streams (AIMD, IIAD, TFRC, ISCC(2)) on an emulated T1 (root)",
        scalability::run,
    ),
    (
        "real-bw-estimate",
        "iscc Fig 5 §VI-B on a real path: packet-bunch capacity samples of 2 and 32 NACK-based AIMD streams on an emulated T1 (root)",
        bw_estimate::run,
    ),
    (
        "real-delayed-feedback",
        "cm-implementation-linux Fig 10: the CM's reported bandwidth with per-RTT feedback and with feedback delayed by min(500 acks, 2 s) (root)",
        delayed_feedback::run,
    ),
    (
        "kernel-ensemble",
        "4 curl downloads whose kernel TCP uses the `cm` congestion control (cmd --kernel-tcp) vs 1 outside Reno, and 4 Reno vs 1 (root, BPF, curl, python3)",
        kernel_ensemble::run,
    ),
    (
        "kernel-sharing",
        "cm-implementation-linux Fig 7 with unmodified programs: 9 curl retrievals of 128 KB, kernel TCP with `cm` vs Reno (root, BPF, curl, python3)",
        kernel_sharing::run,
    ),
    (
        "kernel-throughput",
        "cm-implementation-linux §4.1 with unmodified programs: one long curl download on 100 Mbit/s, kernel TCP with `cm` vs Reno, and the daemon's CPU per MB (root, BPF, curl, python3)",
        kernel_throughput::run,
    ),
    (
        "quic-ensemble",
        "4 QUIC downloads (quinn) on one CM vs 1 outside Reno, and 4 on quinn's NewReno vs 1, 10 Mbit/s 60 ms (root)",
        quic_ensemble::run,
    ),
    (
        "real-wrap",
        "transport-selection-middleware §4.3: unmodified iperf3 -u -b 50M beside Linux Reno, unwrapped and under cm wrap (root, iperf3)",
        wrap::run,
    ),
];

/// Whether `name` is a real experiment.
pub fn is_real(name: &str) -> bool {
    EXPERIMENTS.iter().any(|(n, _, _)| *n == name)
}

/// Runs real experiment `name` (after checking for root and sweeping
/// namespaces left by killed runs).
pub fn run(name: &str, opts: &RealOpts) -> Result<Output> {
    let f = EXPERIMENTS
        .iter()
        .find(|(n, _, _)| *n == name)
        .ok_or_else(|| RealError::Unknown(name.to_string()))?
        .2;
    harness::require_root()?;
    let _ = cm_netem::sweep_stale();
    f(opts)
}
