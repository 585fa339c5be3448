//! The papers' controller: window-based AIMD with slow start, byte counting
//! and rate shaping (sigcomm1999 §4.1; cm-implementation-linux §2, §5).

use crate::controller::binomial::BinomialConfig;
use crate::controller::{
    AckEvent, AgingEvent, CongestionEvent, CongestionKind, Controller, IdleEvent, SentEvent,
};
use crate::time::{Duration, Instant};
use crate::units::{Bytes, Rate};

/// Parameters of [`Aimd`].
#[derive(Clone, Debug, PartialEq)]
pub struct AimdConfig {
    /// Initial window in bytes; `None` uses RFC 6928's
    /// `min(10 MSS, max(2 MSS, 14600))`. The 1999 paper started from one MTU;
    /// the default is RFC 6928 because that is what every competing Linux TCP
    /// flow does today, and a CM ensemble that starts lower than one TCP is
    /// simply slower, not safer (the shaper already spreads the first window).
    pub initial_window: Option<Bytes>,
    /// Upper bound on the window, so counters can never overflow.
    pub max_window: Bytes,
    /// Pacing gain in slow start, as (numerator, denominator): Linux's
    /// `tcp_pacing_ss_ratio` = 200%, so pacing never throttles slow start.
    pub pacing_gain_slow_start: (u64, u64),
    /// Pacing gain in congestion avoidance: Linux's `tcp_pacing_ca_ratio` = 120%.
    pub pacing_gain_avoidance: (u64, u64),
}

impl Default for AimdConfig {
    fn default() -> Self {
        AimdConfig {
            initial_window: None,
            max_window: Bytes(1 << 30),
            pacing_gain_slow_start: (2, 1),
            pacing_gain_avoidance: (6, 5),
        }
    }
}

/// Window-based additive-increase / multiplicative-decrease.
#[derive(Clone, Debug)]
pub struct Aimd {
    cfg: AimdConfig,
    mtu: Bytes,
    cwnd: Bytes,
    ssthresh: Bytes,
    /// RFC 3465 §2.1 byte counter for congestion avoidance.
    bytes_acked: Bytes,
    /// Window reductions for transient loss happen at most once per RTT.
    recovery_until: Option<Instant>,
    /// Bytes handed to the network so far (from [`Controller::on_sent`]).
    sent: u64,
    /// The congestion episode the last reduction started, if its data is
    /// not all resolved yet.
    episode: Option<Episode>,
    /// When the last reduction (for loss, ECN or a timeout) happened: a
    /// loss of data sent before it belongs to it.
    reduced_at: Option<Instant>,
    /// The window when exponential aging started halving it, until feedback
    /// resumes: aging is not a congestion signal (sigcomm1999 §4.4).
    aged_from: Option<Bytes>,
    /// The current growth round (one smoothed RTT), see [`Round`].
    round: Option<Round>,
    /// A window-based binomial law replacing AIMD's congestion-avoidance
    /// step and reduction (iscc eq. 1, eq. 3 in window notation); `None`
    /// is the papers' AIMD in exact integer arithmetic.
    law: Option<BinomialConfig>,
}

/// One smoothed RTT of window growth. Byte counting grows the window by the
/// bytes acknowledged, which bounds growth to one TCP's only while the
/// bytes in flight never exceed the window. A macroflow also carries
/// self-clocked traffic that is charged but not window-limited (the layered
/// audio of sigcomm1999 §3.2.2 and §5.2), and application feedback that
/// arrives several times per RTT: its acknowledged bytes per RTT can exceed
/// the window. So growth is also capped per round: slow start at most
/// doubles the window per RTT (RFC 5681 §3.1), congestion avoidance adds at
/// most one MTU per RTT (RFC 5681 §3.1 eq. (3); sigcomm1999 §4.1: "no more
/// aggressive than a comparable TCP flow").
#[derive(Clone, Copy, Debug)]
struct Round {
    /// When it started.
    start: Instant,
    /// Its length: the smoothed RTT when it started.
    len: Duration,
    /// Slow-start growth still allowed in this round (the window it started
    /// with, before any aging halvings).
    slow_start_room: Bytes,
    /// Whether congestion avoidance already added its MTU in this round.
    increased: bool,
}

/// A window reduction and the data it covers: RFC 6582's `recover` point,
/// kept as a byte count. A loss episode lasts until as many bytes have been
/// resolved by feedback (acknowledged or reported lost) as had been sent
/// when the reduction happened, i.e. until the window of data that was in
/// flight at the congestion signal has left the network. A timeout's lasts
/// until something is acknowledged after it. The CM does not see sequence
/// numbers, so this assumes data is resolved roughly in the order it was
/// sent; when it is not, an episode ends early, which only makes the next
/// timeout halve again as before.
#[derive(Clone, Copy, Debug)]
struct Episode {
    /// `sent` at the reduction.
    recover: u64,
    /// What caused it.
    kind: CongestionKind,
}

/// Used as the "once per RTT" period before any RTT sample (RFC 6298 §2.1).
const NO_RTT_PERIOD: Duration = Duration::from_secs(1);

impl Aimd {
    /// A controller at the initial window, in slow start.
    pub fn new(cfg: AimdConfig, mtu: Bytes) -> Self {
        let mtu = Bytes(mtu.0.max(1));
        let cwnd = Self::initial_window_for(&cfg, mtu);
        Aimd {
            ssthresh: cfg.max_window,
            cfg,
            mtu,
            cwnd,
            bytes_acked: Bytes::ZERO,
            recovery_until: None,
            sent: 0,
            episode: None,
            reduced_at: None,
            aged_from: None,
            round: None,
            law: None,
        }
    }

    /// A window-based binomial controller (iscc eq. 1): this AIMD's slow
    /// start, byte counting, recovery episodes and aging, with the
    /// congestion-avoidance step `α w^-k` MTUs per window of data and the
    /// reduction `β w^l` MTUs (`w` in MTUs, iscc eq. 3).
    pub fn binomial(cfg: AimdConfig, law: BinomialConfig, mtu: Bytes) -> Self {
        let mut a = Self::new(cfg, mtu);
        a.law = Some(law);
        a
    }

    /// The window in MTUs, for the binomial law.
    fn w_mtus(&self, w: Bytes) -> f64 {
        w.0 as f64 / self.mtu.0 as f64
    }

    /// The window after a reduction from `w`: half of it (sigcomm1999
    /// §4.1), or `w - β w^l` MTUs under a binomial law; at least 2 MTU
    /// (RFC 5681 §3.1 eq. (4)).
    fn reduced(&self, w: Bytes) -> Bytes {
        let target = match &self.law {
            None => w.0 / 2,
            Some(l) => {
                let wm = self.w_mtus(w);
                let after = (wm - l.decrease(wm, 1.0)) * self.mtu.0 as f64;
                if after.is_finite() {
                    after.max(0.0) as u64
                } else {
                    0
                }
            }
        };
        Bytes(target.max(2 * self.mtu.0))
    }

    /// The congestion-avoidance step: one MTU, or `α w^-k` MTUs (at least
    /// one byte) under a binomial law.
    fn ca_step(&self) -> Bytes {
        match &self.law {
            None => self.mtu,
            Some(l) => {
                let step = l.increase(self.w_mtus(self.cwnd), 1.0) * self.mtu.0 as f64;
                Bytes((step.min(self.cfg.max_window.0 as f64) as u64).max(1))
            }
        }
    }

    fn initial_window_for(cfg: &AimdConfig, mtu: Bytes) -> Bytes {
        // RFC 6928 §2: IW = min(10*MSS, max(2*MSS, 14600)).
        let rfc6928 = Bytes((10 * mtu.0).min((2 * mtu.0).max(14_600)));
        cfg.initial_window
            .unwrap_or(rfc6928)
            .max(mtu)
            .min(cfg.max_window.max(mtu))
    }

    /// The slow-start threshold.
    pub fn ssthresh(&self) -> Bytes {
        self.ssthresh
    }

    /// The initial window this controller starts from.
    pub fn initial_window(&self) -> Bytes {
        Self::initial_window_for(&self.cfg, self.mtu)
    }

    fn floor(&self) -> Bytes {
        self.mtu
    }

    fn set_cwnd(&mut self, w: Bytes) {
        self.cwnd = w
            .max(self.floor())
            .min(self.cfg.max_window.max(self.floor()));
    }

    /// The current congestion episode. A loss episode ends once the bytes
    /// resolved (sent minus still in flight, `in_flight` taken before this
    /// feedback is applied) reach its recovery point; a timeout's, at the
    /// first acknowledgment after it (see [`Controller::on_ack`]).
    fn episode(&mut self, in_flight: Bytes) -> Option<CongestionKind> {
        let e = self.episode?;
        let resolved = self.sent.saturating_sub(in_flight.0);
        if e.kind != CongestionKind::Persistent && resolved >= e.recover {
            self.episode = None;
            return None;
        }
        Some(e.kind)
    }

    fn start_episode(&mut self, kind: CongestionKind) {
        self.episode = Some(Episode {
            recover: self.sent,
            kind,
        });
    }

    fn halve(&mut self) {
        // sigcomm1999 §4.1: "Upon a loss, the congestion window is halved";
        // RFC 5681 §3.1 eq. (4) floors ssthresh at 2 MSS.
        self.ssthresh = self.reduced(self.cwnd);
        self.bytes_acked = Bytes::ZERO;
    }
}

impl Controller for Aimd {
    fn name(&self) -> &'static str {
        self.law.as_ref().map_or("aimd", |l| l.name())
    }

    fn window(&self) -> Bytes {
        self.cwnd
    }

    fn rate(&self, srtt: Option<Duration>) -> Option<Rate> {
        // sigcomm1999 §4.1: the rate estimate is window / smoothed RTT.
        Rate::per(self.cwnd, srtt?)
    }

    fn pacing_rate(&self, srtt: Option<Duration>) -> Option<Rate> {
        let (n, d) = if self.in_slow_start() {
            self.cfg.pacing_gain_slow_start
        } else {
            self.cfg.pacing_gain_avoidance
        };
        Some(self.rate(srtt)?.scale(n, d))
    }

    fn in_slow_start(&self) -> bool {
        self.cwnd < self.ssthresh
    }

    fn set_mtu(&mut self, mtu: Bytes) {
        self.mtu = Bytes(mtu.0.max(1));
        let w = self.cwnd;
        self.set_cwnd(w);
    }

    fn on_ack(&mut self, ev: &AckEvent) {
        if ev.acked == Bytes::ZERO {
            return;
        }
        // The window the acknowledged data was sent under: aging may have
        // halved it since (sigcomm1999 §4.4), which is no congestion signal.
        let sent_under = self.aged_from.map_or(self.cwnd, |a| a.max(self.cwnd));
        // Feedback closes the open loop: aging's halvings stand.
        self.aged_from = None;
        // A timeout reports everything outstanding as lost, so data
        // acknowledged after it was sent after it: the retransmission got
        // through and the timeout's episode is over.
        if self
            .episode
            .is_some_and(|e| e.kind == CongestionKind::Persistent)
        {
            self.episode = None;
        }
        // Grow only when the window was in use (RFC 7661 §4.1 spirit): an
        // application-limited macroflow must not inflate a window it never tests.
        let in_use = ev.window_limited || ev.in_flight_before.0.saturating_mul(2) >= self.cwnd.0;
        if !in_use {
            return;
        }
        // RFC 6582 §3.2 (and RFC 5681 §3.2): fast recovery does not grow the
        // window. Duplicate ACKs inflate NewReno's cwnd only temporarily and
        // the full ACK deflates it to ssthresh, so data that arrives during
        // recovery (reported by TCP/CM's duplicate and partial ACKs, or by
        // any application's feedback for data sent before the loss) must not
        // count towards the next increase either; else every loss episode
        // would leave the CM about one MTU ahead of NewReno.
        if matches!(
            self.episode(ev.in_flight_before),
            Some(CongestionKind::Transient | CongestionKind::Ecn)
        ) {
            return;
        }
        let round = match (self.round, ev.srtt) {
            (Some(r), _) if ev.now < r.start + r.len => r,
            (_, Some(len)) => Round {
                start: ev.now,
                len,
                slow_start_room: sent_under,
                increased: false,
            },
            // No RTT estimate yet: no round, the in-flight cap below applies.
            (_, None) => Round {
                start: ev.now,
                len: Duration::ZERO,
                slow_start_room: self.cfg.max_window,
                increased: false,
            },
        };
        self.round = Some(round);
        if self.in_slow_start() {
            // Slow start with byte counting (RFC 3465 §2.2, cm-implementation-linux
            // §5 "byte-counting to prevent ACK division"): grow by the bytes
            // acknowledged, at most the bytes that were in flight, and at most
            // the window the round started with, so the window at most
            // doubles per round trip however feedback is batched and whatever
            // else is in flight (see [`Round`]).
            let inc = ev
                .acked
                .min(ev.in_flight_before.max(self.mtu))
                .min(round.slow_start_room);
            if let Some(r) = self.round.as_mut() {
                r.slow_start_room = r.slow_start_room - inc;
            }
            let target = self.cwnd + inc;
            if target <= self.ssthresh {
                self.set_cwnd(target);
                return;
            }
            let excess = target - self.ssthresh;
            self.set_cwnd(self.ssthresh);
            self.bytes_acked += excess;
        } else {
            self.bytes_acked += ev.acked;
        }
        // Congestion avoidance, RFC 3465 §2.1: one MTU per window of bytes
        // acknowledged, and at most one per round trip — never more
        // aggressive than one TCP (sigcomm1999 §4.1).
        if self.bytes_acked >= self.cwnd && !round.increased {
            self.bytes_acked = self.bytes_acked - self.cwnd;
            let w = self.cwnd + self.ca_step();
            self.set_cwnd(w);
            if let Some(r) = self.round.as_mut() {
                r.increased = r.len > Duration::ZERO;
            }
        }
        // Never bank more than one window of credit.
        self.bytes_acked = self.bytes_acked.min(self.cwnd);
    }

    fn on_sent(&mut self, ev: &SentEvent) {
        self.sent = self.sent.saturating_add(ev.bytes.0);
    }

    fn on_congestion(&mut self, ev: &CongestionEvent) {
        // The episode of the last reduction, if the data it covers is not
        // all resolved. `ev.in_flight` is after this report: with its lost
        // bytes added back, what the report resolved before them counts as
        // resolved, so an episode may end early, never late.
        let episode = self.episode(ev.in_flight + ev.lost);
        match ev.kind {
            CongestionKind::Transient | CongestionKind::Ecn => {
                // Halve at most once per window of data (RFC 6582 §3.2: a
                // loss of data sent before the last reduction belongs to
                // it, however late it is detected; ECN alike, RFC 3168
                // §6.1.2) and at most once per RTT. Without the window
                // rule, a loss found more than an srtt after the first
                // (a queue that grew since srtt was measured) halved the
                // window again where NewReno does not.
                let in_episode = matches!(
                    episode,
                    Some(CongestionKind::Transient | CongestionKind::Ecn)
                );
                // The same rule by send time, where the transport says when
                // the lost data left (RFC 6582 §3.2's recover point; RFC
                // 8985 §6.1 orders by send time): data sent before the last
                // reduction belongs to it, however late its loss is found.
                // The byte count cannot tell: a loss is found only when
                // later data arrives (RFC 5681 §3.2), and the report that
                // finds a loss at the end of the window also resolves data
                // sent after the reduction, which ends the episode early.
                // Without this rule a paced flow beside Linux Reno at a
                // DropTail queue halved twice, 1-2 RTTs apart, for one
                // congestion event (docs/apps.md, `real-layered`).
                let sent_before = ev
                    .lost_sent
                    .zip(self.reduced_at)
                    .is_some_and(|(sent, reduced)| sent <= reduced);
                if in_episode || sent_before || self.recovery_until.is_some_and(|t| ev.now < t) {
                    return;
                }
                self.reduced_at = Some(ev.now);
                self.halve();
                let s = self.ssthresh;
                self.set_cwnd(s);
                self.recovery_until = Some(ev.now + ev.srtt.unwrap_or(NO_RTT_PERIOD));
                self.start_episode(ev.kind);
                self.aged_from = None;
            }
            CongestionKind::Persistent => {
                // sigcomm1999 §4.1: on persistent congestion the rate drops to
                // a small value forcing slow start; RFC 5681 §3.1: LW = 1 MSS.
                if episode.is_none() {
                    // ssthresh from the window before exponential aging cut
                    // it: the halvings of a silent period are not congestion
                    // signals (sigcomm1999 §4.4), and an RTO that ends one
                    // must not compound them (TCP's ssthresh after an RTO
                    // comes from the FlightSize at the RTO, RFC 5681 §3.1
                    // eq. (4), not from a window shrunk while waiting).
                    let base = self.aged_from.map_or(self.cwnd, |a| a.max(self.cwnd));
                    self.ssthresh = self.reduced(base);
                }
                // Else the loss belongs to a reduction still in progress: a
                // timeout ending a failed fast recovery, or a repeated timeout
                // of the same data. ssthresh is held (RFC 5681 §3.1: "held
                // constant" on repeated RTOs; RFC 6582: one reduction per
                // window of data), as NewReno's FlightSize-based ssthresh
                // after a failed recovery is not halved a second time.
                self.bytes_acked = Bytes::ZERO;
                let f = self.floor();
                self.set_cwnd(f);
                self.reduced_at = Some(ev.now);
                self.recovery_until = Some(ev.now + ev.srtt.unwrap_or(NO_RTT_PERIOD));
                self.start_episode(ev.kind);
                self.aged_from = None;
            }
        }
    }

    fn on_feedback_timeout(&mut self, _ev: &AgingEvent) {
        // sigcomm1999 §4.4: halve the open-loop rate each half-life. Lack of
        // feedback is not proof of congestion, so remember the window before aging
        // (RFC 2861 §3: ssthresh = max(ssthresh, 3/4 cwnd)).
        self.aged_from.get_or_insert(self.cwnd);
        self.ssthresh = self.ssthresh.max(Bytes(self.cwnd.0 / 4 * 3));
        let w = Bytes(self.cwnd.0 / 2);
        self.set_cwnd(w);
        self.bytes_acked = Bytes::ZERO;
    }

    fn on_idle_restart(&mut self, ev: &IdleEvent) {
        // RFC 2861 §3 (congestion window validation): halve the window for
        // every RTO the macroflow was idle, never below the initial window.
        if ev.rto.is_zero() || ev.idle < ev.rto {
            return;
        }
        let periods = (ev.idle.as_micros() / ev.rto.as_micros()).min(63);
        let restart = self.initial_window().min(self.cwnd);
        self.ssthresh = self.ssthresh.max(Bytes(self.cwnd.0 / 4 * 3));
        let w = Bytes(self.cwnd.0 >> periods).max(restart);
        self.set_cwnd(w);
        self.bytes_acked = Bytes::ZERO;
    }

    fn resume(&mut self, window: Bytes, _srtt: Option<Duration>) {
        // The window another CM reached on this path, as after a loss
        // episode: ssthresh at the window, so growth is linear from there
        // (RFC 5681 §3.1); nothing of this CM's own history applies.
        self.set_cwnd(window);
        self.ssthresh = self.cwnd;
        self.bytes_acked = Bytes::ZERO;
        self.recovery_until = None;
        self.episode = None;
        self.reduced_at = None;
        self.aged_from = None;
        self.round = None;
    }
}

#[cfg(test)]
mod tests;
