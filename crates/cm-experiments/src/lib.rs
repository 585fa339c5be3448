//! # cm-experiments: the simulated hosts, scenarios and the papers' experiments
//!
//! Runs the Congestion Manager on [`cm_sim`]: simulated end hosts that
//! carry `cm-core` and `cm-transport` ([`hosts`]), scenarios written as
//! data ([`scenario`], executed by [`simulate`]), and the papers'
//! experiments ([`experiments`]), each in one directory or file under
//! `experiments/` that runs its sweep and reports its numbers beside the
//! paper's. `cm sim` and `cm experiment` are the command-line front ends;
//! `cm-real` reuses [`experiments::Output`] and [`plot`] for its
//! real-network twins.
//!
//! | module | what |
//! |---|---|
//! | [`hosts`] | the CM host (TCP/CM, NewReno, CBR, audio, web sources) and the receiver |
//! | [`alf`] | the ALF (CC-UDP) sender and receiver on the simulator |
//! | [`probe`] | probe-driven CM hosts: the CM protocol (`cm-proto`) between a sender CM and a receiver CM |
//! | [`scenario`] | a scenario as TOML: bottleneck, access links, flows |
//! | [`simulate`] | runs a scenario and summarises it ([`simulate::ScenarioResult`]) |
//! | [`referee`] | ns-2 runs the baseline half of each simulated figure beside ours |
//! | [`ns2`] | the same scenario's baseline flows in ns-2 (the papers' simulator), as a referee |
//! | [`experiments`] | the papers' experiments: `aging/`, `layered_audio/`, `scheduler/` (each a report module plus its `simulation`), `tcp_friendly`, `sharing`, `web4`, `seq_trace` |
//! | [`plot`], [`progress`], [`seeded`] | SVG figures, the progress bar and worker pool, seeded draws |
//!
//! ```
//! use cm_experiments::{scenario::Scenario, simulate};
//!
//! let s = Scenario::from_toml(r#"
//!     name = "one-flow"
//!     duration = 2.0
//!     [bottleneck]
//!     rate_bps = 1_000_000
//!     delay_ms = 30
//!     queue = "bdp"
//!     [[flow]]
//!     name = "a"
//!     transport = "tcpcm"
//! "#).unwrap();
//! let result = simulate::run(&s).unwrap();
//! assert!(result.flows[0].goodput_bps > 100_000.0);
//! ```
#![warn(missing_docs)]

pub mod alf;
pub mod experiments;
pub mod hosts;
pub mod ns2;
pub mod plot;
pub mod probe;
pub mod progress;
pub mod referee;
pub mod scenario;
pub mod seeded;
pub mod simulate;
