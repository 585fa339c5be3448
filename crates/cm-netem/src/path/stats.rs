//! Counters of a path: its `tbf` bottlenecks (`tc -s qdisc`), the delay box,
//! and the kernel's MIB counters in each namespace (`/proc/net/snmp`,
//! `/proc/net/netstat`).

use std::collections::HashMap;

use crate::error::{IoContext, NetemError, Result};
use serde::{Deserialize, Serialize};

use super::{Node, Path};
use crate::delaybox::{DelayBoxStats, TUN_FORWARD, TUN_REVERSE};
use crate::netns::run;

/// Counters of a `tbf` bottleneck qdisc (from `tc -s qdisc`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QdiscStats {
    /// Bytes sent on (IP level).
    pub sent_bytes: u64,
    /// Packets sent on.
    pub sent_packets: u64,
    /// Packets dropped because the queue was full.
    pub dropped: u64,
    /// Times a packet had to wait for tokens.
    pub overlimits: u64,
    /// Bytes queued now.
    pub backlog_bytes: u64,
    /// Packets queued now.
    pub backlog_packets: u64,
}

/// Cheap statistics of a path.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PathStats {
    /// The forward bottleneck (tbf on `tunf`).
    pub bottleneck: QdiscStats,
    /// The reverse bottleneck, when configured.
    pub reverse_bottleneck: Option<QdiscStats>,
    /// Delay box counters.
    pub delay_box: DelayBoxStats,
    /// Current loss probability.
    pub loss: f64,
    /// Current reorder probability (forward packets held back by `reorder_delay`).
    #[serde(default)]
    pub reorder: f64,
    /// Current extra delay of a held-back packet.
    #[serde(default)]
    pub reorder_delay: std::time::Duration,
    /// Current duplicate probability (forward packets written twice).
    #[serde(default)]
    pub duplicate: f64,
}
/// Counters of the `tbf` qdisc on `dev` in namespace `ns` (`tc -j -s qdisc show`).
pub(crate) fn tbf_stats(ns: &str, dev: &str) -> Result<QdiscStats> {
    let out = run("tc", &["-n", ns, "-j", "-s", "qdisc", "show", "dev", dev])?;
    let v: serde_json::Value = serde_json::from_str(&out).map_err(|e| NetemError::Parse {
        what: "tc -j output".into(),
        detail: e.to_string(),
    })?;
    let q = v
        .as_array()
        .and_then(|a| a.iter().find(|q| q["kind"] == "tbf"))
        .ok_or_else(|| NetemError::Parse {
            what: "tc -j output".into(),
            detail: format!("no tbf qdisc on {dev}"),
        })?;
    let g = |k: &str| q[k].as_u64().unwrap_or(0);
    Ok(QdiscStats {
        sent_bytes: g("bytes"),
        sent_packets: g("packets"),
        dropped: g("drops"),
        overlimits: g("overlimits"),
        backlog_bytes: g("backlog"),
        backlog_packets: g("qlen"),
    })
}

impl Path {
    fn qdisc_stats(&self, dev: &str) -> Result<QdiscStats> {
        tbf_stats(self.ns(Node::Router), dev)
    }

    /// The counters of `section` (`Udp`, `TcpExt`, ...) of `node`'s
    /// namespace's `/proc/net/<file>` (`snmp` or `netstat`, what `nstat`
    /// reads), by name. They count from the namespace's creation.
    pub fn mib(&self, node: Node, file: &str, section: &str) -> Result<HashMap<String, u64>> {
        let proc_file = format!("/proc/thread-self/net/{file}");
        let text = self
            .spawn_in(node, move || {
                std::fs::read_to_string(&proc_file).io_context(|| format!("reading {proc_file}"))
            })?
            .join()
            .map_err(|_| NetemError::Thread(format!("reading /proc/net/{file}")))??;
        parse_mib(&text, section).ok_or_else(|| NetemError::Parse {
            what: format!("/proc/net/{file}"),
            detail: format!("no {section} lines"),
        })
    }

    /// Bottleneck and delay-box counters.
    pub fn stats(&self) -> Result<PathStats> {
        let bottleneck = self.qdisc_stats(TUN_FORWARD)?;
        let reverse_bottleneck = match self.config.reverse_rate_bps {
            Some(_) => Some(self.qdisc_stats(TUN_REVERSE)?),
            None => None,
        };
        let inner = self.lock();
        let delay_box = inner
            .delay_box
            .as_ref()
            .map(|d| d.stats())
            .unwrap_or_default();
        Ok(PathStats {
            bottleneck,
            reverse_bottleneck,
            delay_box,
            loss: inner.loss,
            reorder: inner.reorder.0,
            reorder_delay: inner.reorder.1,
            duplicate: inner.duplicate,
        })
    }
}

/// One section of a `/proc/net/snmp`-style file: a line of names and a
/// line of values, each led by `Section:`. Values that are not counters
/// (`MaxConn -1`) are left out.
fn parse_mib(text: &str, section: &str) -> Option<HashMap<String, u64>> {
    let tag = format!("{section}:");
    let mut lines = text
        .lines()
        .filter(|l| l.split_whitespace().next() == Some(tag.as_str()));
    let (names, values) = (lines.next()?, lines.next()?);
    Some(
        names
            .split_whitespace()
            .zip(values.split_whitespace())
            .skip(1)
            .filter_map(|(n, v)| Some((n.to_owned(), v.parse().ok()?)))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mib_section_is_read_by_name() {
        let text = "Tcp: RtoMin MaxConn InSegs\n\
                    Tcp: 200 -1 7\n\
                    Udp: InDatagrams RcvbufErrors\n\
                    Udp: 10 3\n\
                    UdpLite: InDatagrams RcvbufErrors\n\
                    UdpLite: 0 0\n";
        let udp = parse_mib(text, "Udp").unwrap();
        assert_eq!((udp["InDatagrams"], udp["RcvbufErrors"]), (10, 3));
        let tcp = parse_mib(text, "Tcp").unwrap();
        assert_eq!((tcp.get("MaxConn"), tcp["InSegs"]), (None, 7));
        assert_eq!(parse_mib(text, "IpExt"), None);
    }
}
