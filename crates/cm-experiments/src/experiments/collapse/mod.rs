//! `collapse` — transport-selection-middleware §3, Figs 2–3: congestion
//! collapse on the Fig 1 network. Two CBR sources, n0→n4 and n1→n5, start
//! at 800 B/s and add 800 B/s twice a second for 100 s. As plain UDP the
//! lower source, whose packets mostly die at the 10 kbit/s n3→n5 link,
//! takes more and more of the shared 0.3 Mbit/s n2→n3 link from the upper
//! one: the throughput at n4 peaks and then falls, and the network ends up
//! carrying little. With congestion control (the same ramping application
//! behind a congestion-forcing proxy whose CM runs AIMD, the paper's
//! "TCP-like" DCCP) each source sends only what its path carries, and the
//! total stays near the bottleneck's 0.3 Mbit/s.
//!
//! The quick variant is the full run: two 100 s runs take a fraction of
//! a second.
//!
//! [`voip`] is §4.3's VoIP-proxy experiment on the same network.

use std::fmt::Write as _;

use serde_json::json;

use super::{ExperimentError, Opts, Output, check, progress};
use crate::plot::{Plot, Series, Style};
use crate::progress::par_map;
use crate::simulate::run as run_scenario;

mod net;
pub mod voip;

/// §3.1's 800 B/s, counted on the wire (ns-2 counts whole packets), as
/// the payload rate of 92-byte payloads in 120-byte packets (rounded to
/// the bit/s: 800.04 B/s on the wire).
const WIRE_800_BPS: u64 = (800 * 8 * net::PAYLOAD as u64 + WIRE as u64 / 2) / WIRE as u64;
/// Bytes on the wire of a UDP packet.
const WIRE: u32 = net::PAYLOAD + net::UDP_IP;
/// §3.1: the sources start at 800 B/s ...
const START_BPS: u64 = WIRE_800_BPS;
/// ... and add 800 B/s ...
const RAMP_BPS: u64 = WIRE_800_BPS;
/// ... twice a second.
const RAMP_EVERY_S: f64 = 0.5;
/// The paper's run, s.
const SECS: f64 = 100.0;
/// After this second the paper sees the collapse complete.
const LATE_FROM: usize = 81;
/// The congestion-controlled total is averaged from here on: by then the
/// ramping offer (800 B/s + 1600 B/s per second per source) exceeds the
/// bottleneck.
const CC_FROM: usize = 30;

fn scenario(cc: bool) -> Result<crate::scenario::Scenario, String> {
    let mut flows = Vec::new();
    for (name, host, dst) in net::BRANCHES {
        let mut f = net::app(name, host, dst, START_BPS, cc.then_some("aimd"));
        f.ramp_bps = Some(RAMP_BPS);
        f.ramp_every_s = Some(RAMP_EVERY_S);
        flows.push(f);
    }
    let name = if cc { "collapse-cc" } else { "collapse-udp" };
    net::scenario(name, SECS, flows)
}

fn mean(xs: &[f64]) -> f64 {
    if xs.is_empty() {
        0.0
    } else {
        xs.iter().sum::<f64>() / xs.len() as f64
    }
}

/// Runs both halves (plain UDP, then through AIMD proxies).
pub fn run(opts: &Opts) -> Result<Output, ExperimentError> {
    let secs = SECS as usize;
    let scenarios = [scenario(false), scenario(true)]
        .into_iter()
        .collect::<Result<Vec<_>, _>>()
        .map_err(ExperimentError::Setup)?;
    let bar = progress("collapse", scenarios.len(), opts);
    let results = par_map(&scenarios, opts.threads, &bar, run_scenario);
    let mut series = Vec::new();
    for (s, r) in scenarios.iter().zip(results) {
        let r = r?;
        let n4 = net::per_second(&r, s, "n4", secs);
        let n5 = net::per_second(&r, s, "n5", secs);
        let total: Vec<f64> = n4.iter().zip(&n5).map(|(a, b)| a + b).collect();
        series.push((n4, n5, total, r));
    }
    let (udp, cc) = (&series[0], &series[1]);
    let mut csv = String::from(
        "second,udp_n4_Bps,udp_n5_Bps,udp_total_Bps,cc_n4_Bps,cc_n5_Bps,cc_total_Bps\n",
    );
    for i in 0..secs {
        let _ = writeln!(
            csv,
            "{i},{:.0},{:.0},{:.0},{:.0},{:.0},{:.0}",
            udp.0[i], udp.1[i], udp.2[i], cc.0[i], cc.1[i], cc.2[i]
        );
    }
    let (peak_s, peak) = udp
        .0
        .iter()
        .enumerate()
        .fold((0, 0.0), |b, (i, &v)| if v > b.1 { (i, v) } else { b });
    let peak_total = udp.2.iter().copied().fold(0.0, f64::max);
    // From this second on n4 receives nothing (the paper: from 81 s).
    let n4_zero_s = udp.0.iter().rposition(|&b| b > 0.0).map_or(0, |i| i + 1);
    let udp_late = mean(&udp.2[LATE_FROM..]);
    let cc_late = mean(&cc.2[CC_FROM..]);
    let topo = net::fig1().map_err(ExperimentError::Setup)?;
    let capacity = net::capacity_bps(&topo, f64::INFINITY, f64::INFINITY);
    let collapse_ratio = if peak_total > 0.0 {
        udp_late / peak_total
    } else {
        f64::NAN
    };
    let cc_share = cc_late * 8.0 / capacity;
    let proxy = |i: usize| cc.3.flows[i].proxy.clone();
    let summary = vec![
        format!(
            "udp: n4 peak {peak:.0} B/s at {peak_s} s, total peak {peak_total:.0} B/s, total from {LATE_FROM} s {udp_late:.0} B/s ({:.1} kbit/s)",
            udp_late * 8.0 / 1e3
        ),
        format!(
            "cc (aimd proxies): total from {CC_FROM} s {cc_late:.0} B/s ({:.1} kbit/s) = {cc_share:.2} of {:.0} kbit/s; n4 {:.0} B/s, n5 {:.0} B/s",
            cc_late * 8.0 / 1e3,
            capacity / 1e3,
            mean(&cc.0[CC_FROM..]),
            mean(&cc.1[CC_FROM..]),
        ),
        format!(
            "collapse ratio (udp total from {LATE_FROM} s / udp peak total) {collapse_ratio:.2}"
        ),
    ];
    let pts = |v: &[f64]| -> Vec<(f64, f64)> {
        v.iter().enumerate().map(|(i, &y)| (i as f64, y)).collect()
    };
    let line = |label: &str, v: &[f64]| Series {
        label: label.into(),
        points: pts(v),
        style: Style::Line,
    };
    let proxies: Vec<_> = (0..2).map(proxy).collect();
    Ok(Output {
        name: "collapse".into(),
        csv,
        plot: Plot {
            title: "Congestion collapse on Fig 1 (transport-selection-middleware Figs 2-3)".into(),
            x_label: "time (s)".into(),
            y_label: "throughput (bytes/s on the wire)".into(),
            series: vec![
                line("UDP n4", &udp.0),
                line("UDP n5", &udp.1),
                line("UDP total", &udp.2),
                line("CC n4", &cc.0),
                line("CC n5", &cc.1),
                line("CC total", &cc.2),
            ],
        },
        metrics: json!({
            "udp_n4_peak_Bps": peak, "udp_n4_peak_s": peak_s, "udp_total_peak_Bps": peak_total,
            "udp_total_late_Bps": udp_late, "udp_n4_zero_from_s": n4_zero_s, "udp_total_late_kbps": udp_late * 8.0 / 1e3,
            "collapse_ratio": collapse_ratio,
            "cc_total_Bps": cc_late, "cc_total_kbps": cc_late * 8.0 / 1e3, "cc_share": cc_share,
            "capacity_bps": capacity,
            "cc_proxies": proxies,
            "udp_loss_in_network": udp.3.flows.iter().map(|f| f.loss_rate).collect::<Vec<_>>(),
            "cc_loss_in_network": cc.3.flows.iter().map(|f| f.loss_rate).collect::<Vec<_>>(),
            "late_from_s": LATE_FROM, "cc_from_s": CC_FROM,
        }),
        paper: json!({
            "claim": "Two ramping UDP/CBR sources collapse the Fig 1 network; TCP-like congestion control keeps it near the 0.3 Mbit/s bottleneck (§3.1-3.2, Figs 2-3)",
            "udp_n4_peak_Bps": 27_800, "udp_n4_peak_s": 28,
            "udp_total_late_kbps": 10, "late_from_s": 81, "udp_n4_zero_from_s": 81,
            "cc_total_kbps": 300,
        }),
        checks: vec![
            check(
                "collapse_ratio",
                collapse_ratio,
                "≈ 0.04 (about 10 kbit/s after 81 s, from a peak above 27.8 kB/s)",
                "<= 0.5 (the UDP total falls to at most half its peak)",
                collapse_ratio <= 0.5,
            ),
            check(
                "cc_share",
                cc_share,
                "≈ 1 (total near the 0.3 Mbit/s bottleneck)",
                ">= 0.85 of what the network can carry",
                cc_share >= 0.85,
            ),
        ],
        notes: vec![
            "Network: experiments/topologies/collapse-fig1.toml (the paper's Fig 1; DropTail, 50 packets per link; 5 ms per link, which the paper does not give). Sources: §3.1's 800 B/s plus 800 B/s every 0.5 s, counted on the wire, in 120-byte packets (§4.3.1's ns-2 packetSize_, which is the whole packet; §3 gives none): 92 bytes of payload plus IP and UDP headers. Throughput is bytes on the wire received per second at n4 and n5 (ns-2 counts whole packets).".into(),
            "The congestion-controlled half is not DCCP: the same ramping application sends through a congestion-forcing proxy (MAXQ 1, drop-from-head) whose host's CM runs AIMD over CC-UDP acks, one ack per datagram; CC-UDP's 16-byte header makes each datagram 136 bytes on the wire. The CM's MTU is one datagram (108 bytes), so AIMD counts in packets as ns-2's TCP-like DCCP does.".into(),
            format!(
                "Ours beside the paper's: the UDP throughput at n4 peaks at {peak:.0} B/s at {peak_s} s (paper: 27,800 B/s at 28 s); after that the lower source, whose packets reach n2 at up to 1 Mbit/s, takes the shared link, n4 receives nothing from {n4_zero_s} s on (paper: from 81 s), and from {LATE_FROM} s the total is {:.1} kbit/s (paper: about 10 kbit/s from 81 s), the 10 kbit/s n3-n5 link's worth. With the AIMD proxies the total from {CC_FROM} s is {:.1} kbit/s.",
                udp_late * 8.0 / 1e3,
                cc_late * 8.0 / 1e3
            ),
            format!("What the network can carry is the max-flow of the demands: min(n0's 0.3 Mbit/s, n4's 1 Mbit/s) + min(n1's 1 Mbit/s, n5's 0.01 Mbit/s), at most the shared 0.3 Mbit/s = {:.0} kbit/s once both sources offer more than that (the CC total is averaged from {CC_FROM} s, when they do).", capacity / 1e3),
        ],
        summary,
    })
}
