//! What a transfer reports: [`Summary`], serializable, with a one-line
//! human form.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Which transport carries a transfer.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Transport {
    /// TCP/CM: cm-transport's TCP over UDP, congestion control by the CM
    /// (cm-implementation-linux §3.2).
    TcpCm,
    /// The kernel's TCP with the named congestion control (`reno`,
    /// `cubic`, ...: `setsockopt(TCP_CONGESTION)`).
    LinuxTcp {
        /// The algorithm's name.
        cc: String,
    },
    /// CC-UDP: datagrams through libcm's congestion-controlled
    /// [`libcm::ccudp::CcUdpSocket`], unreliable; the receiving application
    /// sends nothing back, and the sender learns loss and RTT from the CM
    /// protocol's probes (sigcomm1999 §4.2–4.3), or from CC-UDP's own acks
    /// when the receiver runs no receiver CM.
    CcUdp,
}

impl Transport {
    /// Linux TCP with `cc`.
    pub fn linux(cc: impl Into<String>) -> Transport {
        Transport::LinuxTcp { cc: cc.into() }
    }

    /// A short name: `tcpcm`, `tcp-reno`, `tcp-cubic`, `ccudp`, ...
    pub fn name(&self) -> String {
        match self {
            Transport::TcpCm => "tcpcm".to_owned(),
            Transport::CcUdp => "ccudp".to_owned(),
            Transport::LinuxTcp { cc } => format!("tcp-{cc}"),
        }
    }
}

impl fmt::Display for Transport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

/// Which end a summary describes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// The sending end.
    Sender,
    /// The receiving end.
    Receiver,
}

/// One point of a transfer's progress.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProgressSample {
    /// Seconds since the transfer started.
    pub t: f64,
    /// Bytes acknowledged by then (sender) or received (receiver).
    pub bytes: u64,
}

/// TCP/CM details of a sender's summary.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TcpCmDetail {
    /// The CM flow id.
    pub flow: u64,
    /// Its macroflow.
    pub macroflow: u64,
    /// The macroflow's congestion window (bytes) when the flow opened: a
    /// macroflow that already learned the path starts later connections
    /// above the initial window (cm-implementation-linux §4.3).
    pub window_at_open: Option<u64>,
    /// The TCP MSS (= the grant unit used).
    pub mss: u32,
    /// Segments sent (SYN, data, FIN, retransmissions).
    pub segments_sent: u64,
    /// Retransmission timeouts (including SYN timeouts).
    pub timeouts: u64,
    /// Fast retransmits.
    pub fast_retransmits: u64,
    /// Smoothed RTT at the end, seconds.
    pub srtt_s: Option<f64>,
    /// Grants answered with a segment.
    pub grants: u64,
    /// Grants answered with nothing to send (declined: `cm_notify(0)`).
    #[serde(default)]
    pub grants_empty: u64,
    /// Passes of the sender's event loop while the connection was open:
    /// each is a wake-up, a receive and a send (where the CPU per MB goes
    /// on a slow path).
    #[serde(default)]
    pub passes: u64,
    /// CM calls the CM refused (e.g. a notify after a grant expired).
    pub cm_errors: u64,
}

/// CC-UDP sender details: the CM protocol's view and the receiver's count.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CcUdpDetail {
    /// Payload bytes per datagram (the last may be shorter).
    pub payload: u32,
    /// Data datagrams that left the sender's socket.
    pub datagrams_sent: u64,
    /// Of those, reported received by the feedback (probe responses and
    /// CC-UDP acks together).
    pub acked: u64,
    /// Of those, reported lost by the feedback.
    pub lost: u64,
    /// The peer's protocol state at the end: `negotiated` (the receiver CM
    /// answered), `fallback` (no receiver CM: CC-UDP's acks), `handshaking`,
    /// or `off`.
    pub state: String,
    /// SYNs sent.
    pub syns: u64,
    /// Probes sent.
    pub probes: u64,
    /// Probe responses accepted.
    pub responses: u64,
    /// Resynchronisations after the receiver lost its state (RST).
    pub resets: u64,
    /// Fallbacks to "no receiver CM".
    pub fallbacks: u64,
    /// Datagrams sent with the CM header.
    pub cm_sent: u64,
    /// Of those, declared lost by the receiver CM.
    pub cm_lost: u64,
    /// The protocol's loss estimate, `cm_lost / cm_sent`.
    pub loss_estimate: Option<f64>,
    /// CC-UDP acks received (the handshake's first window, or everything
    /// after a fallback).
    pub acks_received: u64,
    /// The macroflow's smoothed RTT at the end, seconds.
    pub srtt_s: Option<f64>,
    /// Payload bytes the receiver reported it got (`None`: its report never
    /// came; `Summary::bytes` is then the sender's estimate).
    pub receiver_bytes: Option<u64>,
    /// Datagrams the receiver reported it got.
    pub receiver_datagrams: Option<u64>,
    /// Times the receiver replaced its socket during the transfer.
    pub receiver_restarts: u32,
    /// Highest sending rate over any one-second window, bits/s of IP
    /// packets (datagram + 28 bytes) leaving the socket; over the whole
    /// transfer if it was shorter.
    pub peak_send_bps: f64,
    /// IP bytes sent over time, sampled about every 100 ms.
    pub sent_progress: Vec<ProgressSample>,
    /// Whether every datagram sent was resolved (received or lost) before
    /// the drain limit.
    pub drained: bool,
}

/// What one transfer did, at one end.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// The transport.
    pub transport: Transport,
    /// Which end.
    pub role: Role,
    /// Local address.
    pub local: String,
    /// Peer address.
    pub peer: String,
    /// Bytes transferred (sender: acknowledged; receiver: received in order;
    /// CC-UDP: payload bytes the receiver got, at both ends).
    pub bytes: u64,
    /// Transfer time in seconds. Sender: from connection start (SYN sent /
    /// `connect()` called) until every byte is acknowledged (TCP/CM:
    /// data and FIN acknowledged; Linux TCP: the receiver closed after
    /// reading everything). Receiver: from the SYN (TCP/CM) or `accept()`
    /// (Linux TCP) until the FIN / EOF. CC-UDP sender: from the first
    /// datagram queued until every datagram sent is resolved by the
    /// feedback (or the drain limit); CC-UDP receiver: from the first
    /// arrival to the last.
    pub seconds: f64,
    /// `bytes * 8 / seconds`.
    pub throughput_bps: f64,
    /// Retransmitted segments (TCP/CM: `TcpStats::retransmits`; Linux TCP:
    /// `TCP_INFO` `tcpi_total_retrans`; receivers: duplicate segments seen;
    /// CC-UDP: never retransmits, 0 at the sender, duplicates at the
    /// receiver).
    pub retransmissions: u64,
    /// CPU time (user + system) of the thread that ran the transfer while
    /// it ran. With several concurrent TCP/CM transfers on one loop, each
    /// reports the loop thread's CPU over its own lifetime (shared).
    pub cpu_s: f64,
    /// Start, seconds since [`cm_clock::epoch`].
    pub start_s: f64,
    /// End, seconds since [`cm_clock::epoch`].
    pub end_s: f64,
    /// Start, seconds since the Unix epoch.
    pub start_unix_s: f64,
    /// Whether the transfer finished (a receiver's summary of a connection
    /// that never sent its FIN says `false`).
    pub complete: bool,
    /// Bytes over time (empty unless asked for).
    pub progress: Vec<ProgressSample>,
    /// TCP/CM sender details.
    pub tcpcm: Option<TcpCmDetail>,
    /// CC-UDP sender details.
    #[serde(default)]
    pub ccudp: Option<CcUdpDetail>,
}

impl Summary {
    /// Megabits per second.
    pub fn mbit_s(&self) -> f64 {
        self.throughput_bps / 1e6
    }

    /// CPU seconds per megabyte transferred.
    pub fn cpu_per_mb(&self) -> f64 {
        if self.bytes == 0 {
            0.0
        } else {
            self.cpu_s / (self.bytes as f64 / 1e6)
        }
    }
}

impl fmt::Display for Summary {
    /// `tcpcm 10.0 MB in 8.41 s = 9.52 Mbit/s, 3 retransmissions, cpu 0.21 s`
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.role {
            Role::Sender => "retransmissions",
            Role::Receiver => "duplicates",
        };
        write!(
            f,
            "{} {} in {:.2} s = {}, {} {what}, cpu {:.2} s",
            self.transport,
            cm_report::fmt::bytes(self.bytes),
            self.seconds,
            cm_report::fmt::rate(self.throughput_bps),
            self.retransmissions,
            self.cpu_s,
        )?;
        if !self.complete {
            f.write_str(" (incomplete)")?;
        }
        Ok(())
    }
}

pub(crate) fn throughput(bytes: u64, seconds: f64) -> f64 {
    if seconds > 0.0 {
        bytes as f64 * 8.0 / seconds
    } else {
        0.0
    }
}
