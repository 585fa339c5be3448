//! TCP configuration.

use cm_core::Duration;
use thiserror::Error;

/// Who controls congestion for a [`super::TcpSender`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CcMode {
    /// Standard TCP NewReno: the connection's own cwnd and ssthresh
    /// (RFC 5681, RFC 6582). Never yields a `CmCall`.
    #[default]
    NewReno,
    /// TCP/CM: no cwnd at all; data is sent only on CM grants, feedback goes
    /// to the CM (sigcomm1999 §3.2.1; cm-implementation-linux §3.2).
    Cm,
}

/// How NewReno grows cwnd per ACK.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Growth {
    /// Per-ACK increase like ns-2 NewReno: +1 MSS per ACK in slow start,
    /// +MSS*MSS/cwnd in congestion avoidance (RFC 5681 §3.1 eq. 2, 3).
    #[default]
    AckCounting,
    /// Appropriate Byte Counting (RFC 3465) with limit L = 2 MSS.
    ByteCounting,
}

/// What NewReno halves when it detects a loss: the new ssthresh on fast
/// retransmit (and SACK recovery) and on a retransmission timeout is half
/// of this, at least 2 SMSS. TCP/CM ([`CcMode::Cm`]) has no ssthresh of its
/// own (the CM's controller owns the window) and ignores the rule.
///
/// The three rules agree when the window is full and nothing is SACKed;
/// they differ once part of the flight has left the network (SACKed or
/// declared lost) or when the sender does not fill cwnd.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SsthreshRule {
    /// FlightSize = SND.NXT - SND.UNA, data sent and not cumulatively
    /// acknowledged: RFC 5681 §3.1 eq. (4), RFC 6582 §3.2 step 2,
    /// RFC 6675 §5 step (4.2).
    #[default]
    FlightSize,
    /// The pipe: with SACK the RFC 6675 §4 SetPipe() estimate (bytes in
    /// flight, neither SACKed nor deemed lost, retransmissions counted
    /// again); without SACK, FlightSize less one SMSS per duplicate ACK
    /// and the missing segment (what an emulated-SACK scoreboard counts).
    /// ns-3.37's `TcpSocketBase` passes its `BytesInFlight()` (this pipe)
    /// to `TcpNewReno::GetSsThresh`.
    Pipe,
    /// The congestion window, as Linux (`tcp_reno_ssthresh`:
    /// `max(cwnd >> 1, 2)`) and ns-2 (`TcpAgent::slowdown`, `CLOSE_SSTHRESH_HALF`
    /// of cwnd) do.
    Cwnd,
}

impl SsthreshRule {
    /// The rule's name in scenario files: `flightsize`, `pipe` or `cwnd`.
    pub fn name(self) -> &'static str {
        match self {
            SsthreshRule::FlightSize => "flightsize",
            SsthreshRule::Pipe => "pipe",
            SsthreshRule::Cwnd => "cwnd",
        }
    }
}

impl std::fmt::Display for SsthreshRule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A string that names no [`SsthreshRule`].
#[derive(Clone, Debug, Error, PartialEq, Eq)]
#[error("unknown ssthresh rule {0:?} (expected flightsize, pipe or cwnd)")]
pub struct ParseSsthreshRuleError(pub String);

impl std::str::FromStr for SsthreshRule {
    type Err = ParseSsthreshRuleError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "flightsize" => Ok(SsthreshRule::FlightSize),
            "pipe" => Ok(SsthreshRule::Pipe),
            "cwnd" => Ok(SsthreshRule::Cwnd),
            _ => Err(ParseSsthreshRuleError(s.to_owned())),
        }
    }
}

/// What ssthresh a retransmission timeout takes when it fires inside a
/// fast or SACK recovery (or before an earlier timeout's recovery point is
/// acknowledged). Outside recovery a timeout always takes the
/// [`SsthreshRule`]'s half.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RtoInRecovery {
    /// Keep the recovery's ssthresh unless the rule gives less: Linux
    /// (`tcp_enter_loss` recomputes ssthresh only from Open or Disorder)
    /// and RFC 5681 §3.1 (ssthresh is held on a repeated timeout).
    #[default]
    Keep,
    /// Halve the recovery's ssthresh again, as ns-2's Reno and NewReno do
    /// (`TcpAgent::timeout` halves `window()`, which during recovery is the
    /// already halved cwnd). The loss that started the recovery and the
    /// timeout count as two congestion signals.
    Halve,
}

impl RtoInRecovery {
    /// The name in scenario files: `keep` or `halve`.
    pub fn name(self) -> &'static str {
        match self {
            RtoInRecovery::Keep => "keep",
            RtoInRecovery::Halve => "halve",
        }
    }
}

impl std::fmt::Display for RtoInRecovery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A string that names no [`RtoInRecovery`].
#[derive(Clone, Debug, Error, PartialEq, Eq)]
#[error("unknown rto-in-recovery rule {0:?} (expected keep or halve)")]
pub struct ParseRtoInRecoveryError(pub String);

impl std::str::FromStr for RtoInRecovery {
    type Err = ParseRtoInRecoveryError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "keep" => Ok(RtoInRecovery::Keep),
            "halve" => Ok(RtoInRecovery::Halve),
            _ => Err(ParseRtoInRecoveryError(s.to_owned())),
        }
    }
}

/// Parameters of a TCP sender.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TcpConfig {
    /// Local port.
    pub src_port: u16,
    /// Remote port.
    pub dst_port: u16,
    /// Maximum segment size (payload bytes). For TCP/CM use the CM's MTU.
    pub mss: u32,
    /// Application bytes available at start; `None` = unlimited bulk.
    pub total: Option<u64>,
    /// Send a FIN once every written byte is sent (no `write` afterwards).
    pub send_fin: bool,
    /// Congestion control.
    pub cc: CcMode,
    /// Initial window in segments (NewReno). Default 2: RFC 5681 §3.1
    /// allows 2-4 for a 1460-byte MSS; 2 matches common ns-2 setups.
    /// Experiments set it explicitly.
    pub initial_window: u32,
    /// Initial ssthresh in bytes; `None` = arbitrarily high (RFC 5681 §3.1).
    pub initial_ssthresh: Option<u64>,
    /// cwnd growth rule (NewReno).
    pub growth: Growth,
    /// What is halved into ssthresh on a loss (NewReno; TCP/CM ignores it).
    pub ssthresh_rule: SsthreshRule,
    /// The ssthresh of a timeout inside recovery (NewReno; TCP/CM ignores it).
    pub rto_in_recovery: RtoInRecovery,
    /// Restart the retransmission timer when the fast retransmission (the
    /// hole at SND.UNA on entering recovery) is sent, as ns-2
    /// (`reset_rtx_timer` in `dupack_action`) and Linux (the RTO is re-armed
    /// when the head of the queue is retransmitted) do. Default true.
    /// False follows RFC 6298 §5.1 to the letter: a running timer is left
    /// alone, so it may expire one RTO after the last new ACK, before the
    /// retransmission's ACK can return, and a spurious timeout follows the
    /// fast retransmit (docs/referee.md has the runs).
    pub rto_restart_on_fast_retransmit: bool,
    /// Lower bound of the RTO (default 200 ms as in Linux; RFC 6298 §2.4 says 1 s).
    pub min_rto: Duration,
    /// Upper bound of the RTO (RFC 6298 §2.5: at least 60 s).
    pub max_rto: Duration,
    /// RTO before any sample (RFC 6298 §2.1: 1 s).
    pub initial_rto: Duration,
    /// Take RTT samples from echoed timestamps (RFC 7323 §4) instead of
    /// timing segments with Karn's algorithm.
    pub timestamps: bool,
    /// Ask for SACK on the SYN (RFC 2018 §2) and, if the receiver agrees,
    /// recover losses with the RFC 6675 scoreboard: several holes per round
    /// trip, and no retransmission of SACKed data after a timeout (§5.1).
    /// Default false: plain NewReno recovery (RFC 6582).
    pub sack: bool,
    /// TCP/CM: MTUs asked for by each `cm_request` (the k-MTU request). A
    /// grant of several MTUs becomes that many full segments at once, which
    /// a driver can hand to the kernel in one call (UDP GSO). The CM grants
    /// no more than its window and its shaper's credit allow, so the
    /// segments are not a burst beyond what one-MTU grants would send in
    /// the same instant. Default 1: the papers' one-MTU discipline
    /// (sigcomm1999 §3.2.1), which the simulated experiments use.
    ///
    /// With more than one, the sender keeps at most as many MTUs requested
    /// as it could send now (the receiver window and the data left), and
    /// tops the request up after each grant: a k-MTU request the sender
    /// cannot fill would come back as grants it must decline.
    pub grant_mtus: u32,
    /// TCP/CM with `grant_mtus` > 1: the bytes the CM counts per MTU, so
    /// that a grant of `b` bytes uses `ceil(b / grant_unit)` of the MTUs
    /// requested. 0 (the default) means the MSS.
    pub grant_unit: u32,
}

impl Default for TcpConfig {
    fn default() -> Self {
        TcpConfig {
            src_port: 1,
            dst_port: 2,
            mss: 1460,
            total: None,
            send_fin: false,
            cc: CcMode::NewReno,
            initial_window: 2,
            initial_ssthresh: None,
            growth: Growth::AckCounting,
            ssthresh_rule: SsthreshRule::FlightSize,
            rto_in_recovery: RtoInRecovery::Keep,
            rto_restart_on_fast_retransmit: true,
            min_rto: Duration::from_millis(200),
            max_rto: Duration::from_secs(60),
            initial_rto: Duration::from_secs(1),
            timestamps: false,
            sack: false,
            grant_mtus: 1,
            grant_unit: 0,
        }
    }
}

/// Why a TCP configuration is unusable.
#[derive(Clone, Copy, Debug, Error, PartialEq, Eq)]
pub enum TcpConfigError {
    /// MSS of zero.
    #[error("mss must be > 0")]
    ZeroMss,
    /// Initial window of zero segments.
    #[error("initial window must be >= 1 segment")]
    ZeroInitialWindow,
    /// RTO bounds that are zero or inverted.
    #[error("need 0 < min_rto <= max_rto and initial_rto > 0")]
    BadRto,
    /// A receive window of zero.
    #[error("receive window must be > 0")]
    ZeroWindow,
    /// A k-MTU request of zero MTUs.
    #[error("grant_mtus must be >= 1")]
    ZeroGrantMtus,
}

impl TcpConfig {
    /// Check the configuration.
    pub fn validate(&self) -> Result<(), TcpConfigError> {
        if self.mss == 0 {
            return Err(TcpConfigError::ZeroMss);
        }
        if self.initial_window == 0 {
            return Err(TcpConfigError::ZeroInitialWindow);
        }
        if self.min_rto.is_zero() || self.min_rto > self.max_rto || self.initial_rto.is_zero() {
            return Err(TcpConfigError::BadRto);
        }
        if self.grant_mtus == 0 {
            return Err(TcpConfigError::ZeroGrantMtus);
        }
        Ok(())
    }
}

/// Parameters of a TCP receiver.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TcpReceiverConfig {
    /// Local port.
    pub src_port: u16,
    /// Remote port.
    pub dst_port: u16,
    /// Advertised window, bytes (the application reads at once, so the
    /// window stays at this value).
    pub rcv_wnd: u32,
    /// Delayed ACKs (RFC 5681 §4.2): ACK every second in-order segment or
    /// after this long; `None` ACKs every segment.
    pub delayed_ack: Option<Duration>,
}

impl Default for TcpReceiverConfig {
    fn default() -> Self {
        TcpReceiverConfig {
            src_port: 2,
            dst_port: 1,
            rcv_wnd: 64 * 1024,
            delayed_ack: None,
        }
    }
}
