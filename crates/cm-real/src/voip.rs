//! `real-collapse` and `real-voip-proxy`: the transport-selection
//! middleware paper's congestion-collapse runs (§3, Figs 2–3) and its
//! VoIP-proxy runs (§4.3, Figs 6–7, Table 1) on the real Fig 1 topology
//! (`experiments/topologies/collapse-fig1.toml`, built by
//! [`cm_netem::Network`]), with the sources plain UDP or forced through
//! `cm proxy` pairs ([`crate::forced`]).
//!
//! Throughput is counted at the sinks as the bytes that crossed the
//! destination links, as the paper measures it: for a proxied flow that is
//! the application's datagram plus the channel's 16-byte CC-UDP header
//! (the paper's TFRC proxy packets are 120 bytes on the wire, header
//! included); goodput (the application's bytes) is reported beside it.

use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use cm_experiments::experiments::{Check, Output};
use cm_experiments::plot::{Plot, Series, Style};
use cm_experiments::progress::Progress;
use cm_netem::Network;
use cm_transport::maxq::Overflow;
use serde_json::json;

use crate::RealOpts;
use crate::collapse::{CollapseConfig, fig1};
use crate::error::Result;
use crate::forced::{Flow, FlowResult, ProxyCfg, cbr, run_flows};

/// The channel's own header on every proxied datagram (CC-UDP).
const CHANNEL_HEADER: u64 = 16;
/// The n2 → n3 bottleneck, bytes/s.
const BOTTLENECK: f64 = 300_000.0 / 8.0;
/// The n3 → n5 link, bytes/s.
const LOWER_SINK: f64 = 10_000.0 / 8.0;
/// The n0 → n2 link, bytes/s.
const UPPER_ACCESS: f64 = 300_000.0 / 8.0;
/// The collapse sources' size spread, bytes (see [`run_collapse`]).
const SIZE_SPREAD: usize = 20;
/// VoIP: 120-byte packets at 100 per second (§4.3.1).
const VOIP_BYTES: usize = 120;
const VOIP_PPS: f64 = 100.0;

fn proxy(controller: &str, maxq: usize) -> Option<ProxyCfg> {
    Some(ProxyCfg {
        controller: controller.parse().ok()?,
        maxq,
        overflow: Overflow::DropHead,
    })
}

/// Per-second bytes on the destination links (channel header included for
/// proxied flows).
fn link_bytes(f: &FlowResult) -> Vec<f64> {
    let hdr = if f.proxy.is_some() { CHANNEL_HEADER } else { 0 };
    f.received
        .iter()
        .zip(&f.packets)
        .map(|(b, p)| (b + hdr * p) as f64)
        .collect()
}

fn total_series(flows: &[FlowResult]) -> Vec<f64> {
    let n = flows.iter().map(|f| f.received.len()).max().unwrap_or(0);
    let mut t = vec![0.0; n];
    for f in flows {
        for (i, b) in link_bytes(f).into_iter().enumerate() {
            t[i] += b;
        }
    }
    t
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len().max(1) as f64
}

/// What the network can carry for these demands (bytes/s): the lower
/// branch is held to n5's link, the upper to its access link, and both
/// share n2 → n3.
pub fn capacity(upper_demand: f64, lower_demand: f64) -> f64 {
    let lower = lower_demand.min(LOWER_SINK);
    let upper = upper_demand.min(UPPER_ACCESS);
    (upper + lower).min(BOTTLENECK)
}

/// `real-collapse`: two ramping sources, plain UDP, then through proxies
/// with the CM's AIMD (the paper's §3.2 used DCCP's TCP-like CCID).
pub fn run_collapse(opts: &RealOpts) -> Result<Output> {
    let secs = if opts.quick { 40 } else { 90 };
    // Sizes drawn from 100–140 B (mean 120): with every datagram 120 B, the
    // n0 → n2 link (as fast as n2 → n3) delivers the upper flow in a fixed
    // phase to the places n2 → n3's full DropTail queue frees, and which
    // branch that phase locks out depends on the timers of the machine
    // (Floyd & Jacobson's phase effects). Varying sizes let the phase drift.
    let ramp = CollapseConfig {
        duration: Duration::from_secs(secs),
        size_spread: SIZE_SPREAD,
        ..CollapseConfig::default()
    };
    let net = Network::build(&fig1()?)?;
    let stop = Arc::new(AtomicBool::new(false));
    let bar = Progress::new("real-collapse", 2, opts.quiet);
    let mut runs = Vec::new();
    for cc in [None, proxy("aimd", 1)] {
        let flows: Vec<Flow> = [("n0", "n4"), ("n1", "n5")]
            .iter()
            .map(|(a, b)| Flow {
                from: (*a).into(),
                to: (*b).into(),
                rate: ramp.clone(),
                proxy: cc.clone(),
            })
            .collect();
        runs.push(run_flows(&net, &flows, &stop)?);
        bar.tick();
    }
    net.teardown()?;
    let s = secs as usize;
    let udp = total_series(&runs[0]);
    let ccs = total_series(&runs[1]);
    let udp_peak = udp.iter().take(s).copied().fold(0.0, f64::max);
    let udp_final = mean(&udp[s.saturating_sub(10).min(udp.len())..s.min(udp.len())]);
    let cc_mean = mean(&ccs[10.min(ccs.len())..s.min(ccs.len())]);
    let collapse_ratio = udp_final / udp_peak.max(1.0);
    let udp_useful = udp_final / BOTTLENECK;
    let cc_share = cc_mean / BOTTLENECK;
    let mut csv = String::from("case,t_s,n4_Bps,n5_Bps,total_Bps\n");
    for (label, r) in [("udp", &runs[0]), ("cc", &runs[1])] {
        let (a, b) = (link_bytes(&r[0]), link_bytes(&r[1]));
        for t in 0..a.len().max(b.len()) {
            let (x, y) = (
                a.get(t).copied().unwrap_or(0.0),
                b.get(t).copied().unwrap_or(0.0),
            );
            let _ = writeln!(csv, "{label},{t},{x:.0},{y:.0},{:.0}", x + y);
        }
    }
    let series = [("UDP total", &udp), ("congestion controlled total", &ccs)]
        .into_iter()
        .map(|(l, v)| Series {
            label: l.into(),
            points: v
                .iter()
                .enumerate()
                .map(|(t, b)| (t as f64, b / 1000.0))
                .collect(),
            style: Style::Line,
        })
        .chain(
            [("UDP at n4", &runs[0][0]), ("UDP at n5", &runs[0][1])].map(|(l, f)| Series {
                label: l.into(),
                points: link_bytes(f)
                    .iter()
                    .enumerate()
                    .map(|(t, b)| (t as f64, b / 1000.0))
                    .collect(),
                style: Style::Line,
            }),
        )
        .collect();
    Ok(Output {
        name: "real-collapse".into(),
        csv,
        plot: Plot {
            title: "Congestion collapse on the Fig 1 topology: two ramping sources, UDP vs through CM proxies".into(),
            x_label: "time (s)".into(),
            y_label: "throughput at the sinks (kB/s)".into(),
            series,
        },
        metrics: json!({
            "udp_peak_Bps": udp_peak, "udp_final_Bps": udp_final, "udp_collapse_ratio": collapse_ratio,
            "udp_final_to_bottleneck": udp_useful, "size_spread_bytes": SIZE_SPREAD,
            "cc_mean_Bps": cc_mean, "cc_to_bottleneck": cc_share, "seconds": secs,
            "proxies": [runs[1][0].proxy, runs[1][1].proxy],
        }),
        paper: json!({"udp_peak_Bps": 27_800, "udp_after_81s_bps": 10_000, "cc": "near the 0.3 Mbit/s bottleneck throughout (Fig 3)"}),
        checks: vec![
            Check {
                metric: "udp_final_to_bottleneck".into(),
                ours: udp_useful,
                paper: "1.25 kB/s of 37.5 after 81 s (Fig 2)".into(),
                accept: "<= 0.5".into(),
                pass: udp_useful <= 0.5,
            },
            Check {
                metric: "cc_to_bottleneck".into(),
                ours: cc_share,
                paper: "≈ 1 (Fig 3)".into(),
                accept: ">= 0.85".into(),
                pass: cc_share >= 0.85,
            },
        ],
        notes: vec![
            format!("Fig 1 topology (experiments/topologies/collapse-fig1.toml) on cm-netem: one namespace per node, tbf + 51-packet pfifo per link direction, 5 ms per link. Sources ramp from 800 B/s by 800 B/s twice a second for {secs} s in datagrams of 120 ± {SIZE_SPREAD} bytes (IP size, uniform), so that no DropTail phase lock decides which branch the full n2 → n3 queue serves."),
            "Congestion controlled: each source sends to its own `cm proxy` ingress (AIMD, MAXQ 1, drop-from-head) whose egress sits at the sink's node; the paper's §3.2 used DCCP's TCP-like congestion control in the sources themselves. Throughput counts the bytes on the destination links (channel header included for proxied flows).".into(),
            "udp_final is the mean over the last 10 s of sending; udp_peak the highest 1 s total; cc_mean the mean total from 10 s to the end of sending. The check is udp_final against the bottleneck (the paper's 1.25 of 37.5 kB/s is a phase lock-out of the upper branch; with the phase drifting, DropTail shares n2 → n3 in proportion to arrivals and the upper branch keeps a shrinking part).".into(),
        ],
        summary: vec![format!(
            "UDP: peak {:.1} kB/s, last 10 s {:.1} kB/s ({udp_useful:.2} of the bottleneck, {collapse_ratio:.2} of the peak); through proxies: {:.1} kB/s = {cc_share:.2} of the 37.5 kB/s bottleneck",
            udp_peak / 1e3, udp_final / 1e3, cc_mean / 1e3
        )],
    })
}

/// The paper's Table 1 (upper, lower, UDP delay upper/lower, VoIP delay
/// upper/lower, seconds).
pub const TABLE1: [(usize, usize, f64, f64, f64, f64); 5] = [
    (1, 1, 0.029, 4.787, 0.031, 4.203),
    (1, 3, 0.063, 4.873, 0.031, 4.314),
    (3, 1, 0.070, 4.814, 0.068, 4.404),
    (5, 5, 0.098, 4.864, 0.106, 4.690),
    (10, 10, 0.066, 4.888, 0.163, 5.775),
];

struct Point {
    upper: usize,
    lower: usize,
    proxied: bool,
    maxq: usize,
    total: f64,
    branch: [f64; 2],
    goodput: f64,
    capacity: f64,
    delay: [Option<f64>; 2],
    dropped_at_proxy: u64,
}

fn voip_point(
    net: &Network,
    upper: usize,
    lower: usize,
    maxq: Option<usize>,
    secs: u64,
) -> Result<Point> {
    let p = maxq.and_then(|q| proxy("tfrc", q));
    let mut flows = Vec::new();
    for _ in 0..upper {
        flows.push(cbr("n0", "n4", VOIP_BYTES, VOIP_PPS, secs, p.clone()));
    }
    for _ in 0..lower {
        flows.push(cbr("n1", "n5", VOIP_BYTES, VOIP_PPS, secs, p.clone()));
    }
    let r = run_flows(net, &flows, &Arc::new(AtomicBool::new(false)))?;
    let s = secs as usize;
    let from = 5.min(s);
    let totals = total_series(&r);
    let total = mean(&totals[from..s.min(totals.len())]);
    let branch_rate = |fs: &[FlowResult]| -> f64 {
        fs.iter()
            .map(|f| {
                let b = link_bytes(f);
                mean(&b[from.min(b.len())..s.min(b.len())])
            })
            .sum()
    };
    let branch = [branch_rate(&r[..upper]), branch_rate(&r[upper..])];
    let goodput: f64 = r.iter().map(|f| f.rate(from, s)).sum();
    let branch_delay = |range: std::ops::Range<usize>| {
        let fs = &r[range];
        let p: u64 = fs.iter().map(|f| f.packets.iter().sum::<u64>()).sum();
        (p > 0).then(|| {
            fs.iter()
                .map(|f| f.delay_ns.iter().sum::<u64>())
                .sum::<u64>() as f64
                / p as f64
                / 1e9
        })
    };
    let demand = VOIP_BYTES as f64 * VOIP_PPS;
    Ok(Point {
        upper,
        lower,
        proxied: maxq.is_some(),
        maxq: maxq.unwrap_or(0),
        total,
        branch,
        goodput,
        capacity: capacity(upper as f64 * demand, lower as f64 * demand),
        delay: [branch_delay(0..upper), branch_delay(upper..upper + lower)],
        dropped_at_proxy: r
            .iter()
            .filter_map(|f| f.proxy.as_ref())
            .map(|p| p.dropped_at_proxy)
            .sum(),
    })
}

/// `real-voip-proxy`: VoIP senders on both branches, with and without
/// proxies (TFRC, MAXQ 1), and the MAXQ pretest.
pub fn run_voip(opts: &RealOpts) -> Result<Output> {
    let (secs, counts, pretest): (u64, &[(usize, usize)], &[usize]) = if opts.quick {
        (20, &[(1, 1), (10, 10)], &[])
    } else {
        (
            100,
            &[(1, 1), (1, 3), (3, 1), (5, 5), (10, 10)],
            &[1, 10, 25],
        )
    };
    let net = Network::build(&fig1()?)?;
    let bar = Progress::new(
        "real-voip-proxy",
        counts.len() * 2 + pretest.len(),
        opts.quiet,
    );
    let mut points = Vec::new();
    for &(u, l) in counts {
        for maxq in [None, Some(1)] {
            points.push(voip_point(&net, u, l, maxq, secs)?);
            bar.tick();
        }
    }
    for &q in pretest {
        points.push(voip_point(&net, 3, 3, Some(q), secs)?);
        bar.tick();
    }
    net.teardown()?;
    let main: Vec<&Point> = points.iter().filter(|p| p.maxq <= 1).collect();
    let with: Vec<&Point> = main.iter().copied().filter(|p| p.proxied).collect();
    let without: Vec<&Point> = main.iter().copied().filter(|p| !p.proxied).collect();
    let worst_with = with
        .iter()
        .map(|p| (p.total / p.capacity - 1.0).abs())
        .fold(0.0, f64::max);
    let fall = match (without.first(), without.last()) {
        (Some(a), Some(b)) => 1.0 - b.total / a.total.max(1.0),
        _ => f64::NAN,
    };
    let mut csv = String::from(
        "upper,lower,proxied,maxq,total_Bps,upper_Bps,lower_Bps,goodput_Bps,capacity_Bps,delay_upper_s,delay_lower_s,dropped_at_proxy\n",
    );
    let mut rows = Vec::new();
    for p in &points {
        let d = |x: Option<f64>| x.map_or(String::new(), |v| format!("{v:.3}"));
        let _ = writeln!(
            csv,
            "{},{},{},{},{:.0},{:.0},{:.0},{:.0},{:.0},{},{},{}",
            p.upper,
            p.lower,
            p.proxied,
            p.maxq,
            p.total,
            p.branch[0],
            p.branch[1],
            p.goodput,
            p.capacity,
            d(p.delay[0]),
            d(p.delay[1]),
            p.dropped_at_proxy
        );
        let paper = TABLE1
            .iter()
            .find(|t| t.0 == p.upper && t.1 == p.lower)
            .map(|t| if p.proxied { [t.4, t.5] } else { [t.2, t.3] });
        rows.push(json!({
            "upper": p.upper, "lower": p.lower, "proxied": p.proxied, "maxq": p.maxq,
            "total_Bps": p.total, "branch_Bps": p.branch, "goodput_Bps": p.goodput, "capacity_Bps": p.capacity,
            "delay_s": p.delay, "paper_delay_s": paper, "dropped_at_proxy": p.dropped_at_proxy,
        }));
    }
    let series = [(true, "with proxies"), (false, "without")]
        .into_iter()
        .map(|(px, l)| Series {
            label: l.into(),
            points: main
                .iter()
                .filter(|p| p.proxied == px)
                .map(|p| ((p.upper + p.lower) as f64, p.total / 1000.0))
                .collect(),
            style: Style::Line,
        })
        .collect();
    Ok(Output {
        name: "real-voip-proxy".into(),
        csv,
        plot: Plot {
            title: "VoIP senders on the Fig 1 topology, with and without CM proxies (TFRC, MAXQ 1)".into(),
            x_label: "senders (upper + lower)".into(),
            y_label: "throughput at n4 + n5 (kB/s)".into(),
            series,
        },
        metrics: json!({
            "points": rows, "seconds": secs,
            "with_proxies_worst_off_capacity": worst_with,
            "without_fall_1x1_to_10x10": fall,
        }),
        paper: json!({"with_proxies_total_Bps": 35_000, "table1": TABLE1.iter().map(|t| json!({"upper": t.0, "lower": t.1, "udp": [t.2, t.3], "voip": [t.4, t.5]})).collect::<Vec<_>>()}),
        checks: vec![
            Check {
                metric: "with_proxies_worst_off_capacity".into(),
                ours: worst_with,
                paper: "≈ 35 kB/s at every count (Fig 7)".into(),
                accept: "<= 0.15".into(),
                pass: worst_with <= 0.15,
            },
            Check {
                metric: "without_fall_1x1_to_10x10".into(),
                ours: fall,
                paper: "falls as senders are added (Fig 7)".into(),
                accept: ">= 0.30".into(),
                pass: fall >= 0.30,
            },
        ],
        notes: vec![
            format!("Each sender sends 120-byte datagrams (IP size) at 100 per second for {secs} s, from n0 (upper branch, to n4) or n1 (lower, to n5); totals are means from 5 s to the end of sending, counted on the destination links (channel header included with proxies)."),
            "With proxies each sender has its own `cm proxy` pair (its own embedded CM, as the paper's TFRC agents are separate): ingress at the sender's node (TFRC, MAXQ 1, drop-from-head), egress at the sink's node.".into(),
            "capacity is what the network can carry for the offered load: the lower branch is held to n5's 10 kbit/s link, the upper to its 0.3 Mbit/s access link, both share the 0.3 Mbit/s n2 → n3 link. At (1,1) that is 13.25 kB/s, not the paper's 35 kB/s: two 12 kB/s senders cannot fill the bottleneck.".into(),
        ],
        summary: main
            .iter()
            .map(|p| {
                format!(
                    "({},{}) {}: {:.1} kB/s of {:.1} possible, delay upper {} lower {}, dropped at proxies {}",
                    p.upper,
                    p.lower,
                    if p.proxied { "proxies" } else { "UDP" },
                    p.total / 1e3,
                    p.capacity / 1e3,
                    p.delay[0].map_or("-".into(), |d| format!("{d:.3} s")),
                    p.delay[1].map_or("-".into(), |d| format!("{d:.3} s")),
                    p.dropped_at_proxy
                )
            })
            .collect(),
    })
}
