//! One simulated `aging` run: an ALF sender with sparse reports, CBR cross traffic half-way through.

use cm_core::{Aging, Config, Duration, Instant, Rate};
use cm_sim::{CbrSource, DumbbellConfig, FlowTag, QueueLimit, Sim, Sink, dumbbell};
use serde::Serialize;

use crate::alf::{AlfApp, AlfError, AlfPacket, AlfReceiver, AlfSender, Reporting};

/// Parameters of one aging run.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct AgingParams {
    /// Bottleneck rate, bit/s.
    pub bottleneck_bps: u64,
    /// One-way propagation delay.
    pub one_way_ms: u64,
    /// The receiver reports once per this interval.
    pub report_ms: u64,
    /// Bottleneck queue in bandwidth-delay products (1 = the paper's
    /// dumbbell; deeper queues inflate srtt more at the onset of congestion).
    pub queue_bdps: u64,
    /// Cross traffic rate while on, bit/s.
    pub cross_bps: u64,
    /// Run length, seconds (cross traffic on for the middle third).
    pub seconds: u64,
    /// Seed (offsets the cross traffic's start by up to one report interval).
    pub seed: u64,
}

/// The outcome of one run in one aging mode.
#[derive(Clone, Debug, Serialize)]
pub struct AgingRun {
    /// `"minrtt"` or `"srtt"`.
    pub mode: &'static str,
    /// The scenario.
    pub params: AgingParams,
    /// Data packets the CM flow lost at the bottleneck.
    pub lost_packets: u64,
    /// Data packets it sent.
    pub sent_packets: u64,
    /// Its goodput, bit/s.
    pub goodput_bps: f64,
    /// Cross-traffic packets lost.
    pub cross_lost: u64,
}

const DATA: FlowTag = FlowTag(1);
const CROSS: FlowTag = FlowTag(2);

/// Run one scenario with the given aging half-life.
pub fn run(p: AgingParams, aging: Aging) -> Result<AgingRun, AlfError> {
    let one_way = Duration::from_millis(p.one_way_ms);
    let mut cfg = DumbbellConfig::sigcomm1999(2, p.bottleneck_bps, one_way);
    if let QueueLimit::Bytes(b) = cfg.bottleneck.queue {
        cfg.bottleneck.queue = QueueLimit::Bytes(b * p.queue_bdps.max(1));
    }
    let d = dumbbell(&cfg)?;
    let (tx, cross_tx) = (d.left_hosts[0], d.left_hosts[1]);
    let (rx, cross_rx) = (d.right_hosts[0], d.right_hosts[1]);
    let mut sim = Sim::<AlfPacket>::new(d.topology, p.seed)?;
    let cfg = Config {
        aging,
        ..Config::default()
    };
    let app = AlfApp::new(rx, DATA, Instant::ZERO, 1);
    sim.attach(tx, AlfSender::new(cfg, vec![app])?)?;
    sim.attach(
        rx,
        AlfReceiver::new(Reporting::Every(Duration::from_millis(p.report_ms))),
    )?;
    let third = Duration::from_secs(p.seconds).as_micros() / 3;
    let jitter = crate::seeded::below(p.seed, 0, p.report_ms * 1000);
    let on = Instant::from_micros(third + jitter);
    let off = Instant::from_micros(2 * third + jitter);
    let rate = Rate::from_bits_per_sec(p.cross_bps);
    if let Some(cbr) = CbrSource::with_rate(
        cross_rx,
        CROSS,
        AlfPacket::Cross { len: 1000 },
        rate,
        on,
        off,
    ) {
        sim.attach(cross_tx, cbr)?;
        sim.attach(cross_rx, Sink::new())?;
    }
    let end = Instant::from_micros(Duration::from_secs(p.seconds).as_micros());
    sim.run_until(end);
    let data = sim.flow_stats(DATA).cloned().unwrap_or_default();
    let cross_lost = sim.flow_stats(CROSS).map_or(0, |s| s.dropped());
    Ok(AgingRun {
        mode: match aging {
            Aging::Srtt => "srtt",
            Aging::MinRtt => "minrtt",
            Aging::Off => "off",
        },
        params: p,
        lost_packets: data.dropped(),
        sent_packets: data.sent_packets,
        goodput_bps: data.delivered_bytes as f64 * 8.0 / p.seconds as f64,
        cross_lost,
    })
}

/// The sweep: report intervals of about 2, 4 and 8 round trips, queues of 1
/// and 4 bandwidth-delay products, `seeds` seeds each.
pub fn sweep(quick: bool) -> Vec<AgingParams> {
    let seeds = if quick { 2 } else { 5 };
    let mut v = Vec::new();
    for (report_ms, queue_bdps) in [250, 500, 1000].into_iter().flat_map(|r| [(r, 1), (r, 4)]) {
        for seed in 1..=seeds {
            v.push(AgingParams {
                queue_bdps,
                bottleneck_bps: 1_000_000,
                one_way_ms: 60,
                report_ms,
                cross_bps: 500_000,
                seconds: if quick { 30 } else { 60 },
                seed,
            });
        }
    }
    v
}

/// Total losses per mode over a sweep: `(lost_minrtt, lost_srtt)`.
pub fn totals(runs: &[AgingRun]) -> (u64, u64) {
    let sum = |m: &str| {
        runs.iter()
            .filter(|r| r.mode == m)
            .map(|r| r.lost_packets)
            .sum()
    };
    (sum("minrtt"), sum("srtt"))
}
