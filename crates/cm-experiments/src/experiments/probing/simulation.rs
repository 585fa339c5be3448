//! One simulated run of a probe-driven CM flow: a [`ProbeSender`] and a
//! [`ProbeReceiver`] across the sigcomm1999 dumbbell, with the bottleneck's
//! impairments (random loss, reordering, duplication on the forward path,
//! loss on the reverse path) and optional CBR cross traffic.

use cm_core::controller::{AimdConfig, ControllerConfig};
use cm_core::{Aging, Bytes, Config, Duration, Instant, Rate};
use cm_sim::{CbrSource, DumbbellConfig, FlowTag, QueueLimit, Sim, Sink, dumbbell};
use serde::Serialize;

use crate::alf::AlfError;
use crate::probe::{Mode, ProbeApp, ProbePacket, ProbeReceiver, ProbeSender, bare_tag};

/// Payload bytes of a datagram (one MTU grant).
pub const MSS: u64 = 1460;

/// Parameters of one run.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct ProbeParams {
    /// Bottleneck rate, bit/s.
    pub bottleneck_bps: u64,
    /// One-way propagation delay, ms (the dumbbell's access links take
    /// 1 ms each of it).
    pub one_way_ms: u64,
    /// Bottleneck queue in bandwidth-delay products (DropTail, bytes).
    pub queue_bdps: u64,
    /// Random loss on the forward bottleneck.
    pub loss: f64,
    /// Reordering on the forward bottleneck: probability a packet is held.
    pub reorder: f64,
    /// Extra delay of a held packet, ms.
    pub reorder_delay_ms: u64,
    /// Duplication on the forward bottleneck.
    pub duplicate: f64,
    /// Random loss on the reverse bottleneck (responses, SYN-ACKs).
    pub reverse_loss: f64,
    /// CBR cross traffic, bit/s, during the middle third (0: none).
    pub cross_bps: u64,
    /// Responses lost for this long from the start of the middle third
    /// (a burst of lost responses at the onset of congestion; 0: none).
    pub outage_ms: u64,
    /// How the sender learns of loss.
    #[serde(skip)]
    pub mode: Mode,
    /// Probes per smoothed RTT.
    pub probes_per_rtt: f64,
    /// Exponential aging half-life.
    #[serde(skip)]
    pub aging: Aging,
    /// Run length, s.
    pub seconds: u64,
    /// Seed of the simulation (random loss, reordering, duplication draws).
    pub seed: u64,
}

impl ProbeParams {
    /// A loss-free 10 Mbit/s, 50 ms one-way dumbbell with a 1-BDP queue,
    /// the CM header, 2 probes per RTT, min-RTT aging, 20 s.
    pub fn new(seed: u64) -> Self {
        ProbeParams {
            bottleneck_bps: 10_000_000,
            one_way_ms: 50,
            queue_bdps: 1,
            loss: 0.0,
            reorder: 0.0,
            reorder_delay_ms: 0,
            duplicate: 0.0,
            reverse_loss: 0.0,
            cross_bps: 0,
            outage_ms: 0,
            mode: Mode::Header,
            probes_per_rtt: 2.0,
            aging: Aging::MinRtt,
            seconds: 20,
            seed,
        }
    }
}

/// What one run measured.
#[derive(Clone, Debug, Serialize)]
pub struct ProbeRun {
    /// The scenario.
    pub params: ProbeParams,
    /// Distinct payload bytes delivered ×8 / run length (both tags).
    pub goodput_bps: f64,
    /// Accounted (headed) datagrams sent.
    pub sent_packets: u64,
    /// Of those, dropped in the network (the link's truth).
    pub dropped_packets: u64,
    /// `dropped / sent` of accounted datagrams.
    pub true_loss: f64,
    /// The prober's loss estimate (declared lost / headed sent).
    pub estimated_loss: Option<f64>,
    /// Packets the receiver CM declared lost (as the prober heard).
    pub declared_lost: u64,
    /// Datagrams sent during the handshake (outside the accounting).
    pub bare_packets: u64,
    /// Probes sent, responses accepted.
    pub probes: u64,
    /// Responses accepted.
    pub responses: u64,
    /// Responses refused as forged (counts above what was sent).
    pub forged: u64,
    /// Reports given to the CM as congestion.
    pub congestion_reports: u64,
    /// Header-less decreases and undos.
    pub decreases: u64,
    /// Decreases undone.
    pub undone: u64,
    /// Packets the forward bottleneck held back (reordering) and copied.
    pub reordered: u64,
    /// Copies made by the forward bottleneck.
    pub duplicated: u64,
    /// Packets of any kind the reverse bottleneck lost (control only).
    pub reverse_dropped: u64,
    /// Answers lost to the response outage.
    pub suppressed: u64,
    /// Cross-traffic packets lost.
    pub cross_lost: u64,
    /// Exponential aging steps taken (sigcomm1999 §4.4).
    pub aging_steps: u64,
    /// Mean bytes in flight just before a report.
    pub mean_in_flight: f64,
    /// The probes' smoothed RTT at the end, ms.
    pub srtt_ms: Option<f64>,
    /// `(time s, window bytes)` after every report.
    #[serde(skip)]
    pub window_trace: Vec<(f64, u64)>,
}

const DATA: FlowTag = FlowTag(1);
const CROSS: FlowTag = FlowTag(2);

/// Runs one scenario.
pub fn run(p: ProbeParams) -> Result<ProbeRun, AlfError> {
    let one_way = Duration::from_millis(p.one_way_ms);
    let mut cfg = DumbbellConfig::sigcomm1999(2, p.bottleneck_bps, one_way);
    if let QueueLimit::Bytes(b) = cfg.bottleneck.queue {
        cfg.bottleneck.queue = QueueLimit::Bytes(b * p.queue_bdps.max(1));
    }
    cfg.reverse = cfg.bottleneck.with_loss(p.reverse_loss);
    cfg.bottleneck = cfg.bottleneck.with_loss(p.loss).with_duplicate(p.duplicate);
    if p.reorder > 0.0 {
        let extra = Duration::from_millis(p.reorder_delay_ms.max(1));
        cfg.bottleneck = cfg.bottleneck.with_reorder(p.reorder, extra);
    }
    let d = dumbbell(&cfg)?;
    let (tx, cross_tx) = (d.left_hosts[0], d.left_hosts[1]);
    let (rx, cross_rx) = (d.right_hosts[0], d.right_hosts[1]);
    let mut sim = Sim::<ProbePacket>::new(d.topology, p.seed)?;
    // A 2-MSS initial window, as the scenarios give TCP/CM and NewReno has.
    let ccfg = Config {
        aging: p.aging,
        controller: ControllerConfig::Aimd(AimdConfig {
            initial_window: Some(Bytes(2 * MSS)),
            ..AimdConfig::default()
        }),
        ..Config::default()
    };
    let app = ProbeApp::new(rx, DATA, Instant::ZERO, 1);
    let secret = crate::seeded::draw(p.seed, 7);
    let sender = ProbeSender::new(ccfg, p.mode, p.probes_per_rtt, secret, vec![app])?;
    sim.attach(tx, sender)?;
    let headerless = matches!(p.mode, Mode::Headerless(_));
    // The middle third starts up to one RTT late, by seed, so seeds
    // differ where nothing else is random (as the `aging` experiment
    // offsets its cross traffic).
    let onset = if p.cross_bps > 0 || p.outage_ms > 0 {
        crate::seeded::below(p.seed, 0, 2 * p.one_way_ms * 1000)
    } else {
        0
    };
    let third = Duration::from_secs(p.seconds).as_micros() / 3 + onset;
    let mut receiver = ProbeReceiver::new(headerless);
    if p.outage_ms > 0 {
        let from = Instant::from_micros(third);
        receiver = receiver.with_outage(from, from + Duration::from_millis(p.outage_ms));
    }
    sim.attach(rx, receiver)?;
    if p.cross_bps > 0 {
        let on = Instant::from_micros(third);
        let off = Instant::from_micros(third + Duration::from_secs(p.seconds).as_micros() / 3);
        let rate = Rate::from_bits_per_sec(p.cross_bps);
        let cross = ProbePacket::Cross { len: 1000 };
        if let Some(cbr) = CbrSource::with_rate(cross_rx, CROSS, cross, rate, on, off) {
            sim.attach(cross_tx, cbr)?;
            sim.attach(cross_rx, Sink::new())?;
        }
    }
    let end = Instant::from_micros(Duration::from_secs(p.seconds).as_micros());
    sim.run_until(end);
    let stats = |t| sim.flow_stats(t).cloned().unwrap_or_default();
    let (data, bare) = (stats(DATA), stats(bare_tag(DATA)));
    let fwd = sim.link_stats(d.bottleneck).unwrap_or_default();
    let rev = sim.link_stats(d.reverse).unwrap_or_default();
    let suppressed = sim.host::<ProbeReceiver>(rx).map_or(0, |r| r.suppressed);
    let cross_lost = sim.flow_stats(CROSS).map_or(0, |s| s.dropped());
    let s = sim.host::<ProbeSender>(tx).ok_or(AlfError::MissingHost)?;
    let a = s.apps.first().ok_or(AlfError::MissingHost)?;
    let prober = s.endpoint().prober(&rx);
    // Distinct datagrams delivered: every original is delivered or dropped
    // (copies come after the bottleneck and are never dropped here).
    let distinct = |f: &cm_sim::FlowStats| f.sent_packets.saturating_sub(f.dropped());
    let goodput = (distinct(&data) + distinct(&bare)) as f64 * MSS as f64 * 8.0 / p.seconds as f64;
    Ok(ProbeRun {
        params: p,
        goodput_bps: goodput,
        sent_packets: data.sent_packets,
        dropped_packets: data.dropped(),
        true_loss: data.loss_rate(),
        estimated_loss: prober.and_then(|p| p.loss_estimate()),
        declared_lost: prober.map_or(0, |p| p.packet_counts().1),
        bare_packets: a.bare_packets,
        probes: prober.map_or(0, |p| p.counters.probes),
        responses: prober.map_or(0, |p| p.counters.responses),
        forged: prober.map_or(0, |p| p.counters.forged),
        congestion_reports: a.congestion_reports,
        decreases: a.decreases,
        undone: a.undone,
        reordered: fwd.reordered,
        duplicated: fwd.duplicated,
        reverse_dropped: rev.dropped_random + rev.dropped_overflow,
        suppressed,
        cross_lost,
        aging_steps: a.aging_steps,
        mean_in_flight: a.in_flight_sum as f64 / a.reports.max(1) as f64,
        srtt_ms: prober
            .and_then(|p| p.srtt())
            .map(|d| d.as_micros() as f64 / 1000.0),
        window_trace: a
            .window_trace
            .iter()
            .map(|&(t, w)| (t.as_micros() as f64 / 1e6, w))
            .collect(),
    })
}

/// What the NewReno reference measured.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct RenoRun {
    /// In-order application bytes ×8 / run length.
    pub goodput_bps: f64,
    /// Dropped / sent data segments.
    pub loss_rate: f64,
}

/// One TCP NewReno flow alone in the same conditions as `p` (the same
/// dumbbell, queue and forward random loss, the scenario runner's NewReno,
/// a 1 MB receive window so only congestion control limits it).
pub fn newreno(p: &ProbeParams) -> Result<RenoRun, crate::scenario::ScenarioError> {
    use crate::scenario::{FlowSpec, Transport};
    let mut s = super::super::base(
        "newreno-reference",
        p.bottleneck_bps,
        p.one_way_ms as f64,
        p.seconds as f64,
        p.seed,
    );
    s.rcv_wnd = Some(crate::experiments::tcp_friendly::RCV_WND);
    s.bottleneck.loss = p.loss;
    if p.queue_bdps != 1 {
        let bdp = p.bottleneck_bps * 2 * p.one_way_ms / 8_000;
        s.bottleneck.queue = None;
        s.bottleneck.queue_bytes = Some(bdp * p.queue_bdps);
    }
    let mut f = FlowSpec::new("newreno", Transport::Newreno);
    f.host = Some("sender".into());
    s.flows.push(f);
    let r = crate::simulate::run(&s)?;
    let f = &r.flows[0];
    Ok(RenoRun {
        goodput_bps: f.goodput_bps,
        loss_rate: f.loss_rate,
    })
}
