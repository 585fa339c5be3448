//! The messages: client → daemon ([`ToDaemon`]) and daemon → client
//! ([`ToClient`]), and the values they carry. Their tags and body layouts
//! are in [`codec`].
//!
//! Flow and macroflow ids are the core's ids as integers
//! (`FlowId::to_u64`); byte counts are u64; RTTs are microseconds.

use core::net::{IpAddr, SocketAddr};

use cm_core::{Duration, LossMode, PathEstimate, Rate};

mod codec;
mod error_code;
pub mod examples;
mod feedback;
mod peer;

pub use codec::Message;
pub use error_code::ErrorCode;
pub use peer::{PeerMode, PeerStat};

/// A call from a client to the daemon (the papers' `cm_*` functions).
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum ToDaemon {
    /// First message of a connection: the protocol version the client speaks.
    Hello {
        /// [`crate::VERSION`] of the client.
        version: u8,
    },
    /// `cm_open(src, dst)`; answered by [`ToClient::Opened`].
    Open {
        /// Reply tag.
        seq: u32,
        /// Local address, if bound.
        src: Option<SocketAddr>,
        /// Destination.
        dst: SocketAddr,
    },
    /// `cm_close(flow)`.
    Close {
        /// The flow.
        flow: u64,
    },
    /// `cm_request(flow)` for `k` MTUs (k = 1 is the paper's call).
    Request {
        /// The flow.
        flow: u64,
        /// MTUs asked for.
        k: u32,
    },
    /// `cm_notify(flow, nsent)`.
    Notify {
        /// The flow.
        flow: u64,
        /// Bytes sent (0 declines a grant).
        nsent: u64,
    },
    /// `cm_update(flow, nsent, nrecd, lossmode, rtt)`.
    Update {
        /// The flow.
        flow: u64,
        /// Bytes resolved.
        nsent: u64,
        /// Bytes of those received.
        nrecd: u64,
        /// Loss kind.
        loss: LossMode,
        /// RTT sample in microseconds, if any.
        rtt_us: Option<u64>,
        /// How long before the message the most recently sent of the lost
        /// bytes left the sender, in microseconds, if the client knows
        /// (`cm_core::Feedback::lost_sent`, carried as an age because the
        /// two processes' clocks have different epochs).
        lost_age_us: Option<u64>,
    },
    /// `cm_query(flow)`; answered by [`ToClient::Estimate`].
    Query {
        /// Reply tag.
        seq: u32,
        /// The flow.
        flow: u64,
    },
    /// `cm_mtu(flow)`; answered by [`ToClient::Mtu`].
    Mtu {
        /// Reply tag.
        seq: u32,
        /// The flow.
        flow: u64,
    },
    /// `cm_register_update`: rate-change notifications on or off.
    RateUpdates {
        /// The flow.
        flow: u64,
        /// On or off.
        on: bool,
    },
    /// `cm_thresh(down, up)` for rate and RTT.
    Thresh {
        /// The flow.
        flow: u64,
        /// Rate falls to 1/x of the last report.
        rate_down: f64,
        /// Rate rises to x times the last report.
        rate_up: f64,
        /// RTT falls to 1/x.
        rtt_down: f64,
        /// RTT rises to x times.
        rtt_up: f64,
    },
    /// `cm_getmacroflow(flow)`; answered by [`ToClient::Macroflow`].
    GetMacroflow {
        /// Reply tag.
        seq: u32,
        /// The flow.
        flow: u64,
    },
    /// `cm_setmacroflow(flow, target)` (`None`: a new macroflow of its
    /// own); answered by [`ToClient::Macroflow`].
    SetMacroflow {
        /// Reply tag.
        seq: u32,
        /// The flow.
        flow: u64,
        /// The macroflow to join.
        target: Option<u64>,
    },
    /// Scheduler weight of a flow (1..=65535).
    SetWeight {
        /// The flow.
        flow: u64,
        /// Its weight.
        weight: u32,
    },
    /// Everything the caller may see, for `cm stat`: answered by
    /// [`ToClient::StatMacroflow`] and [`ToClient::StatFlow`] messages and
    /// a final [`ToClient::StatEnd`].
    Stat {
        /// Reply tag.
        seq: u32,
    },
    /// The caller's macroflow state towards a host, for `cm query <dst>`:
    /// answered by [`ToClient::StatMacroflow`]s and [`ToClient::StatEnd`].
    QueryHost {
        /// Reply tag.
        seq: u32,
        /// The host.
        dst: IpAddr,
    },
    /// Liveness check; answered by [`ToClient::Pong`].
    Ping {
        /// Reply tag.
        seq: u32,
    },
    /// Move this connection's frames to shared-memory rings (see
    /// [`crate::shm`]); answered on the socket by [`ToClient::Attached`]
    /// with the region and doorbells attached, or an error (then the
    /// socket stays the transport).
    Attach {
        /// Reply tag.
        seq: u32,
    },
    /// With rings attached: also (`on`) or no longer announce frames for
    /// this client by sending an empty frame on the socket, for clients
    /// that wait on the socket itself (SIGIO: an `eventfd` cannot raise it).
    SocketDoorbell {
        /// On or off.
        on: bool,
    },
    /// Run the controller `spec` (the text form of
    /// `cm_core::controller::ControllerConfig`, at most [`MAX_SPEC`]
    /// bytes) on the flow's macroflow; answered by [`ToClient::Done`], or
    /// by [`ToClient::Refused`] saying why the spec is unusable.
    SetController {
        /// Reply tag.
        seq: u32,
        /// The flow.
        flow: u64,
        /// The controller's text form, e.g. `iscc:l=2`.
        spec: String,
    },
    /// The bottleneck capacity of the flow's macroflow in bytes per second,
    /// as the application or its receiver estimates it (`None` or 0 forgets
    /// it); ISCC uses it (iscc §V-D). No reply.
    SetCapacity {
        /// The flow.
        flow: u64,
        /// Bytes per second.
        capacity: Option<u64>,
    },
    /// One bottleneck-rate sample, bytes per second, from a packet bunch
    /// the flow's receiver measured (iscc §VI-B); it feeds the macroflow's
    /// capacity filter (`CongestionManager::capacity_sample`). No reply.
    CapacitySample {
        /// The flow.
        flow: u64,
        /// Bytes per second (0 carries nothing and is ignored).
        sample: u64,
    },
    /// The flow's feedback comes in batches (CM protocol probe responses)
    /// and resolves a byte this many thousandths of an RTT later than
    /// per-packet acknowledgements (`None`: per-packet); the macroflow's
    /// window allows for it (`CongestionManager::set_feedback_lag`). No
    /// reply.
    SetFeedbackLag {
        /// The flow.
        flow: u64,
        /// Thousandths of an RTT.
        lag: Option<u16>,
    },
    /// What the CM protocol knows of the flow's peer, for `cm stat`
    /// (`None` forgets it). No reply.
    SetPeer {
        /// The flow.
        flow: u64,
        /// The peer's state.
        peer: Option<PeerStat>,
    },
}

/// Longest controller spec a [`ToDaemon::SetController`] carries, in bytes.
pub const MAX_SPEC: usize = 256;

/// Longest controller name a [`MacroflowStat`] carries, in bytes.
pub const MAX_NAME: usize = 64;

/// Longest explanation a [`ToClient::Refused`] carries, in bytes (a longer
/// one is cut at a character boundary).
pub const MAX_WHY: usize = 1024;

impl ToDaemon {
    /// The reply tag of a call the daemon answers with a reply echoing it
    /// (`None`: `Hello`, which is answered by `Welcome`, and the calls
    /// without a reply).
    pub fn seq(&self) -> Option<u32> {
        match *self {
            ToDaemon::Open { seq, .. }
            | ToDaemon::Query { seq, .. }
            | ToDaemon::Mtu { seq, .. }
            | ToDaemon::GetMacroflow { seq, .. }
            | ToDaemon::SetMacroflow { seq, .. }
            | ToDaemon::Stat { seq }
            | ToDaemon::QueryHost { seq, .. }
            | ToDaemon::Ping { seq }
            | ToDaemon::Attach { seq }
            | ToDaemon::SetController { seq, .. } => Some(seq),
            ToDaemon::Hello { .. }
            | ToDaemon::Close { .. }
            | ToDaemon::Request { .. }
            | ToDaemon::Notify { .. }
            | ToDaemon::Update { .. }
            | ToDaemon::RateUpdates { .. }
            | ToDaemon::Thresh { .. }
            | ToDaemon::SetWeight { .. }
            | ToDaemon::SetCapacity { .. }
            | ToDaemon::CapacitySample { .. }
            | ToDaemon::SetPeer { .. }
            | ToDaemon::SetFeedbackLag { .. }
            | ToDaemon::SocketDoorbell { .. } => None,
        }
    }

    /// The flow a call acts on (`None`: calls about the connection, the
    /// caller's view or a new flow: `Hello`, `Open`, `Stat`, `QueryHost`,
    /// `Ping`, `Attach`, `SocketDoorbell`).
    pub fn flow(&self) -> Option<u64> {
        match *self {
            ToDaemon::Close { flow }
            | ToDaemon::Request { flow, .. }
            | ToDaemon::Notify { flow, .. }
            | ToDaemon::Update { flow, .. }
            | ToDaemon::Query { flow, .. }
            | ToDaemon::Mtu { flow, .. }
            | ToDaemon::RateUpdates { flow, .. }
            | ToDaemon::Thresh { flow, .. }
            | ToDaemon::GetMacroflow { flow, .. }
            | ToDaemon::SetMacroflow { flow, .. }
            | ToDaemon::SetWeight { flow, .. }
            | ToDaemon::SetController { flow, .. }
            | ToDaemon::SetCapacity { flow, .. }
            | ToDaemon::CapacitySample { flow, .. }
            | ToDaemon::SetPeer { flow, .. }
            | ToDaemon::SetFeedbackLag { flow, .. } => Some(flow),
            ToDaemon::Hello { .. }
            | ToDaemon::Open { .. }
            | ToDaemon::Stat { .. }
            | ToDaemon::QueryHost { .. }
            | ToDaemon::Ping { .. }
            | ToDaemon::Attach { .. }
            | ToDaemon::SocketDoorbell { .. } => None,
        }
    }

    /// Whether the daemon answers this call soon: with a reply (calls with
    /// a [`ToDaemon::seq`], `Hello`) or, for a request, usually with a
    /// grant. A client that just sent such a call may poll briefly for the
    /// answer before it sleeps (see "Waiting" in the crate docs); the others
    /// (`Notify`, `Update`, `Close`, ...) are fire-and-forget.
    pub fn expects_answer(&self) -> bool {
        self.seq().is_some() || matches!(self, ToDaemon::Hello { .. } | ToDaemon::Request { .. })
    }
}

/// A path estimate on the wire: negative means "no estimate yet".
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Estimate {
    /// Bytes per second, or -1.
    pub rate: i64,
    /// Smoothed RTT in µs, or -1.
    pub srtt_us: i64,
    /// RTT variation in µs, or -1.
    pub rttvar_us: i64,
    /// Loss fraction in [0, 1], or -1.
    pub loss: f64,
}

impl From<PathEstimate> for Estimate {
    fn from(e: PathEstimate) -> Self {
        let signed = |v: Option<u64>| v.map_or(-1, |x| i64::try_from(x).unwrap_or(i64::MAX));
        Estimate {
            rate: signed(e.rate.map(Rate::bytes_per_sec)),
            srtt_us: signed(e.srtt.map(Duration::as_micros)),
            rttvar_us: signed(e.rttvar.map(Duration::as_micros)),
            loss: e.loss.unwrap_or(-1.0),
        }
    }
}

impl From<Estimate> for PathEstimate {
    fn from(e: Estimate) -> Self {
        let unsigned = |v: i64| u64::try_from(v).ok();
        PathEstimate {
            rate: unsigned(e.rate).map(Rate::from_bytes_per_sec),
            srtt: unsigned(e.srtt_us).map(Duration::from_micros),
            rttvar: unsigned(e.rttvar_us).map(Duration::from_micros),
            loss: (e.loss >= 0.0 && e.loss <= 1.0).then_some(e.loss),
        }
    }
}

/// One macroflow as `cm stat` shows it.
#[derive(Clone, Debug, PartialEq)]
pub struct MacroflowStat {
    /// Its id.
    pub id: u64,
    /// Destination host (none for a macroflow made by `setmacroflow`).
    pub dst: Option<IpAddr>,
    /// Owner uid of the sharing partition (u32::MAX: shared by all users).
    pub uid: u32,
    /// Congestion window in bytes.
    pub window: u64,
    /// The path estimate.
    pub estimate: Estimate,
    /// Bytes in flight.
    pub in_flight: u64,
    /// Number of flows.
    pub flows: u32,
    /// The name of the controller it runs (`aimd`, `iscc`, ...; at most
    /// [`MAX_NAME`] bytes).
    pub controller: String,
    /// The bottleneck capacity estimate it runs on, bytes per second.
    pub capacity: Option<u64>,
    /// Loss events that lowered its window (a TCP's recoveries).
    pub reductions: u64,
    /// Retransmission timeouts reported to it (persistent congestion).
    pub timeouts: u64,
}

/// One flow as `cm stat` shows it.
#[derive(Clone, Debug, PartialEq)]
pub struct FlowStat {
    /// Its id.
    pub id: u64,
    /// Its macroflow.
    pub macroflow: u64,
    /// Owner uid and pid.
    pub uid: u32,
    /// Owner process id.
    pub pid: u32,
    /// Destination.
    pub dst: SocketAddr,
    /// Weighted share of the macroflow, in [0, 1].
    pub share: f64,
    /// Bytes in flight.
    pub in_flight: u64,
    /// Bytes sent so far.
    pub sent: u64,
    /// Bytes reported lost so far.
    pub lost: u64,
    /// The flow's estimate (its share of the rate).
    pub estimate: Estimate,
    /// The CM protocol's view of its peer, if the flow's sender reports one.
    pub peer: Option<PeerStat>,
    /// For a kernel TCP connection using the `cm` congestion control
    /// (`cmd --kernel-tcp`): its local address (with `dst`, its 4-tuple;
    /// `pid` is 0). `None` for libcm flows.
    pub kernel: Option<SocketAddr>,
}

/// A message from the daemon to a client.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum ToClient {
    /// Answer to `Hello`.
    Welcome {
        /// The daemon's protocol version.
        version: u8,
        /// The client's id at the daemon.
        client: u64,
        /// The uid the daemon saw (SO_PEERCRED).
        uid: u32,
        /// The default MTU.
        mtu: u32,
    },
    /// `cmapp_send`: the flow may send `bytes` now.
    Grant {
        /// The flow.
        flow: u64,
        /// Bytes granted.
        bytes: u64,
    },
    /// `cmapp_update`: the flow's estimate crossed its thresholds.
    RateUpdate {
        /// The flow.
        flow: u64,
        /// The estimate.
        estimate: Estimate,
    },
    /// A grant was not notified in time and was withdrawn.
    GrantExpired {
        /// The flow.
        flow: u64,
        /// Bytes withdrawn.
        bytes: u64,
    },
    /// Answer to `Open`.
    Opened {
        /// Echoed tag.
        seq: u32,
        /// The new flow.
        flow: u64,
    },
    /// Answer to `Query`.
    Estimate {
        /// Echoed tag.
        seq: u32,
        /// The estimate.
        estimate: Estimate,
    },
    /// Answer to `Mtu`.
    Mtu {
        /// Echoed tag.
        seq: u32,
        /// The MTU in bytes.
        mtu: u32,
    },
    /// Answer to `GetMacroflow` / `SetMacroflow`.
    Macroflow {
        /// Echoed tag.
        seq: u32,
        /// The macroflow id.
        id: u64,
    },
    /// A refused call: `seq` of the call, or 0 for a fire-and-forget call
    /// (then `flow` names the flow it was about, 0 if none).
    Error {
        /// Echoed tag (0: asynchronous).
        seq: u32,
        /// The flow concerned, or 0.
        flow: u64,
        /// Why.
        code: ErrorCode,
    },
    /// Part of a `Stat` / `QueryHost` answer.
    StatMacroflow {
        /// Echoed tag.
        seq: u32,
        /// The macroflow.
        stat: MacroflowStat,
    },
    /// Part of a `Stat` answer.
    StatFlow {
        /// Echoed tag.
        seq: u32,
        /// The flow.
        stat: FlowStat,
    },
    /// The end of a `Stat` / `QueryHost` answer.
    StatEnd {
        /// Echoed tag.
        seq: u32,
    },
    /// Answer to `Ping`.
    Pong {
        /// Echoed tag.
        seq: u32,
    },
    /// Answer to a call that returns no value (`SetController`).
    Done {
        /// Echoed tag.
        seq: u32,
    },
    /// A refused call with the reason in words (a controller spec that
    /// does not parse): what [`ToClient::Error`] says, and why.
    Refused {
        /// Echoed tag.
        seq: u32,
        /// The flow concerned.
        flow: u64,
        /// Why, as a code.
        code: ErrorCode,
        /// Why, in words (at most [`MAX_WHY`] bytes).
        why: String,
    },
    /// Answer to `Attach`, sent on the socket with the region, the daemon's
    /// doorbell and the client's doorbell attached (`SCM_RIGHTS`, in that
    /// order). Every later frame travels through the rings.
    Attached {
        /// Echoed tag.
        seq: u32,
        /// Bytes of each ring's data area.
        ring_bytes: u32,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Which calls carry a reply tag, which act on a flow, and which the
    /// daemon answers at all.
    #[test]
    fn reply_tags_flows_and_answers_per_call() {
        const TAGGED: [&str; 10] = [
            "Open",
            "Query",
            "Mtu",
            "GetMacroflow",
            "SetMacroflow",
            "Stat",
            "QueryHost",
            "Ping",
            "Attach",
            "SetController",
        ];
        for m in examples::to_daemon() {
            let debug = format!("{m:?}");
            let name = debug.split([' ', '{']).next().unwrap_or_default();
            let tagged = TAGGED.contains(&name);
            assert_eq!(m.seq().is_some(), tagged, "{name}");
            let on_flow = !matches!(
                name,
                "Hello" | "Open" | "Stat" | "QueryHost" | "Ping" | "Attach" | "SocketDoorbell"
            );
            assert_eq!(m.flow().is_some(), on_flow, "{name}");
            let answered = tagged || name == "Hello" || name == "Request";
            assert_eq!(m.expects_answer(), answered, "{name}");
        }
        let open = ToDaemon::Open {
            seq: 7,
            src: None,
            dst: "10.0.0.1:9".parse().expect("an address"),
        };
        assert_eq!(open.seq(), Some(7));
        assert_eq!(ToDaemon::Close { flow: 9 }.flow(), Some(9));
    }
}
