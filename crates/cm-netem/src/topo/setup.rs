//! Creating a [`Network`]: namespaces and their sysctls, a veth pair and a
//! delay box (one TUN in each end) per duplex link, the routes, the queues.

use crate::delaybox::DelayBox;
use crate::error::{BuildStep, NetemError, Result};
use crate::netns::{self, run};

use super::Network;
use super::plan::{self, tun, veth};

/// Sysctls of every node, set before any device exists so that every device
/// inherits them: no IPv6 (no autoconf chatter through the queues), no
/// reverse-path filter (what a delay box writes back arrives on a TUN the
/// reverse route does not point at), no redirects; forwarding on (hosts too:
/// their own packets come back out of the delay box and are forwarded onto
/// the veth, which needs `accept_local` as their source is local; the hosts'
/// veths get `forwarding = 0` so hosts never forward anyone else's packets).
const NODE_SYSCTLS: [(&str, &str); 9] = [
    ("net.ipv6.conf.all.disable_ipv6", "1"),
    ("net.ipv6.conf.default.disable_ipv6", "1"),
    ("net.ipv4.conf.all.rp_filter", "0"),
    ("net.ipv4.conf.default.rp_filter", "0"),
    ("net.ipv4.conf.all.send_redirects", "0"),
    ("net.ipv4.conf.default.send_redirects", "0"),
    ("net.ipv4.conf.all.accept_local", "1"),
    ("net.ipv4.conf.default.accept_local", "1"),
    ("net.ipv4.ip_forward", "1"),
];

/// Write `kvs` in namespace `ns` (one thread that enters it).
fn sysctls(ns: &str, kvs: Vec<(String, String)>) -> Result<()> {
    netns::spawn_in_ns(ns, "sysctl", move || -> Result<()> {
        for (k, v) in &kvs {
            netns::write_sysctl(k, v)?;
        }
        Ok(())
    })?
    .join()
    .map_err(|_| NetemError::Thread("sysctl".into()))?
}

/// Run a `tc -batch` in `ns`.
fn tc_batch(ns: &str, lines: &[String]) -> Result<()> {
    netns::batch("tc", ns, lines)
}

impl Network {
    pub(super) fn setup(&self, fail_at: Option<BuildStep>) -> Result<()> {
        let fail = |s: BuildStep| s.inject_if(fail_at);
        let p = &self.plan;
        for node in &p.nodes {
            run("ip", &["netns", "add", &node.ns])?;
            self.lock().created.push(node.ns.clone());
            run("ip", &["-n", &node.ns, "link", "set", "lo", "up"])?;
            let kvs = NODE_SYSCTLS
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            sysctls(&node.ns, kvs)?;
        }
        fail(BuildStep::Namespaces)?;
        for (i, l) in self.spec.links.iter().enumerate() {
            let (a, b) = (p.node_index(&l.a)?, p.node_index(&l.b)?);
            let (na, nb) = (&p.nodes[a].ns, &p.nodes[b].ns);
            let v = veth(i);
            run(
                "ip",
                &[
                    "-n", na, "link", "add", &v, "type", "veth", "peer", "name", &v, "netns", nb,
                ],
            )?;
            let t = tun(i);
            let dbox = DelayBox::start_ends([(na, &t), (nb, &t)], p.links[2 * i].delay)?;
            self.lock().boxes.push(dbox);
            for (end, (ns, node)) in [(na, a), (nb, b)].into_iter().enumerate() {
                let addr = format!("{}/24", plan::link_addr(i, end));
                netns::batch(
                    "ip",
                    ns,
                    &[
                        format!("addr add {addr} dev {v}"),
                        format!("link set {v} up"),
                        format!("link set {t} up"),
                    ],
                )?;
                let mut kvs = vec![
                    (format!("net.ipv4.conf.{t}.forwarding"), "1".to_string()),
                    (format!("net.ipv4.conf.{t}.rp_filter"), "0".to_string()),
                    (format!("net.ipv4.conf.{t}.accept_local"), "1".to_string()),
                ];
                if !p.nodes[node].router {
                    kvs.push((format!("net.ipv4.conf.{v}.forwarding"), "0".to_string()));
                }
                sysctls(ns, kvs)?;
            }
        }
        fail(BuildStep::Links)?;
        for (v, node) in p.nodes.iter().enumerate() {
            netns::batch("ip", &node.ns, &p.ip_lines(v))?;
        }
        fail(BuildStep::Routes)?;
        for (l, &(from, _)) in p.ends.iter().enumerate() {
            tc_batch(&p.nodes[from].ns, &p.tc_lines(l))?;
        }
        Ok(())
    }
}
