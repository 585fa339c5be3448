//! Pacing with a slack (`Config::pacing_slack`): grants due within the slack
//! of a wake-up go in that wake-up, the timer fires less often, and the
//! shaper's long-run rate does not change (sigcomm1999 §4.1: grants are
//! paced at the macroflow's rate; issue 20: coalesced pacing timers).
//!
//! Each run drives the manager as a real driver does: one backlogged flow,
//! a timer that fires at `poll_timeout` (on time, or up to 50 µs late), and
//! every grant sent and acknowledged at once, so only the shaper limits.

#![allow(clippy::unwrap_used)]

mod common;

use cm_core::controller::{AimdConfig, ControllerConfig};
use cm_core::{
    Aging, Bytes, Config, CongestionManager, Duration, Event, Feedback, FlowId, Instant, Rate,
};

const MTU: u64 = 1460;
/// The RTT of every sample: window / RTT is the shaping rate.
const RTT: Duration = Duration::from_millis(60);

/// Rates in Mbit/s and how long each run lasts, in simulated seconds: long
/// enough that one bucket plus the slack's debt is well under 1% of the
/// bytes (at 1 Mbit/s with a 5 ms slack, about 6.5 kB of 1 MB).
const RATES: [(u64, u64); 4] = [(1, 8), (10, 8), (100, 2), (1000, 1)];
const SLACKS_US: [u64; 4] = [0, 100, 1_000, 5_000];

/// What one run measured.
#[derive(Debug)]
struct Run {
    /// The shaping rate, bytes/s.
    rate: u64,
    /// Bytes granted in the measured interval.
    granted: u64,
    /// Its length.
    secs: u64,
    /// Timer firings (`handle_timeout` calls) in it.
    wakeups: u64,
    /// The shaper's bucket depth: max(2 MTU, 1 ms of rate) (`burst_time`).
    depth: u64,
    /// rate × slack in bytes: the debt the slack allows.
    lead: u64,
}

/// A deterministic lateness in 0..=50 µs (xorshift), or none.
struct Lateness(Option<u64>);

impl Lateness {
    fn next(&mut self) -> Duration {
        let Some(x) = self.0.as_mut() else {
            return Duration::ZERO;
        };
        *x ^= *x << 13;
        *x ^= *x >> 7;
        *x ^= *x << 17;
        Duration::from_micros(*x % 51)
    }
}

/// Send, acknowledge and count every grant, then keep the flow backlogged
/// with at least `keep` bytes pending.
fn serve(cm: &mut CongestionManager, now: Instant, f: FlowId, keep: u64) -> u64 {
    let mut granted = serve_now(cm, now);
    while cm.flow_info(f).unwrap().pending.get() < keep {
        cm.request_mtus(now, f, 64).unwrap();
        // A request may be granted at once (the shaper's credit).
        granted += serve_now(cm, now);
    }
    granted
}

/// Send, acknowledge and count every grant.
fn serve_now(cm: &mut CongestionManager, now: Instant) -> u64 {
    let mut granted = 0;
    while let Some(ev) = cm.poll_event() {
        if let Event::Grant { flow, bytes } = ev {
            granted += bytes.get();
            cm.notify(now, flow, bytes).unwrap();
            cm.update(now, flow, Feedback::acked(bytes.get(), RTT))
                .unwrap();
        }
    }
    granted
}

/// A manager whose one macroflow runs AIMD at a fixed window (its
/// maximum) with no pacing gain: the shaping rate is window / RTT once an
/// RTT sample is in. Aging is off; feedback acknowledges every grant.
fn fixed_rate(rate: Rate, slack: Duration) -> CongestionManager {
    let window = rate.bytes_in(RTT);
    let cfg = Config {
        mtu: Bytes(MTU),
        aging: Aging::Off,
        pacing_slack: slack,
        controller: ControllerConfig::Aimd(AimdConfig {
            initial_window: Some(window),
            max_window: window,
            pacing_gain_avoidance: (1, 1),
            ..AimdConfig::default()
        }),
        ..Config::default()
    };
    CongestionManager::new(cfg).unwrap()
}

/// Open a flow, and give its macroflow an RTT sample (and so its rate) at
/// time RTT.
fn open_and_sample(cm: &mut CongestionManager) -> FlowId {
    let f = common::open_flow(cm, "192.0.2.1:9");
    cm.request(Instant::ZERO, f).unwrap();
    while let Some(ev) = cm.poll_event() {
        if let Event::Grant { bytes, .. } = ev {
            cm.notify(Instant::ZERO, f, bytes).unwrap();
        }
    }
    cm.update(Instant::ZERO + RTT, f, Feedback::acked(MTU, RTT))
        .unwrap();
    f
}

/// One backlogged flow at `mbps` for `secs` simulated seconds with the
/// given slack and timer lateness.
fn run(mbps: u64, secs: u64, slack: Duration, late: Option<u64>) -> Run {
    let target = mbps * 1_000_000 / 8;
    let mut cm = fixed_rate(Rate::from_bytes_per_sec(target), slack);
    let f = open_and_sample(&mut cm);
    let mf = cm.macroflow_of(f).unwrap();
    let mut now = Instant::ZERO + RTT;
    let info = cm.macroflow_info(mf).unwrap();
    assert!(!info.slow_start, "fixed window: congestion avoidance");
    let rate = info.shaping_rate.unwrap();
    let r = rate.bytes_per_sec();
    assert_eq!(r, target, "the shaping rate is window / RTT");
    let depth = rate.bytes_in(Duration::from_millis(1)).get().max(2 * MTU);
    let lead = rate.bytes_in(slack).get();
    // Enough pending to cover any one wake-up's grants.
    let keep = depth + lead + 64 * MTU;
    let mut granted = serve(&mut cm, now, f, keep);
    let end = now + Duration::from_secs(secs);
    let mut late = Lateness(late);
    let mut wakeups = 0;
    loop {
        let t = cm.poll_timeout().expect("a backlogged flow has a timer") + late.next();
        if t >= end {
            break;
        }
        now = t;
        cm.handle_timeout(now);
        wakeups += 1;
        granted += serve(&mut cm, now, f, keep);
    }
    assert_eq!(
        cm.macroflow_info(mf).unwrap().shaping_rate,
        Some(rate),
        "the rate stayed put"
    );
    Run {
        rate: r,
        granted,
        secs,
        wakeups,
        depth,
        lead,
    }
}

fn slack(us: u64) -> Duration {
    Duration::from_micros(us)
}

/// The bytes granted over a run are rate × time within 1% (and within one
/// bucket, the slack's debt and one grant) for every rate and slack, with
/// the timer on time and up to 50 µs late: the slack moves grants earlier
/// by at most itself and never adds to the rate.
#[test]
fn long_run_rate_is_unchanged_by_the_pacing_slack() {
    for (mbps, secs) in RATES {
        for us in SLACKS_US {
            for late in [None, Some(0x9e37_79b9_7f4a_7c15)] {
                let run = run(mbps, secs, slack(us), late);
                let expect = run.rate * run.secs;
                let diff = run.granted.abs_diff(expect);
                assert!(
                    diff * 100 <= expect,
                    "{mbps} Mbit/s, slack {us} µs, late {late:?}: granted {} B, \
                     rate × time {expect} B",
                    run.granted
                );
                // tokens(start) - tokens(end): each in [-(lead + MTU), depth].
                let bound = run.depth + run.lead + 2 * MTU;
                assert!(
                    diff <= bound,
                    "{mbps} Mbit/s, slack {us} µs, late {late:?}: off by {diff} B > {bound} B"
                );
            }
        }
    }
}

/// With a slack, a wake-up releases every grant due within it: starting
/// out of debt (the timer is armed for the time the bucket is), it grants
/// until the debt exceeds rate × slack, at least `n = 1 + ⌊rate × slack /
/// MTU⌋` MTUs. So the timer fires at most once per `n` MTUs, on time or
/// late, and strictly less often than with no slack once `n ≥ 2`.
#[test]
fn the_pacing_slack_divides_timer_wakeups() {
    for (mbps, secs) in RATES {
        for late in [None, Some(0x2545_f491_4f6c_dd1d)] {
            let base = run(mbps, secs, Duration::ZERO, late);
            if late.is_none() {
                // On time with no slack: one MTU per wake-up (the bucket is
                // out of debt by less than one microsecond of rate), after
                // the bucket the run starts with.
                assert!(
                    base.wakeups + base.depth / MTU + 2 >= base.granted / MTU,
                    "{mbps} Mbit/s: {} wake-ups for {} B",
                    base.wakeups,
                    base.granted
                );
            }
            for us in SLACKS_US {
                let run = run(mbps, secs, slack(us), late);
                let n = 1 + run.lead / MTU;
                assert!(
                    run.wakeups <= run.granted / (n * MTU) + 2,
                    "{mbps} Mbit/s, slack {us} µs, late {late:?}: {} wake-ups for {} B, \
                     at least {n} MTU each",
                    run.wakeups,
                    run.granted
                );
                if n >= 2 {
                    assert!(
                        run.wakeups < base.wakeups,
                        "{mbps} Mbit/s, slack {us} µs, late {late:?}: {} wake-ups, {} with no slack",
                        run.wakeups,
                        base.wakeups
                    );
                }
            }
        }
    }
}

/// Slack zero is the plain token bucket: every grant of a backlogged flow
/// goes at its own due time, one MTU per wake-up, MTU / rate apart.
#[test]
fn zero_slack_releases_each_grant_at_its_due_time() {
    let rate = Rate::from_bytes_per_sec(146_000); // one MTU per 10 ms
    let mut cm = fixed_rate(rate, Duration::ZERO);
    let f = open_and_sample(&mut cm);
    let mut now = Instant::ZERO + RTT;
    let mf = cm.macroflow_of(f).unwrap();
    assert_eq!(cm.macroflow_info(mf).unwrap().shaping_rate, Some(rate));
    serve(&mut cm, now, f, 64 * MTU);
    let mut times = Vec::new();
    for _ in 0..200 {
        now = cm.poll_timeout().unwrap();
        cm.handle_timeout(now);
        let bytes = serve(&mut cm, now, f, 64 * MTU);
        assert_eq!(bytes, MTU, "one MTU per wake-up at {now}");
        times.push(now);
    }
    let gaps: Vec<u64> = times
        .windows(2)
        .skip(1)
        .map(|w| (w[1] - w[0]).as_micros())
        .collect();
    assert!(
        gaps.iter().all(|&g| g == 10_000),
        "grants exactly MTU / rate apart: {gaps:?}"
    );
    let credit = cm.macroflow_info(mf).unwrap().shaper_credit;
    assert_eq!(credit, -(MTU as i64), "one grant's debt, no more");
}
