//! Scenarios over a `[topology]` (transport-selection-middleware Fig 1),
//! ramping CBR sources and congestion-forcing proxies, and the `collapse`
//! and `voip-proxy` experiments' quick variants.

#![allow(clippy::unwrap_used)]

use cm_experiments::experiments::{self, Opts};
use cm_experiments::scenario::{Scenario, Transport};
use cm_experiments::simulate::run;

fn file(name: &str) -> String {
    let path = format!(
        "{}/../../experiments/scenarios/{name}.toml",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(path).unwrap()
}

fn short(name: &str, secs: f64) -> Scenario {
    let mut s = Scenario::from_toml(&file(name)).unwrap();
    s.duration = secs;
    s
}

#[test]
fn a_topology_scenario_round_trips_and_runs() {
    for name in ["collapse-udp", "collapse-cc", "voip-proxy-10-10-tfrc"] {
        let s = Scenario::from_toml(&file(name)).unwrap();
        assert!(s.topology.is_some() && s.bottleneck.is_absent());
        let text = s.to_toml().unwrap();
        assert!(!text.contains("[bottleneck]"), "{text}");
        let back = Scenario::from_toml(&text).unwrap();
        assert_eq!(back.to_toml().unwrap(), text);
        assert_eq!(back.topology, s.topology);
        assert_eq!(back.flows[0].maxq, s.flows[0].maxq);
        assert_eq!(back.flows[0].controller, s.flows[0].controller);
    }
    let s = Scenario::from_toml(&file("collapse-udp")).unwrap();
    assert_eq!(s.flows[0].ramp_bps, Some(4907));

    let r = run(&short("collapse-udp", 10.0)).unwrap();
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    // Ten links, both directions named.
    assert_eq!(r.links.len(), 10);
    assert!(r.links.iter().any(|l| l.name == "n3->n5"));
    for f in &r.flows {
        assert_eq!(f.transport, Transport::Cbr);
        assert!(f.bytes_delivered > 0, "{f:?}");
        assert_eq!(f.per_second_bytes.len(), 10, "{f:?}");
        let d = f.one_way_delay_s.unwrap();
        // At least the three links' propagation (15 ms).
        assert!(d >= 0.015, "{f:?}");
    }
    // The ramp: the upper branch gets more in its tenth second than in its first.
    let up = &r.flows[0].per_second_bytes;
    assert!(up[9] > 4 * up[0], "{up:?}");
    // n5's link carries at most 10 kbit/s: the lower branch's delay is
    // its full queue's (50 packets of 120 bytes: 4.8 s) once it fills.
    assert!(r.flows[1].bytes_delivered * 8 <= 10 * 10_000);
}

#[test]
fn topology_scenarios_refuse_what_they_cannot_mean() {
    let text = file("collapse-udp");
    let both = format!("{text}\n[bottleneck]\nrate_bps = 1_000_000\ndelay_ms = 10\n");
    let e = Scenario::from_toml(&both).unwrap_err().to_string();
    assert!(e.contains("not both"), "{e}");
    let access = format!("{text}\n[access]\nrate_bps = 10_000_000\ndelay_ms = 1\n");
    let e = Scenario::from_toml(&access).unwrap_err().to_string();
    assert!(e.contains("[access]"), "{e}");

    let e = Scenario::from_toml(&text.replacen("dst = \"n4\"", "dst = \"n9\"", 1))
        .unwrap_err()
        .to_string();
    assert!(e.contains("\"n9\"") && e.contains("n4"), "{e}");
    let e = Scenario::from_toml(&text.replacen("host = \"n0\"", "host = \"n2\"", 1))
        .unwrap_err()
        .to_string();
    assert!(e.contains("router"), "{e}");

    let bad_keys = [
        ("ramp_every_s = 0.5", "ramp_every_s = 0.0"),
        ("ramp_every_s = 0.5\n", ""),
        ("transport = \"cbr\"", "transport = \"cbr\"\nmaxq = 3"),
        ("transport = \"cbr\"", "transport = \"newreno\""),
    ];
    for (from, to) in bad_keys {
        let t = text.replacen(from, to, 1);
        assert!(Scenario::from_toml(&t).is_err(), "{to}");
    }
    let cc = file("collapse-cc");
    for (from, to) in [
        ("drop = \"head\"", "drop = \"sideways\""),
        ("maxq = 1", "maxq = 0"),
    ] {
        let e = Scenario::from_toml(&cc.replacen(from, to, 1)).unwrap_err();
        assert!(e.to_string().contains("upper"), "{e}");
    }
    let no_rate = cc.replacen("rate_bps = 4907\n", "", 1);
    assert!(Scenario::from_toml(&no_rate).is_err());

    let s = Scenario::from_toml(&text).unwrap();
    let e = cm_experiments::ns2::tcl::script(&s)
        .unwrap_err()
        .to_string();
    assert!(e.contains("topology"), "{e}");
}

#[test]
fn proxies_drop_at_their_queue_and_fill_the_bottleneck() {
    let s = short("voip-proxy-10-10-tfrc", 20.0);
    let r = run(&s).unwrap();
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    let (mut offered, mut dropped, mut net_drops, mut net_sent) = (0, 0, 0, 0);
    for f in &r.flows {
        let p = f.proxy.as_ref().unwrap();
        // At most one packet (MAXQ) still waits at the end.
        assert!(p.offered - p.sent - p.dropped <= 1, "{p:?}");
        offered += p.offered;
        dropped += p.dropped;
        net_drops += f.dropped_packets;
        net_sent += f.sent_packets;
        assert!(f.one_way_delay_s.is_some(), "{f:?}");
    }
    // Twenty senders offer 1.9 Mbit/s; the network carries 0.3: most
    // packets die at the proxies, few in the network.
    assert!(dropped * 2 > offered, "{dropped} of {offered}");
    assert!(net_drops * 50 < net_sent, "{net_drops} of {net_sent}");
    let wire: u64 = r
        .flows
        .iter()
        .map(|f| f.bytes_delivered / 92 * (92 + 16 + 28))
        .sum();
    let kbps = wire as f64 * 8.0 / 20.0 / 1e3;
    assert!((240.0..=310.0).contains(&kbps), "{kbps} kbit/s");
}

const QUICK: Opts = Opts {
    quick: true,
    quiet: true,
    threads: 2,
};

#[test]
fn collapse_quick_passes_its_checks() {
    let o = experiments::run("collapse", &QUICK).unwrap();
    for c in &o.checks {
        assert!(c.pass, "{} = {} ({})", c.metric, c.ours, c.accept);
    }
    assert!(o.csv.lines().count() > 100);
}

#[test]
fn voip_proxy_quick_keeps_the_total_at_capacity_with_proxies() {
    let o = experiments::run("voip-proxy", &QUICK).unwrap();
    let proxied: Vec<_> = o
        .checks
        .iter()
        .filter(|c| c.metric.starts_with("proxy_share"))
        .collect();
    assert_eq!(proxied.len(), 2);
    for c in proxied {
        assert!(c.pass, "{} = {}", c.metric, c.ours);
    }
    // The UDP fall is measured and reported (it depends on DropTail's
    // phases: see the experiment's notes).
    assert!(o.metrics["udp_fall"].as_f64().unwrap().is_finite());
    assert_eq!(o.json()["paper"]["table1"].as_array().unwrap().len(), 5);
}
