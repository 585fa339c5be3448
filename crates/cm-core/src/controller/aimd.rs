//! The papers' controller: window-based AIMD with slow start, byte counting
//! and rate shaping (sigcomm1999 §4.1; cm-implementation-linux §2, §5).

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
    /// we default to RFC 6928 because that is what every competing Linux TCP
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
    /// The window when exponential aging started halving it, until feedback
    /// resumes: aging is not a congestion signal (sigcomm1999 §4.4).
    aged_from: Option<Bytes>,
    /// The current growth round (one smoothed RTT), see [`Round`].
    round: Option<Round>,
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
            aged_from: None,
            round: None,
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
        self.ssthresh = Bytes((self.cwnd.0 / 2).max(2 * self.mtu.0));
        self.bytes_acked = Bytes::ZERO;
    }
}

impl Controller for Aimd {
    fn name(&self) -> &'static str {
        "aimd"
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
            let w = self.cwnd + self.mtu;
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
        match ev.kind {
            CongestionKind::Transient | CongestionKind::Ecn => {
                // Halve at most once per RTT (RFC 3168 §6.1.2 for ECN; one
                // reduction per window of data for loss, RFC 6582).
                if self.recovery_until.is_some_and(|t| ev.now < t) {
                    return;
                }
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
                let in_flight_before = ev.in_flight + ev.lost;
                if self.episode(in_flight_before).is_none() {
                    // ssthresh from the window before exponential aging cut
                    // it: the halvings of a silent period are not congestion
                    // signals (sigcomm1999 §4.4), and an RTO that ends one
                    // must not compound them (TCP's ssthresh after an RTO
                    // comes from the FlightSize at the RTO, RFC 5681 §3.1
                    // eq. (4), not from a window shrunk while waiting).
                    let base = self.aged_from.map_or(self.cwnd, |a| a.max(self.cwnd));
                    self.ssthresh = Bytes((base.0 / 2).max(2 * self.mtu.0));
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
                self.recovery_until = Some(ev.now + ev.srtt.unwrap_or(NO_RTT_PERIOD));
                self.start_episode(ev.kind);
                self.aged_from = None;
            }
        }
    }

    fn on_feedback_timeout(&mut self, _ev: &AgingEvent) {
        // sigcomm1999 §4.4: halve the open-loop rate each half-life. Lack of
        // feedback is not proof of congestion, so remember where we were
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
}

#[cfg(test)]
mod tests {
    use super::*;

    const MTU: Bytes = Bytes(1000);

    fn t(ms: u64) -> Instant {
        Instant::from_micros(ms * 1000)
    }

    fn aimd() -> Aimd {
        Aimd::new(AimdConfig::default(), MTU)
    }

    fn ack(c: &mut Aimd, now: Instant, acked: u64) {
        let inflight = c.window();
        c.on_ack(&AckEvent::new(
            now,
            Bytes(acked),
            inflight,
            Some(Duration::from_millis(100)),
        ));
    }

    fn loss(c: &mut Aimd, now: Instant, kind: CongestionKind) {
        let ev = CongestionEvent::new(now, kind, MTU, c.window(), Some(Duration::from_millis(100)));
        c.on_congestion(&ev);
    }

    #[test]
    fn initial_window_follows_rfc6928_and_is_configurable() {
        assert_eq!(aimd().window(), Bytes(10_000));
        let big = Aimd::new(AimdConfig::default(), Bytes(1460));
        assert_eq!(big.window(), Bytes(14_600));
        let one = Aimd::new(
            AimdConfig {
                initial_window: Some(MTU),
                ..Default::default()
            },
            MTU,
        );
        assert_eq!(one.window(), MTU, "the 1999 paper's one-MTU start");
    }

    #[test]
    fn slow_start_doubles_per_window_with_byte_counting() {
        // RFC 3465 §2.2: bytes, not ACKs, grow the window.
        let mut c = aimd();
        ack(&mut c, t(0), 10_000);
        assert_eq!(c.window(), Bytes(20_000));
        // ACK division (in the next round trip): ten 1-byte acks add ten
        // bytes, not ten MTUs.
        for _ in 0..10 {
            ack(&mut c, t(100), 1);
        }
        assert_eq!(c.window(), Bytes(20_010));
    }

    #[test]
    fn avoidance_adds_one_mtu_per_window() {
        let mut c = aimd();
        loss(&mut c, t(0), CongestionKind::Transient);
        assert_eq!(c.window(), Bytes(5_000));
        assert!(!c.in_slow_start());
        for _ in 0..4 {
            ack(&mut c, t(1000), 1_000);
        }
        assert_eq!(
            c.window(),
            Bytes(5_000),
            "less than a window acked: no increase"
        );
        ack(&mut c, t(1000), 1_000);
        assert_eq!(c.window(), Bytes(6_000), "one MTU per window: as one TCP");
    }

    #[test]
    fn transient_loss_halves_at_most_once_per_rtt() {
        let mut c = aimd();
        loss(&mut c, t(0), CongestionKind::Transient);
        assert_eq!(c.window(), Bytes(5_000));
        loss(&mut c, t(50), CongestionKind::Ecn);
        assert_eq!(
            c.window(),
            Bytes(5_000),
            "second signal within one RTT ignored"
        );
        loss(&mut c, t(101), CongestionKind::Ecn);
        assert_eq!(c.window(), Bytes(2_500));
    }

    #[test]
    fn persistent_congestion_drops_to_one_mtu_and_slow_starts() {
        let mut c = aimd();
        ack(&mut c, t(0), 10_000);
        loss(&mut c, t(10), CongestionKind::Persistent);
        assert_eq!(c.window(), MTU);
        assert_eq!(c.ssthresh(), Bytes(10_000));
        assert!(c.in_slow_start());
        // A repeated timeout with nothing acknowledged in between: the
        // floor holds and so does ssthresh (RFC 5681 §3.1, "held constant").
        loss(&mut c, t(20), CongestionKind::Persistent);
        assert_eq!(c.window(), MTU, "floor holds");
        assert_eq!(c.ssthresh(), Bytes(10_000));
        // After an acknowledgment, a new timeout halves again.
        ack(&mut c, t(200), 1_000);
        loss(&mut c, t(300), CongestionKind::Persistent);
        assert_eq!(c.ssthresh(), Bytes(2_000));
    }

    #[test]
    fn window_never_below_one_mtu() {
        let mut c = aimd();
        for i in 0..40 {
            loss(&mut c, t(i * 1000), CongestionKind::Transient);
            c.on_feedback_timeout(&AgingEvent::new(t(i * 1000 + 1), 1));
        }
        assert_eq!(c.window(), MTU);
    }

    #[test]
    fn application_limited_macroflow_does_not_grow() {
        let mut c = aimd();
        c.on_ack(&AckEvent::new(t(0), Bytes(1000), Bytes(1000), None));
        assert_eq!(c.window(), Bytes(10_000));
    }

    #[test]
    fn pacing_rate_is_window_over_srtt_with_gain() {
        let mut c = aimd();
        let srtt = Some(Duration::from_millis(100));
        assert_eq!(c.rate(None), None, "no estimate before an RTT sample");
        assert_eq!(c.rate(srtt), Some(Rate::from_bytes_per_sec(100_000)));
        assert_eq!(c.pacing_rate(srtt), Some(Rate::from_bytes_per_sec(200_000)));
        loss(&mut c, t(0), CongestionKind::Transient);
        assert_eq!(c.pacing_rate(srtt), Some(Rate::from_bytes_per_sec(60_000)));
    }

    #[test]
    fn idle_restart_decays_to_initial_window() {
        let mut c = aimd();
        for i in 0..4 {
            let w = c.window().0;
            ack(&mut c, t(i * 100), w);
        }
        assert_eq!(c.window(), Bytes(160_000));
        let rto = Duration::from_secs(1);
        c.on_idle_restart(&IdleEvent::new(t(0), Duration::from_millis(500), rto));
        assert_eq!(c.window(), Bytes(160_000), "shorter than an RTO: untouched");
        c.on_idle_restart(&IdleEvent::new(t(0), Duration::from_secs(2), rto));
        assert_eq!(c.window(), Bytes(40_000));
        c.on_idle_restart(&IdleEvent::new(t(0), Duration::from_secs(600), rto));
        assert_eq!(c.window(), Bytes(10_000));
    }

    fn sent(c: &mut Aimd, now: Instant, bytes: u64) {
        c.on_sent(&SentEvent::new(now, Bytes(bytes), Bytes(bytes)));
    }

    fn ack_in_flight(c: &mut Aimd, now: Instant, acked: u64, in_flight: u64) {
        c.on_ack(&AckEvent::new(
            now,
            Bytes(acked),
            Bytes(in_flight),
            Some(Duration::from_millis(100)),
        ));
    }

    fn loss_in_flight(c: &mut Aimd, now: Instant, kind: CongestionKind, lost: u64, left: u64) {
        let srtt = Some(Duration::from_millis(100));
        c.on_congestion(&CongestionEvent::new(
            now,
            kind,
            Bytes(lost),
            Bytes(left),
            srtt,
        ));
    }

    /// Regression (issue 3, layered-audio): segments reported during fast
    /// recovery (TCP/CM's duplicate ACKs) grew the window in congestion
    /// avoidance, leaving the CM about one MTU ahead of NewReno after every
    /// loss (RFC 6582 §3.2: recovery does not grow cwnd). Growth resumes once
    /// the data in flight at the loss has left the network.
    #[test]
    fn regression_no_window_growth_during_fast_recovery() {
        let mut c = aimd();
        sent(&mut c, t(0), 10_000);
        loss_in_flight(&mut c, t(100), CongestionKind::Transient, 1_000, 9_000);
        assert_eq!(c.window(), Bytes(5_000));
        // Nine duplicate-ACK reports of data sent before the loss.
        for i in 0..9 {
            ack_in_flight(&mut c, t(110 + i), 1_000, 9_000 - 1_000 * i);
        }
        assert_eq!(c.window(), Bytes(5_000), "no growth during recovery");
        // After recovery, one window of acknowledged data adds one MTU.
        sent(&mut c, t(150), 5_000);
        for i in 0..5 {
            sent(&mut c, t(250 + i), 1_000);
            ack_in_flight(&mut c, t(250 + i), 1_000, 5_000);
        }
        assert_eq!(c.window(), Bytes(6_000));
    }

    /// Regression (issue 3, layered-audio q4 control): a timeout ending a
    /// failed fast recovery halved ssthresh a second time (to a quarter of
    /// the window, and to 2 MTU on a repeated timeout), where NewReno's
    /// FlightSize-based ssthresh (RFC 5681 §3.1 eq. (4)) is not halved again
    /// and is "held constant" on repeated timeouts.
    #[test]
    fn regression_timeout_ending_failed_recovery_holds_ssthresh() {
        let mut c = aimd();
        sent(&mut c, t(0), 20_000);
        ack(&mut c, t(0), 10_000);
        assert_eq!(c.window(), Bytes(20_000));
        loss_in_flight(&mut c, t(100), CongestionKind::Transient, 1_000, 9_000);
        assert_eq!((c.window(), c.ssthresh()), (Bytes(10_000), Bytes(10_000)));
        // The retransmission is lost too: RTO with pre-loss data unresolved.
        loss_in_flight(&mut c, t(400), CongestionKind::Persistent, 9_000, 0);
        assert_eq!((c.window(), c.ssthresh()), (MTU, Bytes(10_000)));
        // A repeated timeout of the go-back-N retransmission: held again.
        sent(&mut c, t(400), 1_000);
        loss_in_flight(&mut c, t(1_000), CongestionKind::Persistent, 1_000, 0);
        assert_eq!((c.window(), c.ssthresh()), (MTU, Bytes(10_000)));
        // Once that data is resolved, a new timeout halves as before.
        sent(&mut c, t(1_000), 1_000);
        ack_in_flight(&mut c, t(1_100), 1_000, 1_000);
        sent(&mut c, t(1_100), 2_000);
        loss_in_flight(&mut c, t(2_000), CongestionKind::Persistent, 2_000, 0);
        assert_eq!(c.ssthresh(), Bytes(2_000), "max(2 MTU, 2 MTU / 2)");
    }

    /// Regression (issue 3): exponential aging while a TCP/CM flow waited
    /// for its RTO halved the window every minimum RTT, and the timeout
    /// then set ssthresh to half of that shrunken window. Aging is not a
    /// congestion signal (sigcomm1999 §4.4): the timeout's ssthresh comes
    /// from the window aging started from.
    #[test]
    fn regression_aging_does_not_compound_into_timeout_ssthresh() {
        let mut c = aimd();
        sent(&mut c, t(0), 20_000);
        ack(&mut c, t(0), 10_000);
        assert_eq!(c.window(), Bytes(20_000));
        for step in 1..=3 {
            c.on_feedback_timeout(&AgingEvent::new(t(100 * u64::from(step)), step));
        }
        assert_eq!(c.window(), Bytes(2_500));
        loss_in_flight(&mut c, t(400), CongestionKind::Persistent, 10_000, 0);
        assert_eq!((c.window(), c.ssthresh()), (MTU, Bytes(10_000)));
    }

    /// Regression (issue 3, layered-audio): self-clocked audio is charged to
    /// the macroflow but not limited by its window, and reports several
    /// times per RTT, so byte counting let its feedback grow the window
    /// faster than one TCP: from 1 MTU after a timeout back to 3-4 MTU
    /// within one RTT. Slow start now at most doubles per RTT and congestion
    /// avoidance adds at most one MTU per RTT (RFC 5681 §3.1).
    #[test]
    fn regression_unwindowed_feedback_grows_at_most_like_one_tcp_per_rtt() {
        let mut c = aimd();
        loss_in_flight(&mut c, t(0), CongestionKind::Persistent, 10_000, 0);
        assert_eq!(c.window(), MTU);
        // Four reports within one RTT, each acknowledging 1000 bytes with
        // 3000 bytes (beyond the window) in flight.
        for i in 0..4 {
            ack_in_flight(&mut c, t(10 + 20 * i), 1_000, 3_000);
        }
        assert_eq!(
            c.window(),
            Bytes(2_000),
            "slow start: at most double per RTT"
        );
        // Congestion avoidance: many windows acknowledged in one RTT, one MTU.
        let mut c = aimd();
        loss(&mut c, t(0), CongestionKind::Transient);
        assert_eq!(c.window(), Bytes(5_000));
        for i in 0..20 {
            ack_in_flight(&mut c, t(200 + i), 1_000, 20_000);
        }
        assert_eq!(c.window(), Bytes(6_000), "one MTU per RTT");
        ack_in_flight(&mut c, t(300), 6_000, 20_000);
        assert_eq!(c.window(), Bytes(7_000), "the next RTT adds the next MTU");
    }
}
