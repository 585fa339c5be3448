//! Adaptive applications built on the CM API, as real programs over real
//! sockets (the papers' point: applications adapt through the CM).
//!
//! | module | paper | what |
//! |---|---|---|
//! | [`alf`] | cm-implementation-linux §3.5 | request/callback over the CC-UDP wire: the datagram is chosen at the grant |
//! | [`stream`] | cm-implementation-linux §3.4–3.5, Figs 8–9 | a layered server adapting by ALF (`cm_query` at each grant) or by rate callbacks, and a client playing out after a startup buffer |
//! | [`video`] | iscc §VI | NACK-based scalable video: a base layer plus a fine-grained enhancement layer at the rate the macroflow's controller (AIMD, IIAD, TFRC, ISCC) allows, sent in packet bunches; the client NACKs lost base packets and returns bunch capacity samples for ISCC |
//! | [`vat`] | cm-implementation-linux §3.6, Fig 2 | interactive CBR audio: a policer for long-term adaptation, an application buffer (drop-from-head or drop-tail) that feeds the socket only when the CM grants, and a receiver reporting one-way delay, jitter and loss |
//!
//! The command line is `cm vat send|recv` (crate `cm`); the experiment
//! on an emulated path is `cm experiment real-vat` (crate `cm-real`).

pub mod alf;
pub mod stream;
pub mod vat;
pub mod video;

/// Now, ns since the Unix epoch: the send times that vat frames and
/// stream packets carry (one-way delay needs one clock at both ends).
pub(crate) fn unix_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}
