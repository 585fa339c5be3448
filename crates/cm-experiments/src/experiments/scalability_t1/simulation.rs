//! One simulated `scalability-t1` run: `n` NACK-based streaming flows of
//! one scheme over a T1, each from its own host (its own macroflow), with
//! round-trip times spread over 50–200 ms (iscc §VI-C, Fig 4's testbed).

use cm_core::controller::{BinomialConfig, ControllerConfig, IsccConfig};
use cm_core::{Bytes, Config, Duration, Instant, Rate};
use cm_sim::{FlowTag, LinkConfig, LinkStats, QueueLimit, Sim, Topology};
use serde::Serialize;

use crate::alf::{AlfApp, AlfError, AlfPacket, AlfReceiver, AlfSender, Reporting};
use crate::seeded;

/// T1 line rate, bit/s.
pub const T1_BPS: u64 = 1_544_000;
/// Datagram bytes granted per packet: 1,500 bytes on the wire with the
/// simulator's 28 bytes of IP and UDP headers (iscc §VI-C: "the actual MTU
/// used during the experiment was 1,500 bytes").
pub const PAYLOAD: u64 = 1472;
/// Packets per bunch (iscc §VI-B: a sample from each burst of at least 3).
pub const BURST: u8 = 3;
/// The lowest rate, bit/s: the paper's base layer, `b_0 = 14` kb/s (iscc
/// §VI-B, footnote 4's `x_min` for rate-based streaming). The core's
/// default floor, one MTU per control interval, is 60–240 kbit/s here: 50
/// flows would hold 3 Mbit/s on a 1.5 Mbit/s link however they back off.
pub const BASE_LAYER_BPS: u64 = 14_000;

/// A scheme of Fig 6.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Scheme {
    /// AIMD(1,½), MTU/RTT = 30 kbit/s.
    Aimd,
    /// IIAD(½,2), MTU/RTT = 50 kbit/s.
    Iiad,
    /// TFRC, 180-byte packets in the equation, 1,500-byte packets sent.
    Tfrc,
    /// ISCC(2), m_D = 2, m_I = 20, C from packet bunches.
    Iscc,
}

impl Scheme {
    /// Its name in tables.
    pub fn label(self) -> &'static str {
        match self {
            Scheme::Aimd => "AIMD",
            Scheme::Iiad => "IIAD",
            Scheme::Tfrc => "TFRC",
            Scheme::Iscc => "ISCC(2)",
        }
    }

    /// The paper's value of the scheme's aggressiveness parameter
    /// (iscc §VI-C): MTU/RTT in bit/s for AIMD and IIAD, the equation's
    /// packet size in bytes for TFRC, `m_I` for ISCC.
    pub fn paper_param(self) -> f64 {
        match self {
            Scheme::Aimd => 30_000.0,
            Scheme::Iiad => 50_000.0,
            Scheme::Tfrc => 180.0,
            Scheme::Iscc => 20.0,
        }
    }

    /// The range the calibration searches, and whether loss grows with
    /// the parameter.
    pub fn param_range(self) -> (f64, f64, bool) {
        match self {
            Scheme::Aimd => (500.0, 100_000.0, true),
            Scheme::Iiad => (5_000.0, 500_000.0, true),
            Scheme::Tfrc => (40.0, 1_472.0, true),
            Scheme::Iscc => (5.0, 2_000.0, false),
        }
    }

    /// The controller each flow's CM runs, with `param` as
    /// [`Scheme::paper_param`] describes.
    pub fn config(self, param: f64) -> ControllerConfig {
        let fixed = |c: BinomialConfig| {
            ControllerConfig::Binomial(BinomialConfig {
                mtu_per_rtt: Some(Rate::from_bits_per_sec(param.max(8.0) as u64)),
                min_rate: Some(Rate::from_bits_per_sec(BASE_LAYER_BPS)),
                ..c
            })
        };
        match self {
            Scheme::Aimd => fixed(BinomialConfig::aimd()),
            Scheme::Iiad => fixed(BinomialConfig::new(1.0, 0.0, 0.5, 2.0)),
            Scheme::Tfrc => ControllerConfig::Tfrc(cm_core::controller::TfrcConfig {
                equation_packet_size: Some(Bytes(param.clamp(1.0, 65_535.0) as u64)),
                min_rate: Some(Rate::from_bits_per_sec(BASE_LAYER_BPS)),
                ..Default::default()
            }),
            Scheme::Iscc => ControllerConfig::Iscc(IsccConfig {
                m_i: param.max(1.0),
                min_rate: Some(Rate::from_bits_per_sec(BASE_LAYER_BPS)),
                fallback: BinomialConfig {
                    min_rate: Some(Rate::from_bits_per_sec(BASE_LAYER_BPS)),
                    ..BinomialConfig::aimd()
                },
                ..IsccConfig::default()
            }),
        }
    }
}

/// The paper's rule for choosing each scheme's parameter (iscc §VI-C: "so
/// that the average packet loss of two competing flows using each scheme
/// was between 0.3% and 0.6%"), applied in this network: a bisection (in
/// log space) on the scheme's parameter over two-flow runs, stopping at
/// the first value whose loss is in that band. Returns the parameter and
/// the two-flow loss it gave; when the band cannot be reached within the
/// parameter's range, the end of the range closest to it.
pub fn calibrate(scheme: Scheme, base: &T1Params, steps: u32) -> Result<(f64, f64), AlfError> {
    let two_flows = |param: f64| {
        let p = T1Params {
            scheme,
            n: 2,
            param: Some(param),
            ..base.clone()
        };
        run(&p).map(|r| r.loss)
    };
    let c = calibrate_with(scheme, None, steps, two_flows)?;
    Ok((c.param, c.loss))
}

/// The two-flow loss band of the paper's rule (iscc §VI-C).
pub const CALIBRATION_BAND: (f64, f64) = (0.003, 0.006);

/// What [`calibrate_with`] found, and every trial on the way.
#[derive(Clone, Debug, Serialize)]
pub struct Calibration {
    /// The parameter chosen.
    pub param: f64,
    /// Its two-flow loss.
    pub loss: f64,
    /// Every `(parameter, two-flow loss)` tried, in order.
    pub trials: Vec<(f64, f64)>,
}

/// The bisection of [`calibrate`] over any network: `two_flow_loss(param)`
/// runs two flows of `scheme` with `param` and returns their loss (the
/// simulator's, or a real path's). `first`, if given, is tried before the
/// bisection's first midpoint (the paper's own parameter, which may
/// already be in the band); its result narrows the range like any trial.
pub fn calibrate_with<E>(
    scheme: Scheme,
    first: Option<f64>,
    steps: u32,
    mut two_flow_loss: impl FnMut(f64) -> Result<f64, E>,
) -> Result<Calibration, E> {
    let (mut lo, mut hi, grows) = scheme.param_range();
    let (band_lo, band_hi) = CALIBRATION_BAND;
    let target = (band_lo + band_hi) / 2.0;
    let dist = |l: f64| (l.max(1e-6).ln() - target.ln()).abs();
    let mut c = Calibration {
        param: scheme.paper_param(),
        loss: f64::NAN,
        trials: Vec::new(),
    };
    let mut next = first.filter(|f| (lo..=hi).contains(f));
    for _ in 0..steps {
        let mid = next.take().unwrap_or((lo * hi).sqrt());
        let loss = two_flow_loss(mid)?;
        c.trials.push((mid, loss));
        if c.loss.is_nan() || dist(loss) < dist(c.loss) {
            (c.param, c.loss) = (mid, loss);
        }
        if (band_lo..=band_hi).contains(&loss) {
            (c.param, c.loss) = (mid, loss);
            return Ok(c);
        }
        if (loss > band_hi) == grows {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    Ok(c)
}

/// Parameters of one run.
#[derive(Clone, Debug, Serialize)]
pub struct T1Params {
    /// The scheme every flow runs.
    pub scheme: Scheme,
    /// Flows.
    pub n: usize,
    /// Seconds between flow starts (iscc §VI-C footnote 10: 1.5 s).
    pub stagger_s: f64,
    /// Seconds the run goes on after the last flow started.
    pub after_last_s: f64,
    /// Bottleneck queue, packets.
    pub queue_packets: u32,
    /// Seed (RTT draw).
    pub seed: u64,
    /// The scheme's parameter ([`Scheme::paper_param`] if `None`).
    pub param: Option<f64>,
}

/// What one run measured.
#[derive(Clone, Debug, Serialize)]
pub struct T1Run {
    /// The parameters.
    pub params: T1Params,
    /// Bottleneck loss (dropped / arrived) in the measured interval.
    pub loss: f64,
    /// The measured interval, seconds.
    pub from_s: f64,
    /// Its end (when the flows end).
    pub to_s: f64,
    /// Packets that arrived at the bottleneck in it.
    pub packets: u64,
    /// Bottleneck utilisation in it.
    pub utilization: f64,
    /// Each flow's received rate in it, bit/s.
    pub rates_bps: Vec<f64>,
    /// Every packet-bunch capacity sample the receivers took in it, bit/s.
    pub samples_bps: Vec<f64>,
    /// Each flow's filtered capacity estimate at the end (its macroflow's).
    pub estimates_bps: Vec<Option<f64>>,
}

/// The round-trip time of flow `i`: seeded, uniform over 50–200 ms.
pub(crate) fn rtt_ms(seed: u64, i: usize) -> f64 {
    50.0 + 150.0 * seeded::unit(seed, 1000 + i as u64)
}

/// Run one scenario.
pub fn run(p: &T1Params) -> Result<T1Run, AlfError> {
    let mut t = Topology::new();
    let (rl, rr) = (t.add_router(), t.add_router());
    let bottleneck_delay = Duration::from_millis(5);
    let t1 = LinkConfig::new(
        T1_BPS,
        bottleneck_delay,
        QueueLimit::Packets(p.queue_packets),
    );
    let (bottleneck, _) = t.add_duplex(rl, rr, t1, t1)?;
    let fast = |d: Duration| LinkConfig::new(100_000_000, d, QueueLimit::Unlimited);
    let mut pairs = Vec::new();
    for i in 0..p.n {
        // RTT = 2 (access + bottleneck + 1 ms receiver access).
        let one_way_us = (rtt_ms(p.seed, i) * 500.0) as u64;
        let access = Duration::from_micros(one_way_us.saturating_sub(6_000).max(100));
        let (tx, rx) = (t.add_host(), t.add_host());
        t.add_duplex_sym(tx, rl, fast(access))?;
        t.add_duplex_sym(rx, rr, fast(Duration::from_millis(1)))?;
        pairs.push((
            tx,
            rx,
            Duration::from_micros(2 * (access.as_micros() + 6_000)),
        ));
    }
    let mut sim = Sim::<AlfPacket>::new(t, p.seed)?;
    let cfg = Config {
        controller: p.scheme.config(p.param.unwrap_or(p.scheme.paper_param())),
        mtu: Bytes(PAYLOAD),
        ..Config::default()
    };
    for (i, &(tx, rx, rtt)) in pairs.iter().enumerate() {
        let start = Instant::ZERO + Duration::from_micros((p.stagger_s * 1e6) as u64 * i as u64);
        let app = AlfApp::new(rx, FlowTag(i as u32 + 1), start, 1)
            .with_bursts(BURST)?
            .with_timeouts()
            .with_acks_once_per_rtt();
        sim.attach(tx, AlfSender::new(cfg.clone(), vec![app])?)?;
        // NACK-based: one report per RTT (iscc §II: R = RTT).
        sim.attach(
            rx,
            AlfReceiver::new(Reporting::Every(rtt)).with_echo_delay(),
        )?;
    }
    let last_start = p.stagger_s * p.n.saturating_sub(1) as f64;
    let end_s = (last_start + p.after_last_s).ceil() as u64;
    let mut snaps: Vec<LinkStats> = Vec::new();
    for s in 0..=end_s {
        sim.run_until(Instant::ZERO + Duration::from_secs(s));
        snaps.push(sim.link_stats(bottleneck).unwrap_or_default());
    }
    // From 5 s after the last flow left slow start (iscc §VI-C) to the end.
    let mut ss_end = last_start;
    for &(tx, _, _) in &pairs {
        let h: &AlfSender = sim.host(tx).ok_or(AlfError::MissingHost)?;
        let end = h.apps[0]
            .slow_start_end
            .map_or(end_s as f64, |t| t.as_micros() as f64 / 1e6);
        ss_end = ss_end.max(end);
    }
    let from = ((ss_end + 5.0).ceil() as u64).min(end_s.saturating_sub(1));
    let (a, b) = (snaps[from as usize], snaps[end_s as usize]);

    let arrived = (b.enqueued + b.dropped_overflow) - (a.enqueued + a.dropped_overflow);
    let dropped = b.dropped_overflow - a.dropped_overflow;
    let span = (end_s - from) as f64;
    let busy = (b.busy_us - a.busy_us) as f64 / 1e6;
    let mut samples_bps = Vec::new();
    let mut estimates_bps = Vec::new();
    let from_t = Instant::ZERO + Duration::from_secs(from);
    for &(tx, rx, _) in &pairs {
        let r: &AlfReceiver = sim.host(rx).ok_or(AlfError::MissingHost)?;
        samples_bps.extend(
            r.samples
                .iter()
                .filter(|(t, _, _)| *t >= from_t)
                .map(|(_, _, s)| s.bits_per_sec() as f64),
        );
        let h: &AlfSender = sim.host(tx).ok_or(AlfError::MissingHost)?;
        let est = h
            .cm()
            .macroflow_ids()
            .first()
            .and_then(|&m| h.cm().capacity(m).ok().flatten())
            .map(|c| c.bits_per_sec() as f64);
        estimates_bps.push(est);
    }
    let mut rates_bps = Vec::new();
    for &(tx, _, _) in &pairs {
        let h: &AlfSender = sim.host(tx).ok_or(AlfError::MissingHost)?;
        let app = &h.apps[0];
        let got = app.received_by(Instant::ZERO + Duration::from_secs(end_s))
            - app.received_by(Instant::ZERO + Duration::from_secs(from));
        rates_bps.push(got as f64 * 8.0 / span);
    }
    Ok(T1Run {
        params: p.clone(),
        loss: if arrived > 0 {
            dropped as f64 / arrived as f64
        } else {
            0.0
        },
        from_s: from as f64,
        to_s: end_s as f64,
        packets: arrived,
        utilization: busy / span,
        rates_bps,
        samples_bps,
        estimates_bps,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A network where two AIMD flows lose `param` / 10⁶ (loss grows with
    /// the step) and two ISCC flows lose 1 / `param` (it falls with m_I).
    fn loss(scheme: Scheme) -> impl FnMut(f64) -> Result<f64, ()> {
        move |p| {
            Ok(if scheme == Scheme::Iscc {
                1.0 / p
            } else {
                p / 1e6
            })
        }
    }

    #[test]
    fn the_bisection_lands_in_the_band_either_way_round() {
        for s in [Scheme::Aimd, Scheme::Iscc] {
            let c = calibrate_with(s, None, 12, loss(s)).unwrap_or_else(|()| unreachable!());
            assert!((0.003..=0.006).contains(&c.loss), "{s:?} {c:?}");
            assert_eq!(c.trials.last().map(|t| t.1), Some(c.loss));
        }
    }

    /// A first guess already in the band is kept after one run; one
    /// outside the band narrows the range like any trial; one outside the
    /// range is not tried.
    #[test]
    fn a_first_guess_is_tried_first() {
        let c = calibrate_with(Scheme::Aimd, Some(4_000.0), 12, loss(Scheme::Aimd))
            .unwrap_or_else(|()| unreachable!());
        assert_eq!(c.trials, vec![(4_000.0, 0.004)]);
        let c = calibrate_with(Scheme::Aimd, Some(30_000.0), 12, loss(Scheme::Aimd))
            .unwrap_or_else(|()| unreachable!());
        assert_eq!(c.trials[0].0, 30_000.0);
        assert!(c.trials[1..].iter().all(|t| t.0 < 30_000.0), "{c:?}");
        assert!((0.003..=0.006).contains(&c.loss), "{c:?}");
        let c = calibrate_with(Scheme::Aimd, Some(1e9), 1, loss(Scheme::Aimd))
            .unwrap_or_else(|()| unreachable!());
        assert_ne!(c.trials[0].0, 1e9);
    }

    /// Out of reach, the closest trial to the band's middle is kept.
    #[test]
    fn out_of_reach_the_closest_is_kept() {
        let c = calibrate_with(Scheme::Tfrc, None, 8, |_| Ok::<f64, ()>(0.0))
            .unwrap_or_else(|()| unreachable!());
        assert_eq!(c.loss, 0.0);
        assert_eq!(c.trials.len(), 8);
        // Every trial moved up towards the top of TFRC's range.
        assert!(c.trials.windows(2).all(|w| w[1].0 > w[0].0), "{c:?}");
    }
}
