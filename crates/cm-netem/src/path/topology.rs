//! The topology of a path: its namespaces, veths, addresses, routes, the
//! delay box's policy routing and the `tbf` bottleneck.

use std::net::Ipv4Addr;

use crate::error::{BuildStep, NetemError, Result};

use super::{DELAYBOX_TABLE, HOST_IF, Node, Path, ROUTER_RCV_IF, ROUTER_SND_IF};
use crate::delaybox::{DelayBox, TUN_FORWARD, TUN_REVERSE};
use crate::netns::run;

/// `tbf` burst for a rate: a couple of MTUs or 1 ms of tokens, whichever is larger.
pub fn tbf_burst(rate_bps: u64) -> u64 {
    (rate_bps / 8 / 1000).max(3000)
}
impl Path {
    pub(super) fn setup(&self, fail_at: Option<BuildStep>) -> Result<()> {
        let fail = |s: BuildStep| s.inject_if(fail_at);
        let [snd, rtr, rcv] = self.names.clone();
        for ns in &self.names {
            run("ip", &["netns", "add", ns])?;
            self.lock().created.push(ns.clone());
            run("ip", &["-n", ns, "link", "set", "lo", "up"])?;
        }
        // Router: forward IPv4, no reverse-path filtering (packets from the delay box
        // come in on a TUN the reverse route does not point at), no redirects, and no
        // IPv6 (so the delay box carries only what the hosts send, no autoconf chatter).
        // Set before any device exists so every device inherits the defaults.
        for (key, value) in [
            ("net.ipv6.conf.all.disable_ipv6", "1"),
            ("net.ipv6.conf.default.disable_ipv6", "1"),
            ("net.ipv4.conf.all.rp_filter", "0"),
            ("net.ipv4.conf.default.rp_filter", "0"),
            ("net.ipv4.conf.all.send_redirects", "0"),
            ("net.ipv4.conf.default.send_redirects", "0"),
            ("net.ipv4.ip_forward", "1"),
        ] {
            self.sysctl(Node::Router, key, value)?;
        }
        fail(BuildStep::Namespaces)?;
        let k = self.id % 256;
        let (snd_a, rtr_a1, rtr_a2, rcv_a) = (
            format!("10.{k}.1.2/24"),
            format!("10.{k}.1.1/24"),
            format!("10.{k}.2.1/24"),
            format!("10.{k}.2.2/24"),
        );
        let ip = |ns: &str, args: &[&str]| -> Result<String> {
            let mut v = vec!["-n", ns];
            v.extend_from_slice(args);
            run("ip", &v)
        };
        // One veth pair per host: the router's end, the host's `eth0`.
        for (router_if, host_ns) in [(ROUTER_SND_IF, &snd), (ROUTER_RCV_IF, &rcv)] {
            let veth = ["link", "add", router_if, "type", "veth", "peer", "name"];
            ip(&rtr, &[&veth[..], &[HOST_IF, "netns", host_ns]].concat())?;
        }
        ip(&snd, &["addr", "add", &snd_a, "dev", HOST_IF])?;
        ip(&rtr, &["addr", "add", &rtr_a1, "dev", ROUTER_SND_IF])?;
        ip(&rtr, &["addr", "add", &rtr_a2, "dev", ROUTER_RCV_IF])?;
        ip(&rcv, &["addr", "add", &rcv_a, "dev", HOST_IF])?;
        ip(&snd, &["link", "set", HOST_IF, "up"])?;
        ip(&rtr, &["link", "set", ROUTER_SND_IF, "up"])?;
        ip(&rtr, &["link", "set", ROUTER_RCV_IF, "up"])?;
        ip(&rcv, &["link", "set", HOST_IF, "up"])?;

        let dbox = DelayBox::start(&rtr, self.config.one_way_delay)?;
        // Each direction's packets leave the box spaced as their bottleneck sent them.
        dbox.controls().set_line_rate(0, self.config.rate_bps);
        dbox.controls()
            .set_line_rate(1, self.config.reverse_rate_bps.unwrap_or(0));
        self.lock().delay_box = Some(dbox);
        self.set_reorder(self.config.reorder, self.config.reorder_delay)?;
        self.set_duplicate(self.config.duplicate)?;
        fail(BuildStep::DelayBox)?;
        for t in [TUN_FORWARD, TUN_REVERSE] {
            ip(&rtr, &["link", "set", t, "txqueuelen", "1000", "up"])?;
        }
        // Devices created after ip_forward=1 inherit forwarding from `default`; make sure.
        for dev in [TUN_FORWARD, TUN_REVERSE] {
            self.sysctl(
                Node::Router,
                &format!("net.ipv4.conf.{dev}.forwarding"),
                "1",
            )?;
            self.sysctl(Node::Router, &format!("net.ipv4.conf.{dev}.rp_filter"), "0")?;
        }
        let (snd_host, rcv_host) = (format!("10.{k}.1.2/32"), format!("10.{k}.2.2/32"));
        let (snd_net, rcv_net) = (format!("10.{k}.1.0/24"), format!("10.{k}.2.0/24"));
        ip(&rtr, &["route", "add", &rcv_host, "dev", TUN_FORWARD])?;
        ip(&rtr, &["route", "add", &snd_host, "dev", TUN_REVERSE])?;
        // The delay box's table: each host's subnet on its veth.
        for (net, dev) in [(&rcv_net, ROUTER_RCV_IF), (&snd_net, ROUTER_SND_IF)] {
            ip(
                &rtr,
                &["route", "add", net, "dev", dev, "table", DELAYBOX_TABLE],
            )?;
        }
        // Packets the delay box writes back, and the router's own packets (`iif lo`:
        // through a TUN they would come back as martians), go straight to their veth.
        for t in [TUN_FORWARD, TUN_REVERSE, "lo"] {
            ip(
                &rtr,
                &[
                    "rule",
                    "add",
                    "iif",
                    t,
                    "lookup",
                    DELAYBOX_TABLE,
                    "pref",
                    "100",
                ],
            )?;
        }
        ip(
            &snd,
            &["route", "add", "default", "via", &format!("10.{k}.1.1")],
        )?;
        ip(
            &rcv,
            &["route", "add", "default", "via", &format!("10.{k}.2.1")],
        )?;

        fail(BuildStep::Tbf)?;
        let limit = self.config.queue_bytes();
        self.add_tbf(TUN_FORWARD, self.config.rate_bps, limit)?;
        if let Some(r) = self.config.reverse_rate_bps {
            self.add_tbf(TUN_REVERSE, r, limit)?;
        }
        fail(BuildStep::Loss)?;
        run(
            "tc",
            &["-n", &rcv, "qdisc", "add", "dev", HOST_IF, "clsact"],
        )?;
        self.set_loss(self.config.loss)?;
        Ok(())
    }

    fn add_tbf(&self, dev: &str, rate_bps: u64, limit: u64) -> Result<()> {
        self.tbf("add", dev, rate_bps, limit)
    }

    /// `tc qdisc add|change` of the bottleneck's `tbf` on `dev`.
    fn tbf(&self, verb: &str, dev: &str, rate_bps: u64, limit: u64) -> Result<()> {
        let rtr = self.ns(Node::Router);
        let (rate, burst, limit) = (
            format!("{rate_bps}bit"),
            self.config
                .burst_bytes
                .unwrap_or_else(|| tbf_burst(rate_bps))
                .to_string(),
            limit.to_string(),
        );
        run(
            "tc",
            &[
                "-n", rtr, "qdisc", verb, "dev", dev, "root", "tbf", "rate", &rate, "burst",
                &burst, "limit", &limit,
            ],
        )?;
        Ok(())
    }

    /// Change the sender → receiver bottleneck's rate while the path runs
    /// (what is queued stays; the queue keeps its size in bytes). For
    /// paths whose capacity follows a schedule (cm-implementation-linux
    /// Figs 8–9).
    pub fn set_rate(&self, rate_bps: u64) -> Result<()> {
        if !(8_000..=100_000_000_000).contains(&rate_bps) {
            return Err(crate::config::ConfigError::Rate(rate_bps).into());
        }
        let inner = self.lock();
        if inner.torn_down {
            return Err(NetemError::TornDown);
        }
        self.tbf("change", TUN_FORWARD, rate_bps, self.config.queue_bytes())?;
        if let Some(dbox) = inner.delay_box.as_ref() {
            dbox.controls().set_line_rate(0, rate_bps);
        }
        Ok(())
    }

    /// Give the receiver host another address, `10.k.2.(2 + n)` for
    /// `n` in `1..=200`, routed through the same bottleneck and delay box
    /// (for programs that need a second destination host behind the same
    /// path, e.g. two macroflows competing). Returns the address.
    pub fn add_receiver_address(&self, n: u8) -> Result<Ipv4Addr> {
        if !(1..=200).contains(&n) {
            return Err(NetemError::ReceiverIndex(n));
        }
        let addr = Ipv4Addr::new(10, self.k(), 2, 2 + n);
        let host = format!("{addr}/32");
        run(
            "ip",
            &[
                "-n",
                self.ns(Node::Receiver),
                "addr",
                "add",
                &host,
                "dev",
                "lo",
            ],
        )?;
        // Into the forward TUN like the main address; the delay box's
        // policy table already routes the whole receiver subnet onward.
        run(
            "ip",
            &[
                "-n",
                self.ns(Node::Router),
                "route",
                "add",
                &host,
                "dev",
                TUN_FORWARD,
            ],
        )?;
        Ok(addr)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bursts() {
        assert_eq!(tbf_burst(10_000_000), 3000);
        assert_eq!(tbf_burst(1_000_000_000), 125_000);
    }
}
