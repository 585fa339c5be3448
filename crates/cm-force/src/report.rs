//! What the wrapper reports: per flow, the datagrams the program offered,
//! those the CM sent and those the queue dropped, and the queueing delay
//! (transport-selection-middleware §4.3: drops move from the routers to
//! the proxy).

use serde::{Deserialize, Serialize};

/// One flow's counts.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FlowReport {
    /// Destination address.
    pub dst: String,
    /// The program's source port.
    pub src_port: u16,
    /// Datagrams the program sent.
    pub offered: u64,
    /// Datagrams the CM let go.
    pub sent: u64,
    /// Datagrams the queue dropped.
    pub dropped: u64,
    /// Payload bytes sent.
    pub sent_bytes: u64,
    /// Sends the kernel refused.
    pub send_errors: u64,
    /// Mean wait of a sent datagram in the queue, ms.
    pub mean_wait_ms: f64,
    /// Longest wait, ms.
    pub max_wait_ms: f64,
}

/// The wrapper's report.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// The wrapped process.
    pub pid: u32,
    /// The CM it uses (daemon or embedded).
    pub mode: String,
    /// MAXQ.
    pub maxq: usize,
    /// The drop policy.
    pub drop: String,
    /// Datagrams sent unqueued (no flow could be opened).
    pub passed: u64,
    /// Datagrams dropped before the engine saw them (its inbox was full).
    pub inbox_overflow: u64,
    /// Receiver CM responses accepted.
    pub responses: u64,
    /// Probe intervals reported lost for want of an answer.
    pub silent_intervals: u64,
    /// Losses the receiver CM's counts revealed (congestion events).
    pub loss_events: u64,
    /// Flows, closed ones first.
    pub flows: Vec<FlowReport>,
}

impl Report {
    /// Totals over the flows: (offered, sent, dropped).
    pub fn totals(&self) -> (u64, u64, u64) {
        self.flows.iter().fold((0, 0, 0), |(o, s, d), f| {
            (o + f.offered, s + f.sent, d + f.dropped)
        })
    }

    /// Write the report to `path` atomically (a temporary file renamed).
    pub fn write_to(&self, path: &std::path::Path) -> std::io::Result<()> {
        let tmp = path.with_extension(format!("tmp{}", self.pid));
        let json = serde_json::to_vec_pretty(self).map_err(std::io::Error::other)?;
        std::fs::write(&tmp, json)?;
        std::fs::rename(&tmp, path)
    }
}
