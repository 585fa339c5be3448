//! One simulated `scheduler` run: staggered ALF flows sharing one macroflow.

use cm_core::{Config, Duration, Instant};
use cm_sim::{DumbbellConfig, FlowTag, Sim, dumbbell};
use serde::Serialize;

use crate::alf::{AlfApp, AlfError, AlfPacket, AlfReceiver, AlfSender, Reporting};

/// Parameters of a scheduler run.
#[derive(Clone, Debug, Serialize)]
pub struct SchedParams {
    /// Scheduler weights, one flow each.
    pub weights: Vec<u32>,
    /// Seconds between successive flow starts.
    pub stagger_s: u64,
    /// Seconds of measurement after the last flow starts.
    pub measure_s: u64,
    /// Bottleneck rate, bit/s.
    pub bottleneck_bps: u64,
    /// One-way delay, ms.
    pub one_way_ms: u64,
}

/// The outcome of a scheduler run.
#[derive(Clone, Debug, Serialize)]
pub struct SchedRun {
    /// The scenario.
    pub params: SchedParams,
    /// Per flow, per one-second bin: received bit/s.
    pub rates_bps: Vec<Vec<f64>>,
    /// Seconds after the last start until every flow's share, per bin,
    /// stays within 10% of its target; `None` if it never does.
    pub convergence_s: Option<f64>,
    /// Largest relative deviation of a flow's share from its target over
    /// the second half of the measurement.
    pub share_error: f64,
    /// Each flow's share over the second half of the measurement.
    pub shares: Vec<f64>,
}

/// Run one scenario.
pub fn run(p: &SchedParams) -> Result<SchedRun, AlfError> {
    let one_way = Duration::from_millis(p.one_way_ms);
    let d = dumbbell(&DumbbellConfig::sigcomm1999(1, p.bottleneck_bps, one_way))?;
    let (tx, rx) = (d.left_hosts[0], d.right_hosts[0]);
    let mut sim = Sim::<AlfPacket>::new(d.topology, 1)?;
    let apps = p
        .weights
        .iter()
        .enumerate()
        .map(|(i, &w)| {
            let start = Instant::ZERO + Duration::from_secs(p.stagger_s * i as u64);
            AlfApp::new(rx, FlowTag(i as u32 + 1), start, w)
        })
        .collect();
    sim.attach(tx, AlfSender::new(Config::default(), apps)?)?;
    sim.attach(rx, AlfReceiver::new(Reporting::EveryPacket))?;
    let last_start = p.stagger_s * (p.weights.len() as u64).saturating_sub(1);
    let total_s = last_start + p.measure_s;
    sim.run_until(Instant::ZERO + Duration::from_secs(total_s));
    let host: &AlfSender = sim.host(tx).ok_or(AlfError::MissingHost)?;
    let rates_bps: Vec<Vec<f64>> = host
        .apps
        .iter()
        .map(|a| {
            (0..total_s)
                .map(|s| {
                    let t0 = Instant::ZERO + Duration::from_secs(s);
                    let t1 = Instant::ZERO + Duration::from_secs(s + 1);
                    (a.received_by(t1) - a.received_by(t0)) as f64 * 8.0
                })
                .collect()
        })
        .collect();
    let wsum: f64 = p.weights.iter().map(|&w| f64::from(w)).sum();
    let target: Vec<f64> = p.weights.iter().map(|&w| f64::from(w) / wsum).collect();
    let share_in = |from: u64, to: u64| -> Vec<f64> {
        let per: Vec<f64> = rates_bps
            .iter()
            .map(|r| r[from as usize..to as usize].iter().sum())
            .collect();
        let tot: f64 = per.iter().sum();
        per.iter()
            .map(|x| if tot > 0.0 { x / tot } else { 0.0 })
            .collect()
    };
    let deviation = |s: &[f64]| {
        s.iter()
            .zip(&target)
            .map(|(x, t)| (x - t).abs() / t)
            .fold(0.0, f64::max)
    };
    // Convergence: the first bin after the last start from which every
    // later bin is within 10% of the targets.
    let mut convergence_s = None;
    for b in (last_start..total_s).rev() {
        if deviation(&share_in(b, b + 1)) > 0.10 {
            break;
        }
        convergence_s = Some((b - last_start) as f64);
    }
    let half = last_start + p.measure_s / 2;
    let shares = share_in(half, total_s);
    Ok(SchedRun {
        share_error: deviation(&shares),
        shares,
        convergence_s,
        rates_bps,
        params: p.clone(),
    })
}

/// The two runs of the experiment: equal weights, and weights 1:2:4.
pub fn scenarios(quick: bool) -> Vec<SchedParams> {
    let (stagger_s, measure_s) = if quick { (3, 10) } else { (10, 30) };
    [vec![1, 1, 1], vec![1, 2, 4]]
        .into_iter()
        .map(|weights| SchedParams {
            weights,
            stagger_s,
            measure_s,
            bottleneck_bps: 1_000_000,
            one_way_ms: 60,
        })
        .collect()
}
