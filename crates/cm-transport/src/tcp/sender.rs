//! The TCP sender: handshake, loss recovery, flow control, and either
//! NewReno's window or the CM's grants (one implementation, two modes).

use cm_core::{Bytes, Duration, Instant};
use thiserror::Error;

use super::cm_account::CmAccount;
use super::config::{CcMode, TcpConfig, TcpConfigError};
use super::ledger::Ledger;
use super::newreno::NewRenoCc;
use super::rtt::RttEstimator;
use super::scoreboard::{Gap, Scoreboard};
use crate::CmCall;
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
    rexmit: Option<u64>,
    ledger: Ledger,
    /// SACK negotiated (RFC 2018 §2): we asked on the SYN and the SYN-ACK
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
    /// TCP/CM with SACK: the SACKed ranges already reported to the CM.
    cm_sacked: Scoreboard,
    /// TCP/CM with SACK: bytes below this were reported lost to the CM.
    cm_lost_to: u64,
    cc: Option<NewRenoCc>,
    cm: Option<CmAccount>,
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
            CcMode::NewReno => (
                Some(NewRenoCc::new(
                    mss,
                    u64::from(cfg.initial_window),
                    cfg.initial_ssthresh,
                    cfg.growth,
                )),
                None,
            ),
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
            cm_sacked: Scoreboard::default(),
            cm_lost_to: 0,
            cc,
            cm,
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

    /// TCP/CM: bytes notified to the CM and bytes reported to it so far
    /// (equal once the transfer is complete).
    pub fn cm_bytes(&self) -> Option<(Bytes, Bytes)> {
        self.cm
            .as_ref()
            .map(|c| (Bytes(c.notified_total()), Bytes(c.reported_total())))
    }

    /// When [`TcpSender::handle_timeout`] must be called.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.rto_at
    }

    /// The next call to forward to the CM for this flow (TCP/CM only;
    /// NewReno mode never yields one).
    pub fn poll_cm(&mut self) -> Option<CmCall> {
        self.cm.as_mut().and_then(CmAccount::poll)
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

    /// TCP/CM `cmapp_send` (cm-implementation-linux §3.2): the CM granted
    /// `bytes`. Sends a pending retransmission first, else up to one MSS of
    /// data the receiver window allows, else nothing. With SACK, in loss
    /// recovery the segment is RFC 6675's NextSeg (lost holes first, then
    /// new data, then rules 3 and 4); the CM's window plays cwnd - pipe. Queues the matching
    /// [`CmCall::Notify`] (0 declines) and, if more is ready, the next
    /// [`CmCall::Request`] on [`TcpSender::poll_cm`]: the driver must not
    /// call `notify` itself. NewReno mode ignores grants.
    pub fn on_grant(&mut self, now: Instant, bytes: Bytes) -> Option<TcpSegment> {
        self.cm.as_mut()?.request_outstanding = false;
        let limit = bytes.get().min(self.mss);
        let seg = if self.phase == Phase::Established && limit > 0 {
            if self.sack_recovering() {
                self.rexmit_segment(now, limit).or_else(|| {
                    let gaps = self.gaps();
                    self.sack_segment(now, limit, &gaps)
                })
            } else {
                self.rexmit_segment(now, limit)
                    .or_else(|| self.data_segment(now, limit, None))
            }
        } else {
            None
        };
        if let Some(cm) = self.cm.as_mut() {
            cm.notify(seg.map_or(0, |s| u64::from(s.len)));
        }
        self.maybe_request();
        seg
    }

    /// The queued hole retransmission, if any.
    fn rexmit_segment(&mut self, now: Instant, limit: u64) -> Option<TcpSegment> {
        let seq = self.rexmit.take()?;
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

    /// Whether the RFC 6675 machinery picks what to send: SACK is on and
    /// a fast recovery or a post-timeout recovery is in progress.
    fn sack_recovering(&self) -> bool {
        self.sack && (self.in_recovery || self.rto_recovery)
    }

    /// The un-SACKed gaps in `[snd_una, snd_max)`, split at `recover`
    /// after a timeout (everything below it is lost, RFC 6675 §5.1).
    fn gaps(&self) -> Vec<Gap> {
        let mut gaps = self.sb.gaps(self.snd_una, self.snd_max, self.mss);
        if self.rto_recovery {
            if let Some(i) = gaps
                .iter()
                .position(|g| g.start < self.recover && g.end > self.recover)
            {
                let upper = Gap {
                    start: self.recover,
                    ..gaps[i]
                };
                gaps[i].end = self.recover;
                gaps.insert(i + 1, upper);
            }
        }
        gaps
    }

    /// RFC 6675 §4 IsLost for a gap; after a timeout also everything below
    /// `recover` (§5.1).
    fn gap_lost(&self, g: &Gap) -> bool {
        (self.rto_recovery && g.start < self.recover) || g.is_lost(self.mss)
    }

    /// RFC 6675 §4 SetPipe(): per un-SACKed byte in flight, one if it is
    /// not lost, plus one if it was retransmitted (is below HighRxt).
    fn pipe(&self, gaps: &[Gap]) -> u64 {
        let high_rxt = self.high_rxt.max(self.snd_una);
        gaps.iter()
            .map(|g| {
                let not_lost = if self.gap_lost(g) { 0 } else { g.end - g.start };
                let rexmitted = high_rxt.min(g.end).saturating_sub(g.start);
                not_lost + rexmitted
            })
            .sum()
    }

    /// RFC 6675 §4 NextSeg(), for up to `limit` bytes: `(seq, len, kind)`.
    fn next_seg(&self, limit: u64, gaps: &[Gap]) -> Option<(u64, u64, NextSeg)> {
        let high_rxt = self.high_rxt.max(self.snd_una);
        let high_sacked = self.sb.high_sacked().unwrap_or(0);
        // (1) the smallest un-SACKed S2 > HighRxt below the highest SACKed
        // byte with IsLost(S2); after a timeout every hole below `recover`.
        for g in gaps.iter().filter(|g| g.end > high_rxt) {
            let s2 = g.start.max(high_rxt);
            let below = s2 < high_sacked || (self.rto_recovery && s2 < self.recover);
            if below && self.gap_lost(g) {
                return Some((s2, limit.min(g.end - s2), NextSeg::Lost));
            }
        }
        // (2) new data the receiver window allows.
        if let Some((len, false)) = self.next_len(limit) {
            return Some((self.snd_nxt, len, NextSeg::New));
        }
        if !self.in_recovery {
            return None;
        }
        // (3) the smallest un-SACKed S3 > HighRxt below the highest SACKed
        // byte, lost or not.
        for g in gaps.iter().filter(|g| g.end > high_rxt) {
            let s3 = g.start.max(high_rxt);
            if s3 < high_sacked {
                return Some((s3, limit.min(g.end - s3), NextSeg::Rexmit));
            }
        }
        // (4) one rescue retransmission per recovery, of the highest
        // outstanding un-SACKed byte, once HighACK passed RescueRxt.
        if self.rescue_rxt.is_none_or(|r| self.snd_una >= r) {
            if let Some(g) = gaps.last() {
                let start = g.end.saturating_sub(limit).max(g.start);
                return Some((start, g.end - start, NextSeg::Rescue));
            }
        }
        None
    }

    /// Send what NextSeg picks (SACK recovery).
    fn sack_segment(&mut self, now: Instant, limit: u64, gaps: &[Gap]) -> Option<TcpSegment> {
        let (seq, len, kind) = self.next_seg(limit, gaps)?;
        match kind {
            NextSeg::New => return self.data_segment(now, limit, None),
            // Rules (1) and (3) advance HighRxt.
            NextSeg::Lost | NextSeg::Rexmit => self.high_rxt = self.high_rxt.max(seq + len),
            // Rule (4): RescueRxt = RecoveryPoint, HighRxt unchanged.
            NextSeg::Rescue => self.rescue_rxt = Some(self.recover),
        }
        self.ledger.on_send(seq, seq + len, now, true);
        self.stats.retransmits += 1;
        self.stats.segments_sent += 1;
        self.arm(now);
        Some(self.segment(now, seq, len, Flags::ACK))
    }

    /// TCP/CM request discipline: exactly one request outstanding while
    /// there is a retransmission or window-permitted data to send
    /// (sigcomm1999 §3.2.1).
    fn maybe_request(&mut self) {
        if self.phase != Phase::Established {
            return;
        }
        if self.cm.is_none() {
            return;
        }
        let rexmit = self
            .rexmit
            .is_some_and(|s| s >= self.snd_una && s < self.snd_max);
        let ready = rexmit
            || if self.sack_recovering() {
                self.next_seg(self.mss, &self.gaps()).is_some()
            } else {
                self.next_len(self.mss).is_some()
            };
        if let (true, Some(cm)) = (ready, self.cm.as_mut()) {
            cm.request();
        }
    }

    /// Process an ACK from the receiver.
    pub fn handle_segment(&mut self, now: Instant, seg: &TcpSegment) {
        if !seg.flags.contains(Flags::ACK) {
            return;
        }
        match self.phase {
            Phase::SynSent | Phase::SynToSend => {
                if seg.flags.contains(Flags::SYN) && seg.ack == DATA_START {
                    self.establish(now, seg);
                }
                return;
            }
            Phase::Established if seg.flags.contains(Flags::SYN) => return,
            Phase::Established => {}
        }
        self.ts_recent = seg.ts_val;
        let old_rwnd = self.rwnd;
        self.rwnd = u64::from(seg.wnd);
        if self.fin_sent && seg.ack > self.data_end {
            self.fin_acked = true;
        }
        let ack = seg.ack.min(self.snd_max);
        if self.sack {
            self.on_sack_ack(now, ack, seg, old_rwnd);
        } else if ack > self.snd_una {
            self.on_new_ack(now, ack, seg);
        } else if ack == self.snd_una
            && seg.len == 0
            && self.snd_max > self.snd_una
            && self.rwnd == old_rwnd
        {
            // RFC 5681 §2 "duplicate acknowledgment".
            self.on_dupack();
        }
        if self.snd_una == self.snd_max && (!self.fin_sent || self.fin_acked) {
            self.rto_at = None;
        }
        self.maybe_request();
    }

    fn establish(&mut self, now: Instant, seg: &TcpSegment) {
        self.phase = Phase::Established;
        self.rwnd = u64::from(seg.wnd);
        self.ts_recent = seg.ts_val;
        self.rto_at = None;
        // The handshake seeds the RTT estimate unless the SYN was
        // retransmitted (Karn).
        let sample = (!self.syn_retransmitted)
            .then(|| now - self.syn_sent_at)
            .filter(|d| !d.is_zero());
        if let Some(s) = sample {
            self.rtt.on_sample(s);
            self.stats.rtt_samples += 1;
        }
        // RFC 2018 §2: SACK only if both ends permit it.
        self.sack = self.cfg.sack && seg.flags.contains(Flags::SACK_OK);
        if let Some(cc) = self.cc.as_mut() {
            if self.syn_retransmitted {
                cc.set_window(1); // RFC 5681 §3.1: IW = 1 MSS after a lost SYN
            }
        }
        if let (Some(cm), Some(s)) = (self.cm.as_mut(), sample) {
            cm.rtt_only(s);
        }
        self.maybe_request();
    }

    fn on_new_ack(&mut self, now: Instant, ack: u64, seg: &TcpSegment) {
        let acked = ack - self.snd_una;
        let resolved = self.ledger.on_ack(now, ack);
        let sample = if self.cfg.timestamps {
            // RFC 7323 §4.1: RTTM from the echoed timestamp.
            (seg.ts_ecr > 0)
                .then(|| now - Instant::from_micros(seg.ts_ecr))
                .filter(|d| !d.is_zero())
        } else {
            resolved.sample
        };
        if let Some(s) = sample {
            self.rtt.on_sample(s);
            self.stats.rtt_samples += 1;
        }
        self.snd_una = ack;
        self.snd_nxt = self.snd_nxt.max(ack);
        self.stats.bytes_acked += acked;
        if self.rexmit.is_some_and(|s| s < ack) {
            self.rexmit = None;
        }
        let flight = self.snd_max - self.snd_una;
        let mut restart_timer = true;
        if self.sack {
            self.sb.advance(ack);
            if self.rto_recovery && ack >= self.recover {
                self.rto_recovery = false;
            }
        }
        if self.sack && self.in_recovery {
            if ack >= self.recover {
                // RFC 6675 §5 (A): a cumulative ACK covering RecoveryPoint
                // ends loss recovery; cwnd is already ssthresh.
                self.in_recovery = false;
                self.dupacks = 0;
            } else {
                // RFC 6675 §5 (B): the scoreboard and pipe do the work; no
                // NewReno hole or deflation. The timer restarts on every
                // ACK of new data (RFC 6298 §5.3; RFC 6675 §6).
                self.stats.partial_acks += 1;
            }
        } else if self.in_recovery {
            if ack >= self.recover {
                // RFC 6582 §3.2 step 3: full acknowledgment, leave recovery.
                self.in_recovery = false;
                self.dupacks = 0;
                if let Some(cc) = self.cc.as_mut() {
                    cc.on_full_ack(flight);
                }
            } else {
                // RFC 6582 §3.2 step 5: partial acknowledgment, retransmit
                // the next hole.
                self.stats.partial_acks += 1;
                self.rexmit = Some(self.snd_una);
                // "If this is the first partial ACK during fast recovery,
                // also reset the retransmit timer" (RFC 6582 §3.2 step 5,
                // the Impatient variant of §4): with many losses in one
                // window, a timeout then repairs them by going back N
                // instead of one hole per round trip.
                restart_timer = !self.partial_restarted;
                self.partial_restarted = true;
                if let Some(cc) = self.cc.as_mut() {
                    cc.on_partial_ack(acked);
                }
            }
        } else {
            self.dupacks = 0;
            if let Some(cc) = self.cc.as_mut() {
                cc.on_ack(acked);
            }
        }
        // RFC 6298 §5.2-5.3: stop when all is acked, else restart (in
        // recovery, only on the first partial ACK, above).
        let outstanding = flight > 0 || (self.fin_sent && !self.fin_acked);
        if !outstanding {
            self.rto_at = None;
        } else if restart_timer || self.rto_at.is_none() {
            self.rto_at = Some(now + self.rtt.rto());
        }
        if let Some(cm) = self.cm.as_mut() {
            // RFC 3124 §5.1.1: an ACK for new data reports the bytes it
            // acknowledges, with the RTT sample if valid.
            cm.on_cumulative_ack(resolved.covered, flight == 0, sample);
        }
    }

    fn on_dupack(&mut self) {
        self.dupacks += 1;
        self.stats.dupacks += 1;
        if self.in_recovery {
            if let Some(cc) = self.cc.as_mut() {
                cc.on_dupack_in_recovery();
            }
            // cm-implementation-linux §3.2: dupacks > 3, a segment left the
            // network.
            if let Some(cm) = self.cm.as_mut() {
                cm.on_later_dupack(self.mss);
            }
        } else if self.dupacks == 3 && self.snd_una >= self.recover {
            // RFC 6582 §3.2 step 2 (only if the ACK covers more than
            // `recover`, so stale dupacks after a timeout do not trigger
            // another reduction); RFC 5681 §3.2 step 2.
            self.in_recovery = true;
            self.partial_restarted = false;
            self.recover = self.snd_max;
            self.stats.fast_retransmits += 1;
            self.rexmit = Some(self.snd_una);
            let flight = self.snd_max - self.snd_una;
            if let Some(cc) = self.cc.as_mut() {
                cc.on_enter_recovery(flight);
            }
            // cm-implementation-linux §3.2: dupacks == 3, a congestion loss.
            let hole = self.mss.min(flight);
            // The three duplicate ACKs each announce one segment that
            // arrived above the hole (RFC 5681 §3.2 step 3).
            let arrived = (3 * self.mss).min(flight - hole);
            if let Some(cm) = self.cm.as_mut() {
                cm.on_third_dupack(hole, arrived);
            }
        }
    }

    /// The retransmission timer may have expired.
    pub fn handle_timeout(&mut self, now: Instant) {
        let Some(at) = self.rto_at else { return };
        if now < at {
            return;
        }
        self.rto_at = None;
        match self.phase {
            Phase::SynSent => {
                self.stats.timeouts += 1;
                self.syn_retransmitted = true;
                self.rtt.back_off();
                self.phase = Phase::SynToSend;
                return;
            }
            Phase::SynToSend => return,
            Phase::Established => {}
        }
        if self.snd_una == self.snd_max && (!self.fin_sent || self.fin_acked) {
            return;
        }
        self.stats.timeouts += 1;
        let flight = self.snd_max - self.snd_una;
        let first = self.rtt.backoff() == 0;
        if let Some(cc) = self.cc.as_mut() {
            cc.on_timeout(flight, first);
        }
        // RFC 6298 §5.5: back off; §5.6: restart the timer.
        self.rtt.back_off();
        // RFC 6582 §3.2 step 1 semantics after a timeout: record the highest
        // sequence sent so stale duplicate ACKs cannot start fast recovery.
        self.recover = self.snd_max;
        self.in_recovery = false;
        self.dupacks = 0;
        self.rexmit = None;
        if self.sack {
            self.sack_timeout();
            self.rto_at = Some(now + self.rtt.rto());
            self.maybe_request();
            return;
        }
        // Go-back-N from the first unacknowledged byte.
        self.snd_nxt = self.snd_una;
        if self.fin_sent && !self.fin_acked {
            self.fin_sent = false;
        }
        self.ledger.clear();
        if let Some(cm) = self.cm.as_mut() {
            cm.on_timeout();
        }
        self.rto_at = Some(now + self.rtt.rto());
        self.maybe_request();
    }
}

/// Which NextSeg rule (RFC 6675 §4) picked a segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum NextSeg {
    /// Rule (1): a lost hole.
    Lost,
    /// Rule (2): new data.
    New,
    /// Rule (3): an un-SACKed hole not yet deemed lost.
    Rexmit,
    /// Rule (4): the rescue retransmission.
    Rescue,
}

impl TcpSender {
    /// An ACK on a SACK connection: RFC 6675 §5 (scoreboard update,
    /// DupAcks, entering loss recovery) around the cumulative-ACK handling.
    fn on_sack_ack(&mut self, now: Instant, ack: u64, seg: &TcpSegment, old_rwnd: u64) {
        // RFC 6675 §4 Update(): record the blocks (above the new cumulative
        // ACK, below what was sent).
        let una = ack.max(self.snd_una);
        let newly_sacked: u64 = seg
            .sack
            .as_slice()
            .iter()
            .map(|&(s, e)| self.sb.insert(una, self.snd_max, s, e))
            .sum();
        let was_recovering = self.sack_recovering();
        if ack > self.snd_una {
            self.on_new_ack(now, ack, seg);
        }
        // RFC 6675 §2 "duplicate acknowledgment": no data, and SACK
        // information that marks new octets between HighACK and HighData
        // (regardless of whether the ACK is also cumulative, §5).
        if newly_sacked > 0 && seg.len == 0 && self.snd_max > self.snd_una {
            self.stats.dupacks += 1;
            if !self.in_recovery && self.rwnd == old_rwnd {
                self.dupacks += 1;
                // RFC 6675 §5 steps (1), (2): DupThresh duplicate ACKs, or
                // IsLost(HighACK + 1). Not before a timeout's RecoveryPoint
                // is acknowledged (§5.1).
                let head_lost = self
                    .gaps()
                    .first()
                    .is_some_and(|g| g.start == self.snd_una && g.is_lost(self.mss));
                if (u64::from(self.dupacks) >= super::scoreboard::DUP_THRESH || head_lost)
                    && self.snd_una >= self.recover
                    && !self.rto_recovery
                {
                    self.enter_sack_recovery();
                    return;
                }
            }
        }
        if was_recovering || self.sack_recovering() {
            self.report_sack_progress();
        }
    }

    /// RFC 6675 §5 step (4): enter loss recovery.
    fn enter_sack_recovery(&mut self) {
        self.in_recovery = true;
        // (4.1) RecoveryPoint = HighData.
        self.recover = self.snd_max;
        self.stats.fast_retransmits += 1;
        let flight = self.snd_max - self.snd_una;
        // (4.2) ssthresh = cwnd = FlightSize / 2.
        if let Some(cc) = self.cc.as_mut() {
            cc.on_enter_sack_recovery(flight);
        }
        // (4.3) retransmit HighACK + 1 (sets HighRxt and RescueRxt when
        // sent); (4.4)-(4.5) happen in `poll_transmit` / `on_grant`.
        self.high_rxt = self.snd_una;
        self.rescue_rxt = None;
        self.rexmit = Some(self.snd_una);
        if self.cm.is_some() {
            // cm-implementation-linux §3.2, "dup acks == 3": one congestion
            // loss per episode. Lost: what IsLost marks (at least the first
            // segment, when DupAcks alone triggered recovery); arrived: the
            // SACKed bytes not yet reported, after the loss as without SACK.
            let (lost_to, lost) = self.lost_below(self.snd_una);
            let (lost_to, lost) = if lost == 0 {
                let first = self
                    .gaps()
                    .first()
                    .map_or(0, |g| (g.end - g.start).min(self.mss));
                (self.snd_una + first, first)
            } else {
                (lost_to, lost)
            };
            self.cm_lost_to = lost_to;
            let sacked = self.unreported_sacked();
            if let Some(cm) = self.cm.as_mut() {
                cm.on_third_dupack(lost, sacked);
            }
        }
    }

    /// Un-SACKed bytes at or above `from` in lost gaps, and the end of the
    /// highest lost gap.
    fn lost_below(&self, from: u64) -> (u64, u64) {
        let mut top = from;
        let mut bytes = 0;
        for g in self.gaps().iter().filter(|g| self.gap_lost(g)) {
            let s = g.start.max(from);
            if g.end > s {
                bytes += g.end - s;
                top = top.max(g.end);
            }
        }
        (top, bytes)
    }

    /// TCP/CM: SACKed bytes not yet reported to the CM; marks them reported.
    fn unreported_sacked(&mut self) -> u64 {
        self.cm_sacked.advance(self.snd_una);
        // `cm_sacked` is always a snapshot of `sb`, which only grows above
        // SND.UNA, so the difference of the totals is the new bytes.
        let n = self
            .sb
            .sacked_bytes()
            .saturating_sub(self.cm_sacked.sacked_bytes());
        self.cm_sacked = self.sb.clone();
        n
    }

    /// TCP/CM during SACK recovery: report bytes newly declared lost and
    /// bytes newly SACKed (they left the network).
    fn report_sack_progress(&mut self) {
        if self.cm.is_none() {
            return;
        }
        // Losses only while recovering: after the recovery point is
        // acknowledged, a new loss is the next episode's congestion signal.
        let (top, lost) = if self.sack_recovering() {
            self.lost_below(self.cm_lost_to.max(self.snd_una))
        } else {
            (self.cm_lost_to, 0)
        };
        self.cm_lost_to = self.cm_lost_to.max(top);
        let sacked = self.unreported_sacked();
        if let Some(cm) = self.cm.as_mut() {
            cm.on_sack_progress(lost, sacked);
        }
    }

    /// RFC 6675 §5.1 on a timeout: keep the scoreboard, retransmit only
    /// un-SACKed data (no go-back-N over SACKed segments), and start no new
    /// recovery until RecoveryPoint (= HighData, set by the caller) is
    /// acknowledged. RFC 2018 §5 would discard the SACK information in case
    /// the receiver reneged; RFC 6675 §5.1 (and RFC 2018 erratum 1610) allow
    /// keeping it, and our receiver never discards out-of-order data.
    fn sack_timeout(&mut self) {
        self.rto_recovery = self.snd_una < self.snd_max;
        self.high_rxt = self.snd_una;
        self.rescue_rxt = None;
        if self.fin_sent && !self.fin_acked {
            self.fin_sent = false;
        }
        self.ledger.clear();
        if let Some(cm) = self.cm.as_mut() {
            cm.on_timeout();
        }
        // Everything notified is now reported (lost), SACKed bytes included.
        self.cm_sacked = self.sb.clone();
        self.cm_lost_to = self.recover;
    }
}
