//! The messages: client → daemon ([`ToDaemon`]) and daemon → client
//! ([`ToClient`]), with their tags and field encodings.
//!
//! Flow and macroflow ids are the core's ids as integers
//! (`FlowId::to_u64`); byte counts are u64; RTTs are microseconds.

use core::net::{IpAddr, SocketAddr};

use cm_core::{Duration, LossMode, PathEstimate, Rate};

use crate::codec::{DecodeError, Reader, Writer};

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
}

impl ToDaemon {
    /// Whether the daemon answers this call soon: with a reply (calls with
    /// a `seq`, `Hello`) or, for a request, usually with a grant. A client
    /// that just sent such a call may poll briefly for the answer before it
    /// sleeps (see "Waiting" in the crate docs); the others (`Notify`,
    /// `Update`, `Close`, ...) are fire-and-forget.
    pub fn expects_answer(&self) -> bool {
        match self {
            ToDaemon::Hello { .. }
            | ToDaemon::Open { .. }
            | ToDaemon::Request { .. }
            | ToDaemon::Query { .. }
            | ToDaemon::Mtu { .. }
            | ToDaemon::GetMacroflow { .. }
            | ToDaemon::SetMacroflow { .. }
            | ToDaemon::Stat { .. }
            | ToDaemon::QueryHost { .. }
            | ToDaemon::Ping { .. }
            | ToDaemon::Attach { .. } => true,
            ToDaemon::Close { .. }
            | ToDaemon::Notify { .. }
            | ToDaemon::Update { .. }
            | ToDaemon::RateUpdates { .. }
            | ToDaemon::Thresh { .. }
            | ToDaemon::SetWeight { .. }
            | ToDaemon::SocketDoorbell { .. } => false,
        }
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

/// Why the daemon refused a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorCode {
    /// The flow is not open, or is not the caller's.
    UnknownFlow,
    /// The macroflow does not exist or the caller may not use it.
    UnknownMacroflow,
    /// A bad argument (RTT, byte counts, k, weight, MTU, threshold).
    InvalidArgument,
    /// A per-client or global limit was reached.
    LimitReached,
    /// The caller sends messages faster than its limit allows.
    RateLimited,
    /// The caller may not do this (another user's flow or macroflow).
    PermissionDenied,
    /// The message could not be decoded.
    Malformed,
    /// The client speaks another protocol version.
    UnsupportedVersion,
    /// The first message was not `Hello`.
    NotIntroduced,
}

impl ErrorCode {
    /// The wire value.
    pub fn to_u16(self) -> u16 {
        match self {
            ErrorCode::UnknownFlow => 1,
            ErrorCode::UnknownMacroflow => 2,
            ErrorCode::InvalidArgument => 3,
            ErrorCode::LimitReached => 4,
            ErrorCode::RateLimited => 5,
            ErrorCode::PermissionDenied => 6,
            ErrorCode::Malformed => 7,
            ErrorCode::UnsupportedVersion => 8,
            ErrorCode::NotIntroduced => 9,
        }
    }

    /// From the wire value.
    pub fn from_u16(v: u16) -> Option<Self> {
        Some(match v {
            1 => ErrorCode::UnknownFlow,
            2 => ErrorCode::UnknownMacroflow,
            3 => ErrorCode::InvalidArgument,
            4 => ErrorCode::LimitReached,
            5 => ErrorCode::RateLimited,
            6 => ErrorCode::PermissionDenied,
            7 => ErrorCode::Malformed,
            8 => ErrorCode::UnsupportedVersion,
            9 => ErrorCode::NotIntroduced,
            _ => return None,
        })
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

fn loss_to_u8(l: LossMode) -> u8 {
    match l {
        LossMode::None => 0,
        LossMode::Transient => 1,
        LossMode::Persistent => 2,
        LossMode::Ecn => 3,
        LossMode::NotCongestion => 4,
        // LossMode is non_exhaustive in spirit; a future kind is sent as
        // "no congestion signal" rather than invented.
        #[allow(unreachable_patterns)]
        _ => 0,
    }
}

fn loss_from_u8(v: u8) -> Result<LossMode, DecodeError> {
    Ok(match v {
        0 => LossMode::None,
        1 => LossMode::Transient,
        2 => LossMode::Persistent,
        3 => LossMode::Ecn,
        4 => LossMode::NotCongestion,
        _ => return Err(DecodeError::Invalid("loss mode")),
    })
}

fn put_estimate(w: &mut Writer<'_>, e: &Estimate) {
    w.i64(e.rate);
    w.i64(e.srtt_us);
    w.i64(e.rttvar_us);
    w.f64(e.loss);
}

fn get_estimate(r: &mut Reader<'_>) -> Result<Estimate, DecodeError> {
    Ok(Estimate {
        rate: r.i64()?,
        srtt_us: r.i64()?,
        rttvar_us: r.i64()?,
        loss: r.f64()?,
    })
}

/// A message type the frame codec can carry.
pub trait Message: Sized {
    /// Write the body; return the tag.
    #[doc(hidden)]
    fn encode_body(&self, w: &mut Vec<u8>) -> u8;
    /// Read a body of the given tag (the whole slice is the body).
    #[doc(hidden)]
    fn decode_body(tag: u8, body: &[u8]) -> Result<Self, DecodeError>;
}

impl Message for ToDaemon {
    fn encode_body(&self, buf: &mut Vec<u8>) -> u8 {
        let mut w = Writer { buf };
        match *self {
            ToDaemon::Hello { version } => {
                w.u8(version);
                0x01
            }
            ToDaemon::Open { seq, src, dst } => {
                w.u32(seq);
                w.opt_sockaddr(src);
                w.sockaddr(dst);
                0x02
            }
            ToDaemon::Close { flow } => {
                w.u64(flow);
                0x03
            }
            ToDaemon::Request { flow, k } => {
                w.u64(flow);
                w.u32(k);
                0x04
            }
            ToDaemon::Notify { flow, nsent } => {
                w.u64(flow);
                w.u64(nsent);
                0x05
            }
            ToDaemon::Update {
                flow,
                nsent,
                nrecd,
                loss,
                rtt_us,
            } => {
                w.u64(flow);
                w.u64(nsent);
                w.u64(nrecd);
                w.u8(loss_to_u8(loss));
                w.bool(rtt_us.is_some());
                w.u64(rtt_us.unwrap_or(0));
                0x06
            }
            ToDaemon::Query { seq, flow } => {
                w.u32(seq);
                w.u64(flow);
                0x07
            }
            ToDaemon::Mtu { seq, flow } => {
                w.u32(seq);
                w.u64(flow);
                0x08
            }
            ToDaemon::RateUpdates { flow, on } => {
                w.u64(flow);
                w.bool(on);
                0x09
            }
            ToDaemon::Thresh {
                flow,
                rate_down,
                rate_up,
                rtt_down,
                rtt_up,
            } => {
                w.u64(flow);
                w.f64(rate_down);
                w.f64(rate_up);
                w.f64(rtt_down);
                w.f64(rtt_up);
                0x0a
            }
            ToDaemon::GetMacroflow { seq, flow } => {
                w.u32(seq);
                w.u64(flow);
                0x0b
            }
            ToDaemon::SetMacroflow { seq, flow, target } => {
                w.u32(seq);
                w.u64(flow);
                w.bool(target.is_some());
                w.u64(target.unwrap_or(0));
                0x0c
            }
            ToDaemon::SetWeight { flow, weight } => {
                w.u64(flow);
                w.u32(weight);
                0x0d
            }
            ToDaemon::Stat { seq } => {
                w.u32(seq);
                0x0e
            }
            ToDaemon::QueryHost { seq, dst } => {
                w.u32(seq);
                w.ip(dst);
                0x0f
            }
            ToDaemon::Ping { seq } => {
                w.u32(seq);
                0x10
            }
            ToDaemon::Attach { seq } => {
                w.u32(seq);
                0x11
            }
            ToDaemon::SocketDoorbell { on } => {
                w.bool(on);
                0x12
            }
        }
    }

    fn decode_body(tag: u8, body: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(body);
        let m = match tag {
            0x01 => ToDaemon::Hello { version: r.u8()? },
            0x02 => ToDaemon::Open {
                seq: r.u32()?,
                src: r.opt_sockaddr()?,
                dst: r.sockaddr()?,
            },
            0x03 => ToDaemon::Close { flow: r.u64()? },
            0x04 => ToDaemon::Request {
                flow: r.u64()?,
                k: r.u32()?,
            },
            0x05 => ToDaemon::Notify {
                flow: r.u64()?,
                nsent: r.u64()?,
            },
            0x06 => {
                let (flow, nsent, nrecd) = (r.u64()?, r.u64()?, r.u64()?);
                let loss = loss_from_u8(r.u8()?)?;
                let has_rtt = r.bool()?;
                let rtt = r.u64()?;
                if !has_rtt && rtt != 0 {
                    // One encoding per message: an absent sample is zero.
                    return Err(DecodeError::Invalid("rtt without its flag"));
                }
                ToDaemon::Update {
                    flow,
                    nsent,
                    nrecd,
                    loss,
                    rtt_us: has_rtt.then_some(rtt),
                }
            }
            0x07 => ToDaemon::Query {
                seq: r.u32()?,
                flow: r.u64()?,
            },
            0x08 => ToDaemon::Mtu {
                seq: r.u32()?,
                flow: r.u64()?,
            },
            0x09 => ToDaemon::RateUpdates {
                flow: r.u64()?,
                on: r.bool()?,
            },
            0x0a => ToDaemon::Thresh {
                flow: r.u64()?,
                rate_down: r.f64()?,
                rate_up: r.f64()?,
                rtt_down: r.f64()?,
                rtt_up: r.f64()?,
            },
            0x0b => ToDaemon::GetMacroflow {
                seq: r.u32()?,
                flow: r.u64()?,
            },
            0x0c => {
                let (seq, flow) = (r.u32()?, r.u64()?);
                let some = r.bool()?;
                let t = r.u64()?;
                if !some && t != 0 {
                    return Err(DecodeError::Invalid("target without its flag"));
                }
                ToDaemon::SetMacroflow {
                    seq,
                    flow,
                    target: some.then_some(t),
                }
            }
            0x0d => ToDaemon::SetWeight {
                flow: r.u64()?,
                weight: r.u32()?,
            },
            0x0e => ToDaemon::Stat { seq: r.u32()? },
            0x0f => ToDaemon::QueryHost {
                seq: r.u32()?,
                dst: r.ip()?,
            },
            0x10 => ToDaemon::Ping { seq: r.u32()? },
            0x11 => ToDaemon::Attach { seq: r.u32()? },
            0x12 => ToDaemon::SocketDoorbell { on: r.bool()? },
            t => return Err(DecodeError::UnknownTag(t)),
        };
        match r.remaining() {
            0 => Ok(m),
            n => Err(DecodeError::Trailing(n)),
        }
    }
}

impl Message for ToClient {
    fn encode_body(&self, buf: &mut Vec<u8>) -> u8 {
        let mut w = Writer { buf };
        match self {
            ToClient::Welcome {
                version,
                client,
                uid,
                mtu,
            } => {
                w.u8(*version);
                w.u64(*client);
                w.u32(*uid);
                w.u32(*mtu);
                0x81
            }
            ToClient::Grant { flow, bytes } => {
                w.u64(*flow);
                w.u64(*bytes);
                0x82
            }
            ToClient::RateUpdate { flow, estimate } => {
                w.u64(*flow);
                put_estimate(&mut w, estimate);
                0x83
            }
            ToClient::GrantExpired { flow, bytes } => {
                w.u64(*flow);
                w.u64(*bytes);
                0x84
            }
            ToClient::Opened { seq, flow } => {
                w.u32(*seq);
                w.u64(*flow);
                0x86
            }
            ToClient::Estimate { seq, estimate } => {
                w.u32(*seq);
                put_estimate(&mut w, estimate);
                0x87
            }
            ToClient::Mtu { seq, mtu } => {
                w.u32(*seq);
                w.u32(*mtu);
                0x88
            }
            ToClient::Macroflow { seq, id } => {
                w.u32(*seq);
                w.u64(*id);
                0x89
            }
            ToClient::Error { seq, flow, code } => {
                w.u32(*seq);
                w.u64(*flow);
                w.u16(code.to_u16());
                0x8a
            }
            ToClient::StatMacroflow { seq, stat } => {
                w.u32(*seq);
                w.u64(stat.id);
                w.opt_ip(stat.dst);
                w.u32(stat.uid);
                w.u64(stat.window);
                put_estimate(&mut w, &stat.estimate);
                w.u64(stat.in_flight);
                w.u32(stat.flows);
                0x8b
            }
            ToClient::StatFlow { seq, stat } => {
                w.u32(*seq);
                w.u64(stat.id);
                w.u64(stat.macroflow);
                w.u32(stat.uid);
                w.u32(stat.pid);
                w.sockaddr(stat.dst);
                w.f64(stat.share);
                w.u64(stat.in_flight);
                w.u64(stat.sent);
                w.u64(stat.lost);
                put_estimate(&mut w, &stat.estimate);
                0x8c
            }
            ToClient::StatEnd { seq } => {
                w.u32(*seq);
                0x8d
            }
            ToClient::Pong { seq } => {
                w.u32(*seq);
                0x8e
            }
            ToClient::Attached { seq, ring_bytes } => {
                w.u32(*seq);
                w.u32(*ring_bytes);
                0x8f
            }
        }
    }

    fn decode_body(tag: u8, body: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(body);
        let m = match tag {
            0x81 => ToClient::Welcome {
                version: r.u8()?,
                client: r.u64()?,
                uid: r.u32()?,
                mtu: r.u32()?,
            },
            0x82 => ToClient::Grant {
                flow: r.u64()?,
                bytes: r.u64()?,
            },
            0x83 => ToClient::RateUpdate {
                flow: r.u64()?,
                estimate: get_estimate(&mut r)?,
            },
            0x84 => ToClient::GrantExpired {
                flow: r.u64()?,
                bytes: r.u64()?,
            },
            0x86 => ToClient::Opened {
                seq: r.u32()?,
                flow: r.u64()?,
            },
            0x87 => ToClient::Estimate {
                seq: r.u32()?,
                estimate: get_estimate(&mut r)?,
            },
            0x88 => ToClient::Mtu {
                seq: r.u32()?,
                mtu: r.u32()?,
            },
            0x89 => ToClient::Macroflow {
                seq: r.u32()?,
                id: r.u64()?,
            },
            0x8a => ToClient::Error {
                seq: r.u32()?,
                flow: r.u64()?,
                code: ErrorCode::from_u16(r.u16()?).ok_or(DecodeError::Invalid("error code"))?,
            },
            0x8b => ToClient::StatMacroflow {
                seq: r.u32()?,
                stat: MacroflowStat {
                    id: r.u64()?,
                    dst: r.opt_ip()?,
                    uid: r.u32()?,
                    window: r.u64()?,
                    estimate: get_estimate(&mut r)?,
                    in_flight: r.u64()?,
                    flows: r.u32()?,
                },
            },
            0x8c => ToClient::StatFlow {
                seq: r.u32()?,
                stat: FlowStat {
                    id: r.u64()?,
                    macroflow: r.u64()?,
                    uid: r.u32()?,
                    pid: r.u32()?,
                    dst: r.sockaddr()?,
                    share: r.f64()?,
                    in_flight: r.u64()?,
                    sent: r.u64()?,
                    lost: r.u64()?,
                    estimate: get_estimate(&mut r)?,
                },
            },
            0x8d => ToClient::StatEnd { seq: r.u32()? },
            0x8e => ToClient::Pong { seq: r.u32()? },
            0x8f => ToClient::Attached {
                seq: r.u32()?,
                ring_bytes: r.u32()?,
            },
            t => return Err(DecodeError::UnknownTag(t)),
        };
        match r.remaining() {
            0 => Ok(m),
            n => Err(DecodeError::Trailing(n)),
        }
    }
}
