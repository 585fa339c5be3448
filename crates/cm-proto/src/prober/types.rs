//! The prober's configuration, states, reports and counters.

use cm_core::{Duration, Feedback};

use crate::wire::Hint;

/// Tunables of the prober.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ProberConfig {
    /// Probes per smoothed RTT while data is outstanding (§4.2.1: 2).
    pub probes_per_rtt: f64,
    /// The shortest interval between probes, whatever the RTT. The paper's
    /// paths had RTTs of milliseconds; on loopback or in a data centre
    /// (tens of µs) twice per RTT is tens of thousands of probes and
    /// responses a second, each a system call at both ends (8% of a
    /// CC-UDP sender's CPU on loopback, `cm ttcp bench`). Default 250 µs,
    /// a quarter of the core's aging grace `G` (1 ms), so feedback is never
    /// late enough to age the window; paths with an RTT over 500 µs are
    /// unaffected.
    pub min_probe_interval: Duration,
    /// Wait for a SYN-ACK before sending the SYN again (RFC 6298's initial
    /// RTO, 1 s), doubled per attempt.
    pub syn_timeout: Duration,
    /// SYNs sent before falling back.
    pub syn_attempts: u32,
    /// First wait before trying the handshake again after a fallback.
    pub retry_after: Duration,
    /// Longest wait between handshake retries.
    pub max_retry_after: Duration,
    /// Probe records kept (older ones are dropped; their responses are
    /// then refused as stale).
    pub max_outstanding: usize,
}

impl Default for ProberConfig {
    fn default() -> Self {
        ProberConfig {
            probes_per_rtt: 2.0,
            min_probe_interval: Duration::from_micros(250),
            syn_timeout: Duration::from_secs(1),
            syn_attempts: 3,
            retry_after: Duration::from_secs(30),
            max_retry_after: Duration::from_secs(900),
            max_outstanding: 256,
        }
    }
}

/// Whether the peer runs a receiver CM.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PeerState {
    /// SYN sent, no answer yet: data goes without a header.
    Handshaking,
    /// The peer answered: data carries the CM header and probes run.
    Negotiated,
    /// No receiver CM (timeout or unreachable): data goes without a
    /// header until a retry succeeds.
    Fallback,
}

impl PeerState {
    /// Lower-case name for tables.
    pub fn as_str(self) -> &'static str {
        match self {
            PeerState::Handshaking => "handshaking",
            PeerState::Negotiated => "negotiated",
            PeerState::Fallback => "fallback",
        }
    }
}

/// Feedback for one flow, to hand to `cm_update`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Report {
    /// The flow (as numbered in the DATA headers).
    pub flow: u32,
    /// The feedback.
    pub feedback: Feedback,
    /// The receiver's hint for the flow, when it has one.
    pub hint: Option<Hint>,
    /// Datagram bytes sent between the previous answered probe and this
    /// one, and received in between as the responder counted them
    /// (uncapped: reordering across a probe makes the second exceed the
    /// first). §4.2.2's header-less inference ([`crate::undo`]) reads these.
    pub interval: (u64, u64),
}

/// Why the prober refused a datagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rejected {
    /// Answers nothing outstanding (a replay, a late duplicate, or a guess).
    Stale,
    /// Claims more received bytes or lost packets than were sent.
    Forged,
    /// A type the prober does not take.
    NotForProber,
}

/// Counters for `cm stat`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProberCounters {
    /// SYNs sent.
    pub syns: u64,
    /// Probes sent.
    pub probes: u64,
    /// Responses accepted.
    pub responses: u64,
    /// Probes never answered (a later response answered past them).
    pub unanswered: u64,
    /// Datagrams refused as stale.
    pub stale: u64,
    /// Datagrams refused as forged.
    pub forged: u64,
    /// Valid RSTs (resynchronisations).
    pub resets: u64,
    /// Fallbacks to "no receiver CM".
    pub fallbacks: u64,
    /// Times the peer went silent for a retransmission timeout with data
    /// outstanding (resolved as persistent congestion, handshake again).
    pub silences: u64,
}
