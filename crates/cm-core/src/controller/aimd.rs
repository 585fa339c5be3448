//! The papers' controller: window-based AIMD with slow start, byte counting
//! and rate shaping (sigcomm1999 §4.1; cm-implementation-linux §2, §5).

use crate::controller::{
    AckEvent, AgingEvent, CongestionEvent, CongestionKind, Controller, IdleEvent,
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
        // Grow only when the window was in use (RFC 7661 §4.1 spirit): an
        // application-limited macroflow must not inflate a window it never tests.
        let in_use = ev.in_flight_before.0.saturating_mul(2) >= self.cwnd.0;
        if !in_use {
            return;
        }
        if self.in_slow_start() {
            // Slow start with byte counting (RFC 3465 §2.2, cm-implementation-linux
            // §5 "byte-counting to prevent ACK division"): grow by the bytes
            // acknowledged, at most the bytes that were in flight, so the window
            // at most doubles per round trip however feedback is batched.
            let inc = ev.acked.min(ev.in_flight_before.max(self.mtu));
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
        // acknowledged — never more aggressive than one TCP (sigcomm1999 §4.1).
        if self.bytes_acked >= self.cwnd {
            self.bytes_acked = self.bytes_acked - self.cwnd;
            let w = self.cwnd + self.mtu;
            self.set_cwnd(w);
            // Never bank more than one window of credit.
            self.bytes_acked = self.bytes_acked.min(self.cwnd);
        }
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
            }
            CongestionKind::Persistent => {
                // sigcomm1999 §4.1: on persistent congestion the rate drops to
                // a small value forcing slow start; RFC 5681 §3.1: LW = 1 MSS.
                self.halve();
                let f = self.floor();
                self.set_cwnd(f);
                self.recovery_until = Some(ev.now + ev.srtt.unwrap_or(NO_RTT_PERIOD));
            }
        }
    }

    fn on_feedback_timeout(&mut self, _ev: &AgingEvent) {
        // sigcomm1999 §4.4: halve the open-loop rate each half-life. Lack of
        // feedback is not proof of congestion, so remember where we were
        // (RFC 2861 §3: ssthresh = max(ssthresh, 3/4 cwnd)).
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
        // ACK division: ten 1-byte acks add ten bytes, not ten MTUs.
        for _ in 0..10 {
            ack(&mut c, t(1), 1);
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
        loss(&mut c, t(20), CongestionKind::Persistent);
        assert_eq!(c.window(), MTU, "floor holds");
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
        for _ in 0..4 {
            let w = c.window().0;
            ack(&mut c, t(0), w);
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
}
