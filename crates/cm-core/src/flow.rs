//! Flows and the small value types of the API (their ids are in [`crate::id`]).
//!
//! A flow is one CM client's stream to one destination (sigcomm1999 §3,
//! `cm_open`). Address types come from `core::net`, which holds only plain
//! address values (no sockets), so the core stays sans-IO.

use core::net::{IpAddr, SocketAddr};
use std::collections::VecDeque;

use crate::error::Error;
use crate::id::{ClientId, MacroflowId};
use crate::time::{Duration, Instant};
use crate::units::{Bytes, Rate};

/// Which flows share congestion state by default: the destination host
/// (cm-implementation-linux §2) within a partition the driver chooses
/// (the daemon uses the owner's uid so users do not share unless configured,
/// cm-implementation-linux §5, RFC 3124 §6).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MacroflowKey {
    /// The destination host.
    pub dst: IpAddr,
    /// The sharing partition (0 unless the driver says otherwise).
    pub partition: u64,
}

/// Arguments of `open` (`cm_open(src, dst)`, cm-implementation-linux §2.1.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpenParams {
    /// The local address, if bound (for multihomed hosts).
    pub src: Option<SocketAddr>,
    /// The destination.
    pub dst: SocketAddr,
    /// The sharing partition (see [`MacroflowKey`]).
    pub partition: u64,
}

impl OpenParams {
    /// A flow to `dst` from an unspecified source, partition 0.
    pub fn to(dst: SocketAddr) -> Self {
        OpenParams {
            src: None,
            dst,
            partition: 0,
        }
    }
}

/// What kind of loss an `update` reports (sigcomm1999 §3.1 "lossmode";
/// RFC 3124 §4.2 names in brackets).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum LossMode {
    /// No loss: all `nsent` bytes arrived, or the losses are not reported.
    #[default]
    None,
    /// A loss inside a window, e.g. TCP duplicate ACKs (`CM_LOSS_FEEDBACK`).
    Transient,
    /// Persistent congestion, e.g. a TCP timeout (`CM_NO_FEEDBACK`).
    Persistent,
    /// An ECN congestion mark (`CM_EXPLICIT_CONGESTION`).
    Ecn,
    /// Losses known not to be caused by congestion (e.g. a corrupting
    /// wireless link) (`CM_NO_CONGESTION`): the window is not reduced.
    NotCongestion,
}

/// Arguments of `update` (`cm_update(flow, nsent, nrecd, lossmode, rtt)`).
///
/// RFC 3124 orders these as (nrecd, nlost) while the papers use
/// (nsent, nrecd); the fields are named with the papers' meaning:
/// `nsent` bytes left the network (were resolved), `nrecd` of them arrived,
/// so `nsent - nrecd` were lost.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Feedback {
    /// Bytes whose fate this feedback reports.
    pub nsent: Bytes,
    /// Bytes of those that were received (must not exceed `nsent`).
    pub nrecd: Bytes,
    /// The kind of loss, if any.
    pub loss: LossMode,
    /// A round-trip-time sample, if the feedback carries one.
    pub rtt: Option<Duration>,
    /// When the most recently sent of the bytes reported lost left the
    /// sender, if the transport knows (`None`: it does not, or nothing was
    /// lost). A loss of data sent before the macroflow's last window
    /// reduction belongs to that reduction (RFC 6582 §3.2's recovery
    /// point, in send-time order as RFC 8985 §6.1 orders segments), which
    /// the controller cannot tell from byte counts alone: a loss is found
    /// only once later data has arrived (RFC 5681 §3.2), and that data may
    /// have been sent after the reduction.
    pub lost_sent: Option<Instant>,
}

impl Feedback {
    /// `n` bytes sent and received, with an RTT sample.
    pub fn acked(n: u64, rtt: Duration) -> Self {
        Feedback {
            nsent: Bytes(n),
            nrecd: Bytes(n),
            loss: LossMode::None,
            rtt: Some(rtt),
            lost_sent: None,
        }
    }

    /// Fold `later` feedback into this one so that both go to the CM as
    /// one `cm_update` (issue: one update per receive batch, not per
    /// acknowledgement). Only feedback without loss is folded: byte
    /// counting grows the window by the bytes acknowledged however they
    /// are batched (RFC 3465; the AIMD controller's slow start and
    /// avoidance both count bytes), while a loss must reach the
    /// controller as its own event. The later RTT sample is kept (the
    /// freshest; RFC 7323 §4 allows fewer samples than segments). Returns
    /// false, changing nothing, when either carries a loss.
    pub fn absorb(&mut self, later: &Feedback) -> bool {
        if self.loss != LossMode::None || later.loss != LossMode::None {
            return false;
        }
        self.nsent += later.nsent;
        self.nrecd += later.nrecd;
        self.rtt = later.rtt.or(self.rtt);
        true
    }

    /// `nsent` bytes resolved of which `nrecd` arrived, with a loss kind.
    pub fn lossy(nsent: u64, nrecd: u64, loss: LossMode) -> Self {
        Feedback {
            nsent: Bytes(nsent),
            nrecd: Bytes(nrecd),
            loss,
            rtt: None,
            lost_sent: None,
        }
    }
}

/// When a rate-callback flow is told about changes (`cm_thresh`,
/// cm-implementation-linux §2.1.2 (iii)): an update is emitted when the
/// flow's rate falls to `1/rate_down` or rises to `rate_up` times the last
/// reported value, or the smoothed RTT does the same with the RTT factors.
/// All factors are >= 1; 1 reports every change.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Thresholds {
    /// Report when rate <= last / rate_down.
    pub rate_down: f64,
    /// Report when rate >= last * rate_up.
    pub rate_up: f64,
    /// Report when srtt <= last / rtt_down.
    pub rtt_down: f64,
    /// Report when srtt >= last * rtt_up.
    pub rtt_up: f64,
}

impl Default for Thresholds {
    /// Rate changes of 25% either way, RTT changes of 50%: small enough for
    /// an encoding ladder of doubling rates, large enough not to chatter.
    fn default() -> Self {
        Thresholds {
            rate_down: 1.25,
            rate_up: 1.25,
            rtt_down: 1.5,
            rtt_up: 1.5,
        }
    }
}

impl Thresholds {
    /// Check every factor is finite and >= 1.
    pub fn validate(&self) -> Result<(), Error> {
        for (name, v) in [
            ("rate_down", self.rate_down),
            ("rate_up", self.rate_up),
            ("rtt_down", self.rtt_down),
            ("rtt_up", self.rtt_up),
        ] {
            if !v.is_finite() || v < 1.0 {
                return Err(Error::InvalidThreshold(format!("{name} = {v}")));
            }
        }
        Ok(())
    }

    /// Whether moving from `(last_rate, last_srtt)` to `(rate, srtt)` crosses.
    pub(crate) fn crossed(&self, last: (Rate, Duration), now: (Rate, Duration)) -> bool {
        let (lr, ls) = (last.0.bytes_per_sec() as f64, last.1.as_micros() as f64);
        let (r, s) = (now.0.bytes_per_sec() as f64, now.1.as_micros() as f64);
        let rate_crossed = r != lr && (r * self.rate_down <= lr || r >= lr * self.rate_up);
        let rtt_crossed = s != ls && (s * self.rtt_down <= ls || s >= ls * self.rtt_up);
        rate_crossed || rtt_crossed
    }
}

/// What the CM knows about a flow's path (`cm_query`). Every field is
/// `None` until there is an estimate: "no estimate yet" is not zero (the
/// RFC 3124 `cm_query` returns unsigned values and cannot say so).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PathEstimate {
    /// The flow's share of the macroflow's rate.
    pub rate: Option<Rate>,
    /// Smoothed RTT of the macroflow.
    pub srtt: Option<Duration>,
    /// RTT variation of the macroflow.
    pub rttvar: Option<Duration>,
    /// Recent fraction of bytes lost, in [0, 1].
    pub loss: Option<f64>,
}

/// One outstanding grant of a flow.
#[derive(Clone, Copy, Debug)]
pub(crate) struct GrantRec {
    pub bytes: Bytes,
    pub seq: u64,
}

/// How a macroflow's controller answered congestion, for `cm stat`: the
/// loss events it reacted to, comparable with a TCP's recoveries and
/// timeouts (Linux's `TCPSackRecovery` and `TCPTimeouts` counters).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CongestionCounters {
    /// Transient-loss and ECN signals that lowered the window (one per
    /// loss event: signals within a reduction already made do not lower it).
    pub reductions: u64,
    /// Persistent-congestion signals (retransmission timeouts).
    pub timeouts: u64,
}

/// Counters kept per flow for `cm stat`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlowCounters {
    /// Bytes notified as sent.
    pub sent: Bytes,
    /// Bytes reported received.
    pub received: Bytes,
    /// Bytes reported lost.
    pub lost: Bytes,
    /// Grants issued.
    pub grants: u64,
    /// Grants that expired unused.
    pub expired: u64,
}

/// The state of one flow.
#[derive(Clone, Debug)]
pub(crate) struct Flow {
    pub client: ClientId,
    /// Position in the client's flow list.
    pub client_slot: usize,
    pub macroflow: MacroflowId,
    pub params: OpenParams,
    pub opened: Instant,
    pub weight: u32,
    /// Requested bytes not yet granted.
    pub pending: Bytes,
    /// Grants not yet notified, oldest first.
    pub grants: VecDeque<GrantRec>,
    pub granted: Bytes,
    pub next_grant_seq: u64,
    /// Bytes sent and not yet resolved by feedback.
    pub in_flight: Bytes,
    /// Whether an entry for this flow is queued in its macroflow's scheduler.
    pub queued: bool,
    /// Scheduling epoch (bumped when the flow moves macroflow).
    pub epoch: u32,
    /// Rate-change subscription: thresholds and the last reported values.
    pub updates: Option<Subscription>,
    pub counters: FlowCounters,
}

/// A flow's rate-callback registration.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Subscription {
    pub thresholds: Thresholds,
    pub last: Option<(Rate, Duration)>,
}
