//! The TCP sender: handshake, loss recovery, flow control, and either
//! NewReno's window or the CM's grants (one implementation, two modes).
//!
//! This module holds the sender's state and what it sends; the rest lives
//! beside it:
//! - [`ack`]: ACK processing, the handshake and NewReno fast recovery
//!   (RFC 5681, RFC 6582);
//! - [`sack`]: SACK loss recovery (RFC 6675 scoreboard, pipe, NextSeg);
//! - [`timeout`]: the retransmission timer (RFC 6298) and go-back-N;
//! - [`cm`]: the TCP/CM interaction (grants, requests, the CM's counters).

mod ack;
mod cm;
mod sack;
mod timeout;

use std::collections::VecDeque;

use cm_core::{Duration, Instant};
use thiserror::Error;

use super::cm_account::CmAccount;
use super::config::{CcMode, TcpConfig, TcpConfigError};
use super::ledger::Ledger;
use super::newreno::{LossState, NewRenoCc};
use super::rtt::RttEstimator;
use super::scoreboard::Scoreboard;
use crate::segment::{Flags, TcpSegment};

/// Sequence number of the first data byte (the SYN occupies 0).
const DATA_START: u64 = 1;
/// The "unlimited" end of data for `total: None`.
const UNLIMITED: u64 = 1 << 62;
/// Window the sender advertises (it receives no data).
const SENDER_WND: u32 = 65_535;

/// Counters and state for traces.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TcpStats {
    /// Data bytes cumulatively acknowledged.
    pub bytes_acked: u64,
    /// Segments sent (SYN, data, FIN, retransmissions).
    pub segments_sent: u64,
    /// Data segments retransmitted (fast, partial-ACK and timeout).
    pub retransmits: u64,
    /// Retransmission timeouts (including SYN timeouts).
    pub timeouts: u64,
    /// Fast retransmits (entries into fast recovery).
    pub fast_retransmits: u64,
    /// Partial ACKs during recovery (RFC 6582).
    pub partial_acks: u64,
    /// Duplicate ACKs received.
    pub dupacks: u64,
    /// Valid RTT samples taken.
    pub rtt_samples: u64,
    /// Congestion window, bytes (NewReno mode only).
    pub cwnd: Option<u64>,
    /// Slow-start threshold, bytes (NewReno mode only).
    pub ssthresh: Option<u64>,
    /// Smoothed RTT.
    pub srtt: Option<Duration>,
    /// Current (backed-off) RTO.
    pub rto: Duration,
}

/// `write` after the FIN was sent.
#[derive(Clone, Copy, Debug, Error, PartialEq, Eq)]
#[error("the connection already sent its FIN")]
pub struct WriteError;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// The SYN must be (re)sent.
    SynToSend,
    SynSent,
    Established,
}

/// A hole queued for retransmission.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Hole {
    /// Its first byte.
    seq: u64,
    /// It is the fast retransmission: sending it restarts the timer
    /// ([`TcpConfig::rto_restart_on_fast_retransmit`]); a partial ACK's
    /// hole does not.
    restarts_timer: bool,
}

/// A TCP sender, sans-IO. Call [`TcpSender::poll_transmit`] after creation
/// and after every input until it returns `None`; in [`CcMode::Cm`] also
/// drain [`TcpSender::poll_cm`].
#[derive(Clone, Debug)]
pub struct TcpSender {
    cfg: TcpConfig,
    mss: u64,
    phase: Phase,
    syn_sent_at: Instant,
    syn_retransmitted: bool,
    snd_una: u64,
    snd_nxt: u64,
    snd_max: u64,
    data_end: u64,
    fin_sent: bool,
    fin_acked: bool,
    rwnd: u64,
    ts_recent: u64,
    rtt: RttEstimator,
    rto_at: Option<Instant>,
    dupacks: u32,
    in_recovery: bool,
    /// Whether a partial ACK already restarted the retransmission timer in
    /// this recovery (RFC 6582 §3.2 step 5: only the first one does).
    partial_restarted: bool,
    /// RFC 6582 `recover`, stored as one past the highest byte sent.
    recover: u64,
    /// A hole to retransmit (fast retransmit or partial ACK).
    rexmit: Option<Hole>,
    ledger: Ledger,
    /// SACK negotiated (RFC 2018 §2): the SYN asked for it and the SYN-ACK
    /// agreed.
    sack: bool,
    /// RFC 6675 scoreboard (SACK only).
    sb: Scoreboard,
    /// RFC 6675 HighRxt, stored one past the highest retransmitted byte.
    high_rxt: u64,
    /// RFC 6675 RescueRxt (rule 4 of NextSeg), one past; `None` = undefined.
    rescue_rxt: Option<u64>,
    /// SACK: loss recovery after a timeout (RFC 6675 §5.1). Every un-SACKed
    /// byte below `recover` counts as lost and is retransmitted once, in
    /// order, as the (slow-starting) window allows; SACKed bytes are not.
    rto_recovery: bool,
    /// A timeout happened and `recover` (HighData then) is not yet
    /// cumulatively acknowledged: ACKs may still be for transmissions made
    /// before the timeout (NewReno's cwnd does not grow on those).
    after_rto: bool,
    /// TCP/CM with SACK: the SACKed ranges already reported to the CM.
    cm_sacked: Scoreboard,
    /// TCP/CM with SACK: bytes below this were reported lost to the CM.
    cm_lost_to: u64,
    cc: Option<NewRenoCc>,
    cm: Option<CmAccount>,
    /// TCP/CM: segments of a multi-MTU grant after the first, not yet
    /// handed out by `poll_transmit`.
    burst: VecDeque<TcpSegment>,
    stats: TcpStats,
}

impl TcpSender {
    /// A sender that will open the connection with a SYN.
    pub fn new(cfg: TcpConfig, _now: Instant) -> Result<Self, TcpConfigError> {
        cfg.validate()?;
        let mss = u64::from(cfg.mss);
        let data_end = cfg
            .total
            .map_or(UNLIMITED, |t| DATA_START + t.min(UNLIMITED));
        let (cc, cm) = match cfg.cc {
            CcMode::NewReno => (Some(NewRenoCc::from_config(&cfg)), None),
            CcMode::Cm => (None, Some(CmAccount::default())),
        };
        Ok(TcpSender {
            mss,
            phase: Phase::SynToSend,
            syn_sent_at: Instant::ZERO,
            syn_retransmitted: false,
            snd_una: DATA_START,
            snd_nxt: DATA_START,
            snd_max: DATA_START,
            data_end,
            fin_sent: false,
            fin_acked: false,
            rwnd: 0,
            ts_recent: 0,
            rtt: RttEstimator::new(cfg.min_rto, cfg.max_rto, cfg.initial_rto),
            rto_at: None,
            dupacks: 0,
            in_recovery: false,
            partial_restarted: false,
            recover: 0,
            rexmit: None,
            ledger: Ledger::default(),
            sack: false,
            sb: Scoreboard::default(),
            high_rxt: 0,
            rescue_rxt: None,
            rto_recovery: false,
            after_rto: false,
            cm_sacked: Scoreboard::default(),
            cm_lost_to: 0,
            cc,
            cm,
            burst: VecDeque::new(),
            stats: TcpStats::default(),
            cfg,
        })
    }

    /// Add `n` bytes of application data (no-op for unlimited bulk).
    pub fn write(&mut self, n: u64) -> Result<(), WriteError> {
        if self.fin_sent || (self.cfg.send_fin && self.fin_acked) {
            return Err(WriteError);
        }
        if self.data_end < UNLIMITED {
            self.data_end = (self.data_end + n).min(UNLIMITED);
        }
        self.maybe_request();
        Ok(())
    }

    /// Whether every written byte (and the FIN, if configured) is acknowledged.
    pub fn is_complete(&self) -> bool {
        self.phase == Phase::Established
            && self.data_end < UNLIMITED
            && self.snd_una == self.data_end
            && (!self.cfg.send_fin || self.fin_acked)
    }

    /// Whether the handshake completed.
    pub fn is_established(&self) -> bool {
        self.phase == Phase::Established
    }

    /// The congestion window (NewReno mode only).
    pub fn cwnd(&self) -> Option<u64> {
        self.cc.map(|c| c.cwnd)
    }

    /// Data bytes sent and not yet acknowledged.
    pub fn bytes_outstanding(&self) -> u64 {
        self.snd_max - self.snd_una
    }

    /// Whether SACK was negotiated (asked for by [`TcpConfig::sack`] and
    /// agreed to on the SYN-ACK).
    pub fn sack_enabled(&self) -> bool {
        self.sack
    }

    /// Whether fast recovery is in progress.
    pub fn in_recovery(&self) -> bool {
        self.in_recovery
    }

    /// Counters and current state.
    pub fn stats(&self) -> TcpStats {
        TcpStats {
            cwnd: self.cc.map(|c| c.cwnd),
            ssthresh: self.cc.map(|c| c.ssthresh),
            srtt: self.rtt.srtt(),
            rto: self.rtt.rto(),
            ..self.stats
        }
    }

    /// When [`TcpSender::handle_timeout`] must be called.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.rto_at
    }

    fn segment(&self, now: Instant, seq: u64, len: u64, flags: Flags) -> TcpSegment {
        TcpSegment {
            src_port: self.cfg.src_port,
            dst_port: self.cfg.dst_port,
            seq,
            ack: 1,
            flags,
            wnd: SENDER_WND,
            len: u32::try_from(len).unwrap_or(u32::MAX),
            ts_val: now.as_micros(),
            ts_ecr: self.ts_recent,
            sack: crate::segment::SackBlocks::NONE,
        }
    }

    /// FlightSize and the pipe now, for the [`super::SsthreshRule`]. With
    /// SACK the pipe is RFC 6675 SetPipe(); without, FlightSize less one
    /// SMSS per duplicate ACK and one for the missing segment.
    fn loss_state(&self) -> LossState {
        let flight = self.snd_max - self.snd_una;
        let pipe = if self.sack {
            self.pipe(&self.gaps())
        } else if self.dupacks > 0 {
            flight.saturating_sub((u64::from(self.dupacks) + 1) * self.mss)
        } else {
            flight
        };
        LossState { flight, pipe }
    }

    /// RFC 6298 §5.1: start the timer on a send if it is not running.
    fn arm(&mut self, now: Instant) {
        if self.rto_at.is_none() {
            self.rto_at = Some(now + self.rtt.rto());
        }
    }

    /// The next segment to send: the SYN, retransmissions and (NewReno
    /// mode) new data as cwnd and rwnd allow, or the FIN. In TCP/CM mode data
    /// only goes out through [`TcpSender::on_grant`].
    pub fn poll_transmit(&mut self, now: Instant) -> Option<TcpSegment> {
        match self.phase {
            Phase::SynToSend => {
                self.phase = Phase::SynSent;
                self.syn_sent_at = now;
                self.stats.segments_sent += 1;
                self.arm(now);
                // RFC 2018 §2: SACK-permitted on the SYN.
                let flags = if self.cfg.sack {
                    Flags::SYN | Flags::SACK_OK
                } else {
                    Flags::SYN
                };
                return Some(self.segment(now, 0, 0, flags));
            }
            Phase::SynSent => return None,
            Phase::Established => {}
        }
        if let Some(s) = self.burst.pop_front() {
            return Some(s);
        }
        if let (Some(cwnd), true) = (self.cwnd(), self.sack_recovering()) {
            // RFC 6675 §5 step (4.3): the first retransmission ignores cwnd;
            // then step (C): send per NextSeg while cwnd - pipe >= 1 SMSS.
            if let Some(s) = self.rexmit_segment(now, self.mss) {
                return Some(s);
            }
            // One scoreboard walk for both SetPipe and NextSeg.
            let gaps = self.gaps();
            if cwnd.saturating_sub(self.pipe(&gaps)) >= self.mss {
                if let Some(s) = self.sack_segment(now, self.mss, &gaps) {
                    return Some(s);
                }
            }
        } else if let Some(cwnd) = self.cwnd() {
            // RFC 5681 §3.2 step 3: the fast retransmission ignores cwnd.
            if let Some(s) = self.rexmit_segment(now, self.mss) {
                return Some(s);
            }
            if let Some(s) = self.data_segment(now, self.mss, Some(cwnd)) {
                return Some(s);
            }
        }
        if self.cfg.send_fin
            && !self.fin_sent
            && self.data_end < UNLIMITED
            && self.snd_nxt == self.data_end
            // SACK after a timeout: the FIN again only once the holes are
            // repaired (snd_nxt is not rewound, RFC 6675 §5.1).
            && !self.rto_recovery
        {
            self.fin_sent = true;
            self.stats.segments_sent += 1;
            self.arm(now);
            return Some(self.segment(now, self.data_end, 0, Flags::FIN | Flags::ACK));
        }
        None
    }

    /// The hole at SND.UNA on entering recovery (RFC 5681 §3.2 step 2,
    /// RFC 6675 §5 step 4.3).
    fn fast_retransmission(&self) -> Hole {
        Hole {
            seq: self.snd_una,
            restarts_timer: self.cfg.rto_restart_on_fast_retransmit,
        }
    }

    /// The queued hole retransmission, if any.
    fn rexmit_segment(&mut self, now: Instant, limit: u64) -> Option<TcpSegment> {
        let Hole {
            seq,
            restarts_timer,
        } = self.rexmit.take()?;
        if seq < self.snd_una || seq >= self.snd_max {
            return None;
        }
        // With SACK, stop at the first SACKed byte.
        let end = if self.sack {
            self.sb
                .ranges()
                .map(|(s, _)| s)
                .find(|&s| s > seq)
                .unwrap_or(self.snd_max)
        } else {
            self.snd_max
        };
        let len = limit.min(end - seq);
        if self.sack {
            // RFC 6675 §5 step (4.3): HighRxt and RescueRxt = the highest
            // sequence number of the fast retransmission.
            self.high_rxt = self.high_rxt.max(seq + len);
            self.rescue_rxt = Some(seq + len);
        }
        self.ledger.on_send(seq, seq + len, now, true);
        self.stats.retransmits += 1;
        self.stats.segments_sent += 1;
        if restarts_timer {
            self.rto_at = Some(now + self.rtt.rto());
        }
        self.arm(now);
        Some(self.segment(now, seq, len, Flags::ACK))
    }

    /// Go-back-N retransmission below `snd_max`, else new data within the
    /// receiver window, each limited by `cwnd` if given.
    fn data_segment(&mut self, now: Instant, limit: u64, cwnd: Option<u64>) -> Option<TcpSegment> {
        let (len, rexmit) = self.next_len(limit)?;
        if cwnd.is_some_and(|w| self.snd_nxt - self.snd_una + len > w) {
            return None;
        }
        let seq = self.snd_nxt;
        self.snd_nxt += len;
        self.snd_max = self.snd_max.max(self.snd_nxt);
        self.ledger.on_send(seq, seq + len, now, rexmit);
        self.stats.retransmits += u64::from(rexmit);
        self.stats.segments_sent += 1;
        self.arm(now);
        Some(self.segment(now, seq, len, Flags::ACK))
    }

    /// Length of the next data segment and whether it is a retransmission.
    fn next_len(&self, limit: u64) -> Option<(u64, bool)> {
        if self.snd_nxt < self.snd_max {
            return Some((limit.min(self.snd_max - self.snd_nxt), true));
        }
        let len = limit.min(self.data_end - self.snd_nxt);
        // Receiver-window flow control (RFC 793 SND.WND; RFC 5681 §2).
        (len > 0 && self.snd_nxt + len - self.snd_una <= self.rwnd).then_some((len, false))
    }
}
