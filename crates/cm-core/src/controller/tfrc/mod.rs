//! TCP-Friendly Rate Control (RFC 5348), sender side: an equation-based,
//! rate-based controller.
//!
//! The allowed rate X follows the TCP throughput equation
//! ([`equation::throughput`], RFC 5348 §3.1) of the loss event rate p and
//! the round-trip time R, limited to twice the receive rate X_recv
//! (RFC 5348 §4.3). Before the first loss it slow-starts: X doubles once
//! per RTT, limited by 2 X_recv, from the initial rate of RFC 5348 §4.2.
//!
//! RFC 5348 §5 computes p at the receiver from sequence numbers. The CM's
//! sender sees feedback only through the [`Controller`] hooks, as reports
//! of bytes received ([`Controller::on_ack`]) and lost
//! ([`Controller::on_congestion`]), so this controller keeps the
//! sender-side equivalent (RFC 5348 §3.2.1 and §5 allow p to be computed
//! at the sender from the losses it is told about): loss intervals counted in
//! packets of the MTU, losses reported within one RTT of the start of a
//! loss event merged into it (§5.2), and the weighted average of the last
//! 8 intervals (§5.4). See [`TfrcConfig::equation_packet_size`] for the
//! packet size `s` of the equation.
//!
//! X_recv is measured from the reports (see `receive_rate`), so it
//! describes data sent about one RTT earlier, as the receiver's X_recv of
//! RFC 5348 does. When feedback is spread over the round trip, the
//! `2 X_recv` limit therefore lets slow start grow by about 1.5x per RTT
//! rather than 2x (a simulated path: 43.8, 87.6, 109.5, 186, 257, 408,
//! 590 kB/s in successive RTTs); with one report per RTT it doubles.

pub mod equation;
mod history;
mod receive_rate;

use crate::controller::{
    AckEvent, AgingEvent, CongestionEvent, CongestionKind, Controller, IdleEvent,
};
use crate::time::{Duration, Instant};
use crate::units::{Bytes, Rate};

use history::LossHistory;
use receive_rate::ReceiveRate;

/// Parameters of [`Tfrc`].
#[derive(Clone, Debug, PartialEq)]
pub struct TfrcConfig {
    /// `s`, the packet size in the throughput equation (RFC 5348 §3.1);
    /// `None` uses the macroflow's MTU. The equation's rate is proportional
    /// to `s`, so a smaller value makes the controller proportionally less
    /// aggressive at the same loss event rate and RTT while it still sends
    /// MTU-sized packets: the ISCC paper's experiment (iscc §VI-C) runs
    /// TFRC with 180 bytes in the equation and 1,500-byte packets on the
    /// wire (its "TFRC MTU"), to bring TFRC's loss rate into the same range
    /// as the other schemes'. Loss intervals, the initial rate (§4.2) and
    /// the minimum rate `s / t_mbi` (§4.3) count the packets actually sent,
    /// so they use the MTU whatever this is.
    pub equation_packet_size: Option<Bytes>,
    /// `t_mbi`, the maximum back-off interval: the rate never falls below
    /// one MTU per `t_mbi` (RFC 5348 §4.3: 64 seconds).
    pub t_mbi: Duration,
    /// `n`, the number of loss intervals averaged (RFC 5348 §5.4: 8).
    /// Clamped to 1..=1024.
    pub history_len: usize,
    /// An application floor above `s / t_mbi`: the lowest rate the
    /// application can use, e.g. a layered stream's base layer (iscc
    /// §VI-B: b_0 = 14 kbit/s). `None`: RFC 5348's `s / t_mbi` alone.
    pub min_rate: Option<Rate>,
}

impl TfrcConfig {
    /// Why the parameters are unusable, if they are.
    pub fn validate(&self) -> Result<(), String> {
        if self
            .equation_packet_size
            .is_some_and(|s| s.get() == 0 || s.get() > 65_535)
        {
            return Err("the equation's packet size must be 1..=65535 bytes".into());
        }
        if self.t_mbi.is_zero() {
            return Err("t_mbi must be positive (RFC 5348 §4.3)".into());
        }
        if !(1..=1024).contains(&self.history_len) {
            return Err("history_len must be 1..=1024 loss intervals (RFC 5348 §5.4: 8)".into());
        }
        Ok(())
    }
}

impl Default for TfrcConfig {
    fn default() -> Self {
        TfrcConfig {
            equation_packet_size: None,
            t_mbi: Duration::from_secs(64),
            history_len: 8,
            min_rate: None,
        }
    }
}

/// The RTT used before any sample: RFC 6298 §2.1's conservative 1 s (RFC
/// 5348 §4.2 sends one packet per second until the first RTT sample).
const NO_RTT: Duration = Duration::from_secs(1);

/// The window's RTT floor (see [`Controller::window`] on [`Tfrc`]).
const WINDOW_MIN_RTT: Duration = Duration::from_millis(100);

/// The largest rate the controller allows, bytes per second (8 Tbit/s): a
/// bound that keeps every derived quantity finite and in range.
const MAX_RATE: f64 = 1e12;

/// The smallest rate, bytes per second, whatever the MTU and `t_mbi`.
const MIN_RATE: f64 = 1.0;

/// TCP-Friendly Rate Control (RFC 5348), computed at the sender.
///
/// [`Controller::rate`] and [`Controller::pacing_rate`] are the allowed
/// rate X. TFRC is rate-based: between reports it sends open loop at X, so
/// its [`Controller::window`] never limits it in practice, and only bounds
/// what is outstanding when feedback stops:
/// `max(4 MTU, X * max(srtt, 100 ms) * 4)` bytes. Before the first report
/// it has no rate of its own: it allows the initial window of RFC 5348
/// §4.2, paced over the smoothed RTT if there is one, else unpaced. R is
/// the latest smoothed RTT the manager passed in an event, or 1 s before
/// any (RFC 5348 §4.2 is as conservative without an RTT sample).
#[derive(Clone, Debug)]
pub struct Tfrc {
    cfg: TfrcConfig,
    mtu: Bytes,
    /// The latest smoothed RTT the manager reported.
    srtt: Option<Duration>,
    /// X, the allowed rate in bytes per second; `None` before the first
    /// report.
    x: Option<f64>,
    /// `tld`, when slow start last doubled X (RFC 5348 §4.3).
    last_double: Instant,
    /// Loss events and intervals (RFC 5348 §5).
    history: LossHistory,
    /// X_recv (RFC 5348 §4.3).
    recv: ReceiveRate,
    /// Halvings of the initial window by aging before any report.
    pre_report_halvings: u32,
}

impl Tfrc {
    /// A controller in slow start, before any feedback, for packets of
    /// `mtu` bytes.
    pub fn new(cfg: TfrcConfig, mtu: Bytes) -> Self {
        let history = LossHistory::new(cfg.history_len);
        Tfrc {
            cfg,
            mtu: Bytes(mtu.0.max(1)),
            srtt: None,
            x: None,
            last_double: Instant::ZERO,
            history,
            recv: ReceiveRate::default(),
            pre_report_halvings: 0,
        }
    }

    /// The loss event rate p (RFC 5348 §5.4), `None` before the first loss
    /// event.
    pub fn loss_event_rate(&self) -> Option<f64> {
        self.history.loss_event_rate(self.mtu)
    }

    /// X_recv, the rate feedback reported received over the last measured
    /// round trip, `None` before one was measured.
    pub fn x_recv(&self) -> Option<Rate> {
        self.recv.get().map(to_rate)
    }

    /// The packet size `s` of the throughput equation, in bytes.
    pub fn equation_packet_size(&self) -> Bytes {
        Bytes(self.cfg.equation_packet_size.unwrap_or(self.mtu).0.max(1))
    }

    /// The initial window, RFC 5348 §4.2: `min(4 s, max(2 s, 4380))` bytes
    /// with `s` the MTU.
    pub fn initial_window(&self) -> Bytes {
        let s = self.mtu.0;
        Bytes(s.saturating_mul(4).min(s.saturating_mul(2).max(4380)))
    }

    /// R: the latest smoothed RTT, or 1 s before any sample.
    fn rtt(&self) -> Duration {
        self.srtt.filter(|r| !r.is_zero()).unwrap_or(NO_RTT)
    }

    fn note_rtt(&mut self, srtt: Option<Duration>) {
        if let Some(r) = srtt.filter(|r| !r.is_zero()) {
            self.srtt = Some(r);
        }
    }

    /// The initial rate, RFC 5348 §4.2: the initial window per RTT.
    fn initial_rate(&self) -> f64 {
        self.initial_window().0 as f64 / self.rtt().as_secs_f64()
    }

    /// `s / t_mbi` (RFC 5348 §4.3), with `s` the MTU, or the
    /// application's floor if that is higher.
    fn min_rate(&self) -> f64 {
        let t_mbi = self.cfg.t_mbi.as_secs_f64().max(1e-6);
        let app = self.cfg.min_rate.map_or(0.0, |r| r.bytes_per_sec() as f64);
        (self.mtu.0 as f64 / t_mbi)
            .max(app)
            .clamp(MIN_RATE, MAX_RATE)
    }

    /// `recv_limit` = 2 X_recv (RFC 5348 §4.3), unbounded before the first
    /// measurement (§4.2 starts X_recv_set at infinity).
    fn recv_limit(&self) -> f64 {
        self.recv.get().map_or(f64::INFINITY, |x| 2.0 * x)
    }

    /// X in range: not NaN, at least `s / t_mbi`, at most [`MAX_RATE`].
    fn bounded(&self, x: f64) -> f64 {
        let floor = self.min_rate();
        if x.is_nan() {
            floor
        } else {
            x.clamp(floor, MAX_RATE)
        }
    }

    /// The window before the first report: the initial window (RFC 5348
    /// §4.2) in whole MTUs, halved by each aging step, at least one MTU.
    fn pre_report_window(&self) -> Bytes {
        let w = (self.initial_window().0.div_ceil(self.mtu.0)).saturating_mul(self.mtu.0);
        Bytes(w >> self.pre_report_halvings.min(63)).max(self.mtu)
    }

    /// RFC 5348 §4.3 step 4: the allowed rate on a report at `now`.
    fn update_rate(&mut self, now: Instant) {
        let r = self.rtt();
        if let Some(p) = self.history.loss_event_rate(self.mtu) {
            // X = max(min(X_calc, 2 X_recv), s / t_mbi).
            let s = self.equation_packet_size().0 as f64;
            let x_calc = equation::throughput(s, r.as_secs_f64(), p);
            self.x = Some(self.bounded(x_calc.min(self.recv_limit())));
            return;
        }
        let initial = self.initial_rate();
        match self.x {
            // RFC 5348 §4.2: the first feedback sets tld = now and
            // X = W_init / R.
            None => {
                self.x = Some(self.bounded(initial));
                self.last_double = now;
            }
            // Slow start: once per RTT, X = max(min(2 X, 2 X_recv), W_init / R).
            Some(x) if now.saturating_since(self.last_double) >= r => {
                let doubled = (2.0 * x).min(self.recv_limit()).max(initial);
                self.x = Some(self.bounded(doubled));
                self.last_double = now;
            }
            Some(_) => {}
        }
    }

    /// Halve X (never below `s / t_mbi`); after the first loss, cap X_recv
    /// at half the new X, so that the next report's `min(X_calc, 2 X_recv)`
    /// keeps the reduction until a new X_recv is measured (RFC 5348 §4.4
    /// halves X_recv when the rate is receive-limited and sets it to
    /// X_calc / 4 otherwise: either way X halves).
    fn halve(&mut self) {
        let Some(x) = self.x else {
            self.pre_report_halvings = self.pre_report_halvings.saturating_add(1).min(63);
            return;
        };
        let x = self.bounded(x / 2.0);
        self.x = Some(x);
        if self.history.has_loss() {
            self.recv.cap(x / 2.0);
        }
    }
}

/// A rate in bytes per second as a [`Rate`], at least 1 byte per second.
fn to_rate(x: f64) -> Rate {
    // `as` saturates, and maps NaN to 0.
    Rate::from_bytes_per_sec((x as u64).max(1))
}

impl Controller for Tfrc {
    fn name(&self) -> &'static str {
        "tfrc"
    }

    fn window(&self) -> Bytes {
        let Some(x) = self.x else {
            return self.pre_report_window();
        };
        // Rate-based: four times what X sends in one RTT (at least 100 ms),
        // at least 4 MTUs. Grants never wait for it while feedback flows;
        // it only bounds the bytes outstanding when feedback stops.
        let span = self.rtt().max(WINDOW_MIN_RTT).saturating_mul(4);
        let bytes = to_rate(x).bytes_in(span);
        bytes.max(self.mtu.saturating_mul(4))
    }

    fn rate(&self, srtt: Option<Duration>) -> Option<Rate> {
        match self.x {
            Some(x) => Some(to_rate(x)),
            None => Rate::per(self.pre_report_window(), srtt.or(self.srtt)?)
                .map(|r| r.clamp(to_rate(MIN_RATE), to_rate(MAX_RATE))),
        }
    }

    fn pacing_rate(&self, srtt: Option<Duration>) -> Option<Rate> {
        self.rate(srtt)
    }

    fn in_slow_start(&self) -> bool {
        !self.history.has_loss()
    }

    fn rate_based(&self) -> bool {
        true
    }

    fn set_mtu(&mut self, mtu: Bytes) {
        self.mtu = Bytes(mtu.0.max(1));
        if let Some(x) = self.x {
            self.x = Some(self.bounded(x));
        }
    }

    fn on_ack(&mut self, ev: &AckEvent) {
        self.note_rtt(ev.srtt);
        self.history.on_received(ev.acked);
        let r = self.rtt();
        self.recv.on_received(ev.now, ev.acked, r);
        if ev.lost_in_report > Bytes::ZERO {
            // The same report's loss follows in `on_congestion`, which
            // takes the report's one rate step.
            return;
        }
        self.update_rate(ev.now);
    }

    fn on_congestion(&mut self, ev: &CongestionEvent) {
        self.note_rtt(ev.srtt);
        let (r, mtu) = (self.rtt(), self.mtu);
        // RFC 5348 §6.3.1: the first loss event seeds the history with the
        // interval for which the equation gives X_recv; with no X_recv yet
        // (the first packets lost), X_target = s / (2 R), i.e. p = 20.6%.
        let r_secs = r.as_secs_f64();
        let s = self.equation_packet_size().0 as f64;
        let target = self.recv.get().unwrap_or(s / (2.0 * r_secs));
        let seed = || 1.0 / equation::loss_rate_for(target, s, r_secs);
        // An ECN mark counts as a loss (RFC 5348 §5: marked packets are
        // treated as lost ones for loss events).
        self.history.on_loss(ev.now, ev.lost, r, mtu, seed);
        self.update_rate(ev.now);
        if ev.kind == CongestionKind::Persistent {
            // A timeout: the loss event above, and the no-feedback
            // response of RFC 5348 §4.4 (halve the rate).
            self.halve();
        }
    }

    fn on_feedback_timeout(&mut self, _ev: &AgingEvent) {
        // RFC 5348 §4.4: the no-feedback timer halves the allowed rate,
        // never below s / t_mbi. The CM's exponential aging (sigcomm1999
        // §4.4) calls this once per half-life without feedback.
        self.halve();
    }

    fn on_idle_restart(&mut self, ev: &IdleEvent) {
        // RFC 5348 §4.4 (an idle sender's allowed rate decays to the
        // initial rate; RFC 2861 does the same for TCP's window): after an
        // idle period of at least one RTO the sender may not resume above
        // W_init / R, and rebuilds X from there, at most doubling per RTT
        // with X_recv. The idle time is no measurement period of X_recv.
        if ev.rto.is_zero() || ev.idle < ev.rto {
            return;
        }
        self.recv.restart();
        let Some(x) = self.x else { return };
        let x = self.bounded(x.min(self.initial_rate()));
        self.x = Some(x);
        self.last_double = ev.now;
        if self.history.has_loss() {
            self.recv.cap(x / 2.0);
        }
    }
}

#[cfg(test)]
mod tests;
