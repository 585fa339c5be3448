//! What a transfer and a receiver are asked to do: [`SendSpec`],
//! [`Scheduled`], [`ReceiverOptions`], [`CcUdpReceiverOptions`], [`Until`].

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::error::{Result, TtcpError};
use crate::summary::{ProgressSample, Transport};

/// Called with (transfer index, sample) as progress samples are taken.
pub type Observer<'a> = &'a mut dyn FnMut(usize, &ProgressSample);

/// One bulk transfer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SendSpec {
    /// The receiver.
    pub dst: SocketAddr,
    /// Bytes to send (> 0).
    pub bytes: u64,
    /// TCP/CM or Linux TCP.
    pub transport: Transport,
    /// Local address to bind (default: any, ephemeral port).
    pub bind: Option<SocketAddr>,
    /// Take a progress sample (bytes acknowledged) this often.
    pub progress_interval: Option<Duration>,
    /// Give up if the connection is not established within this long
    /// (TCP/CM retransmits its SYN after 1, 2, 4 s ...). Default 10 s.
    pub connect_timeout: Duration,
    /// Give up if nothing new is acknowledged for this long. Default 60 s.
    pub idle_timeout: Duration,
    /// Stop after this long even if bytes remain: the summary then counts
    /// what was acknowledged by then and says `complete: false` (for
    /// experiments that run flows for a fixed time). Default: none.
    #[serde(default)]
    pub time_limit: Option<Duration>,
    /// Send this file's contents (the first `bytes` of it) instead of
    /// zeros. See [`SendSpec::file`].
    #[serde(default)]
    pub file: Option<std::path::PathBuf>,
    /// TCP/CM: ask for SACK on the SYN (`cm_transport::TcpConfig::sack`;
    /// RFC 2018 blocks, RFC 6675 recovery). The TCP/CM receiver follows
    /// what the SYN asks for. Linux TCP ignores it (the kernel's
    /// `net.ipv4.tcp_sack` decides). Default false.
    #[serde(default)]
    pub sack: bool,
    /// CC-UDP: payload bytes per datagram (default: the most the CM's MTU
    /// leaves, 1456 bytes with [`crate::ccudp_config`]). Ignored by the
    /// TCP transports.
    #[serde(default)]
    pub payload: Option<usize>,
    /// UDP batching this transfer's sockets must not use, in
    /// `CM_UDP_OFFLOAD`'s words (`no-gso`, `no-gro`, `no-mmsg`, `none`),
    /// on top of what `CM_UDP_OFFLOAD` rules out for the process. TCP/CM
    /// and CC-UDP; Linux TCP ignores it. Default: none.
    #[serde(default)]
    pub udp_offload: Option<String>,
}

/// The length of the file at `p`.
fn file_len(p: &std::path::Path) -> Result<u64> {
    std::fs::metadata(p)
        .map(|m| m.len())
        .map_err(|e| TtcpError::io(format!("{}", p.display()), e))
}

impl SendSpec {
    /// `bytes` to `dst` over `transport`, default timeouts, no progress.
    pub fn new(dst: SocketAddr, bytes: u64, transport: Transport) -> SendSpec {
        SendSpec {
            dst,
            bytes,
            transport,
            bind: None,
            progress_interval: None,
            connect_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            time_limit: None,
            file: None,
            sack: false,
            payload: None,
            udp_offload: None,
        }
    }

    /// The whole of the file at `path` to `dst` over `transport`.
    pub fn file(
        dst: SocketAddr,
        path: impl Into<std::path::PathBuf>,
        transport: Transport,
    ) -> Result<SendSpec> {
        let path = path.into();
        let len = file_len(&path)?;
        if len == 0 {
            return Err(TtcpError::Invalid(format!(
                "{} is empty: nothing to send",
                path.display()
            )));
        }
        let mut spec = SendSpec::new(dst, len, transport);
        spec.file = Some(path);
        Ok(spec)
    }

    /// Stopped after `limit` (see [`SendSpec::time_limit`]).
    pub fn time_limit(mut self, limit: Duration) -> SendSpec {
        self.time_limit = Some(limit);
        self
    }

    /// TCP/CM with or without SACK (see [`SendSpec::sack`]).
    pub fn sack(mut self, on: bool) -> SendSpec {
        self.sack = on;
        self
    }

    /// CC-UDP datagrams of `bytes` of payload (see [`SendSpec::payload`]).
    pub fn payload(mut self, bytes: usize) -> SendSpec {
        self.payload = Some(bytes);
        self
    }

    /// The UDP batching this transfer may use: what `CM_UDP_OFFLOAD`
    /// allows, less what [`SendSpec::udp_offload`] rules out.
    pub fn offload(&self) -> Result<cm_udp::Offload> {
        let env = cm_udp::Offload::from_env().map_err(|e| TtcpError::Invalid(e.to_string()))?;
        let own = match &self.udp_offload {
            Some(s) => cm_udp::Offload::parse(s).map_err(TtcpError::Invalid)?,
            None => cm_udp::Offload::ALL,
        };
        Ok(cm_udp::Offload {
            gso: env.gso && own.gso,
            gro: env.gro && own.gro,
            mmsg: env.mmsg && own.mmsg,
        })
    }

    /// With progress samples every `every`.
    pub fn progress(mut self, every: Duration) -> SendSpec {
        self.progress_interval = Some(every);
        self
    }

    /// With this connect timeout.
    pub fn connect_timeout(mut self, d: Duration) -> SendSpec {
        self.connect_timeout = d;
        self
    }

    /// Check the description.
    pub fn validate(&self) -> Result<()> {
        let bad = |m: &str| Err(TtcpError::Invalid(m.to_owned()));
        if self.bytes == 0 {
            return bad("bytes must be > 0");
        }
        if self.dst.port() == 0 {
            return bad("destination port 0");
        }
        if self.dst.ip().is_unspecified() || self.dst.ip().is_multicast() {
            return Err(TtcpError::Invalid(format!(
                "destination {} is not a unicast address",
                self.dst.ip()
            )));
        }
        if self.connect_timeout.is_zero() || self.idle_timeout.is_zero() {
            return bad("timeouts must be > 0");
        }
        if self.time_limit.is_some_and(|d| d.is_zero()) {
            return bad("time limit must be > 0");
        }
        if let Some(p) = &self.file {
            let len = file_len(p)?;
            if len < self.bytes {
                return Err(TtcpError::Invalid(format!(
                    "{} has {len} bytes, fewer than the {} to send",
                    p.display(),
                    self.bytes
                )));
            }
        }
        if self
            .progress_interval
            .is_some_and(|d| d < Duration::from_millis(1))
        {
            return bad("progress interval must be >= 1 ms");
        }
        if self.payload == Some(0) {
            return bad("payload must be > 0");
        }
        self.offload()?;
        if let Transport::LinuxTcp { cc } = &self.transport {
            if cc.is_empty() || cc.len() > 15 || !cc.bytes().all(|b| b.is_ascii_graphic()) {
                return Err(TtcpError::UnknownCongestionControl(cc.clone()));
            }
        }
        Ok(())
    }
}

/// A transfer starting `at` after the group starts.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Scheduled {
    /// Offset from the start of the group.
    pub at: Duration,
    /// The transfer.
    pub spec: SendSpec,
}

/// The TCP/CM receiver's default delayed-ACK timeout.
pub const DELAYED_ACK: Duration = Duration::from_millis(40);

/// Receiver parameters.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReceiverOptions {
    /// TCP/CM: the advertised window, bytes (default 16 MiB).
    pub rcv_wnd: u32,
    /// TCP/CM: delayed ACKs, RFC 5681 §4.2 / RFC 1122 §4.2.3.2: ACK every
    /// second segment or after this long, out-of-order and gap-filling data
    /// at once (default 40 ms, Linux's minimum delayed-ACK timeout); `None`
    /// ACKs every segment.
    pub delayed_ack: Option<Duration>,
    /// Take a progress sample (bytes received) this often.
    pub progress_interval: Option<Duration>,
    /// Forget an unfinished connection silent this long (default 60 s).
    pub idle_timeout: Duration,
    /// Write what arrives to this file (connection n > 1 to `<file>.n`)
    /// instead of discarding it. CC-UDP writes payloads in arrival order
    /// (it is unreliable: lost datagrams leave no gap).
    #[serde(default)]
    pub output: Option<std::path::PathBuf>,
    /// CC-UDP receiver behaviour.
    #[serde(default)]
    pub ccudp: CcUdpReceiverOptions,
}

/// How a CC-UDP receiver treats its transfers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CcUdpReceiverOptions {
    /// Whether the receiving sockets run the receiver CM (answer the CM
    /// protocol's handshake and probes; default true). Off, the receiver is
    /// a peer without a receiver CM: the sender falls back to CC-UDP's acks
    /// after its SYNs go unanswered (`CcUdpSocket::set_cm_protocol(false)`).
    pub cm_protocol: bool,
    /// Replace a transfer's receiving socket once it has received this many
    /// payload bytes: drop its CM and receiver-CM state and wrap the same
    /// kernel socket afresh (a receiver that lost its state: the sender's
    /// next probe is answered with RST; the port never closes, so no ICMP
    /// unreachable reaches the sender). Once per transfer. Default: never.
    pub restart_after: Option<u64>,
}

impl Default for CcUdpReceiverOptions {
    fn default() -> Self {
        CcUdpReceiverOptions {
            cm_protocol: true,
            restart_after: None,
        }
    }
}

impl Default for ReceiverOptions {
    fn default() -> Self {
        ReceiverOptions {
            rcv_wnd: 16 << 20,
            delayed_ack: Some(DELAYED_ACK),
            progress_interval: None,
            idle_timeout: Duration::from_secs(60),
            output: None,
            ccudp: CcUdpReceiverOptions::default(),
        }
    }
}

/// When [`Receiver::serve`](crate::Receiver::serve) returns.
#[derive(Clone, Copy, Debug, Default)]
pub struct Until<'a> {
    /// Once this is set.
    pub stop: Option<&'a AtomicBool>,
    /// Once this many connections finished.
    pub count: Option<usize>,
    /// At this time.
    pub deadline: Option<Instant>,
}

impl Until<'_> {
    pub(crate) fn stopped(&self, now: Instant) -> bool {
        self.stop.is_some_and(|s| s.load(Ordering::Relaxed))
            || self.deadline.is_some_and(|d| now >= d)
    }
}
