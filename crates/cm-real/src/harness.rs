//! The rig every real experiment runs on: one emulated path
//! ([`cm_netem::Path`]: sender → tbf bottleneck → delay box → receiver,
//! loss at the receiver's ingress), receivers for both transports in the
//! receiver's namespace, and a batch of transfers started from a thread in
//! the sender's namespace.
//!
//! TCP/CM transfers of one batch share one embedded CM (the sender host's
//! CM), so transfers to the receiver share one macroflow; Linux TCP
//! transfers are plain kernel sockets in the same namespace.

use std::collections::HashMap;
use std::net::{SocketAddr, SocketAddrV4};
use std::time::Duration;

use crate::error::{RealError, Result};
use cm_netem::{Node, Path, PathConfig};
use cm_ttcp::{
    CcUdpReceiverOptions, Receiver, ReceiverHandle, ReceiverOptions, Scheduled, SendSpec, Summary,
    Transport,
};

/// UDP port of the TCP/CM receiver.
pub const TCPCM_PORT: u16 = 5001;
/// TCP port of the Linux TCP receiver.
pub const LINUX_PORT: u16 = 5002;
/// UDP port of the CC-UDP receiver's control messages (each transfer's data
/// goes to a receiving socket of its own).
pub const CCUDP_PORT: u16 = 5003;

/// One transfer of a batch.
#[derive(Clone, Debug)]
pub struct Job {
    /// Start, after the batch starts.
    pub at: Duration,
    /// Bytes to send.
    pub bytes: u64,
    /// TCP/CM, Linux TCP (with its algorithm) or CC-UDP.
    pub transport: Transport,
    /// Stop after this long even if bytes remain (the summary then counts
    /// the bytes acknowledged by then).
    pub limit: Option<Duration>,
    /// TCP/CM: negotiate SACK (RFC 2018/6675). Linux TCP's SACK is the
    /// sender namespace's sysctl ([`HostOptions::sack`]).
    pub sack: bool,
}

impl Job {
    /// `bytes` over `transport`, starting with the batch.
    pub fn now(bytes: u64, transport: Transport) -> Job {
        Job {
            at: Duration::ZERO,
            bytes,
            transport,
            limit: None,
            sack: false,
        }
    }

    /// The same job with TCP/CM's SACK on or off.
    pub fn with_sack(mut self, on: bool) -> Job {
        self.sack = on;
        self
    }

    /// The same job, stopped after `limit`.
    pub fn for_at_most(mut self, limit: Duration) -> Job {
        self.limit = Some(limit);
        self
    }
}

/// How the hosts at the ends of a [`Rig`] are set up.
#[derive(Clone, Copy, Debug)]
pub struct HostOptions {
    /// `net.ipv4.tcp_sack` in the sender's namespace (Linux TCP only;
    /// TCP/CM has no SACK).
    pub sack: bool,
    /// Cap on the receivers' advertised window, bytes: TCP/CM's receive
    /// window, and Linux's `net.ipv4.tcp_rmem` maximum in the receiver's
    /// namespace (the kernel advertises at most about that much). `None`:
    /// TCP/CM 16 MiB, Linux's default autotuning.
    pub rcv_window: Option<u32>,
    /// The CC-UDP receiver: receiver CM on or off, socket restart.
    pub ccudp: CcUdpReceiverOptions,
}

impl HostOptions {
    /// SACK as given, windows uncapped, the CC-UDP receiver's defaults.
    pub fn sack(sack: bool) -> HostOptions {
        HostOptions {
            sack,
            rcv_window: None,
            ccudp: CcUdpReceiverOptions::default(),
        }
    }

    /// The same options with this CC-UDP receiver.
    pub fn with_ccudp(mut self, ccudp: CcUdpReceiverOptions) -> HostOptions {
        self.ccudp = ccudp;
        self
    }
}

/// A path with receivers listening on it.
pub struct Rig {
    path: Path,
    receivers: Vec<ReceiverHandle>,
}

impl std::fmt::Debug for Rig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Rig")
            .field("namespaces", &self.path.namespaces())
            .finish()
    }
}

impl Rig {
    /// Build the path, set up the hosts and start the three receivers
    /// (TCP/CM, Linux TCP, CC-UDP).
    pub fn build(cfg: PathConfig, host: HostOptions) -> Result<Rig> {
        let path = Path::build(cfg)?;
        let sack = if host.sack { "1" } else { "0" };
        path.sysctl(Node::Sender, "net.ipv4.tcp_sack", sack)?;
        let mut opts = ReceiverOptions {
            ccudp: host.ccudp,
            ..ReceiverOptions::default()
        };
        if let Some(w) = host.rcv_window {
            opts.rcv_wnd = w;
            path.sysctl(
                Node::Receiver,
                "net.ipv4.tcp_rmem",
                &format!("4096 131072 {w}"),
            )?;
        }
        let rcv = path.receiver_addr();
        let receivers = path
            .spawn_in(Node::Receiver, move || -> Result<Vec<ReceiverHandle>> {
                let udp = Receiver::bind(
                    SocketAddr::V4(SocketAddrV4::new(rcv, TCPCM_PORT)),
                    &Transport::TcpCm,
                    opts.clone(),
                )?;
                let tcp = Receiver::bind(
                    SocketAddr::V4(SocketAddrV4::new(rcv, LINUX_PORT)),
                    &Transport::linux("reno"),
                    opts.clone(),
                )?;
                let ccudp = Receiver::bind(
                    SocketAddr::V4(SocketAddrV4::new(rcv, CCUDP_PORT)),
                    &Transport::CcUdp,
                    opts,
                )?;
                Ok(vec![udp.spawn(), tcp.spawn(), ccudp.spawn()])
            })?
            .join()
            .map_err(|_| RealError::Thread("receiver setup"))??;
        Ok(Rig { path, receivers })
    }

    /// The path (for `set_loss`, `stats`, `sysctl`).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Where `transport`'s receiver listens.
    pub fn dst(&self, transport: &Transport) -> SocketAddr {
        let port = match transport {
            Transport::TcpCm => TCPCM_PORT,
            Transport::LinuxTcp { .. } => LINUX_PORT,
            Transport::CcUdp => CCUDP_PORT,
        };
        SocketAddr::V4(SocketAddrV4::new(self.path.receiver_addr(), port))
    }

    /// Run `jobs` from the sender's namespace and return their sender
    /// summaries (in order). TCP/CM jobs share one embedded CM created for
    /// the batch; each CC-UDP job has an embedded CM of its own.
    /// `progress`: sample each transfer's acknowledged bytes this often.
    pub fn run(&self, jobs: &[Job], progress: Option<Duration>) -> Result<Vec<Summary>> {
        let scheduled: Vec<Scheduled> = jobs
            .iter()
            .map(|j| {
                let mut spec = SendSpec::new(self.dst(&j.transport), j.bytes, j.transport.clone());
                spec.progress_interval = progress;
                // A lossy 60 ms path can stall a Reno transfer for several
                // backed-off RTOs; the default idle limit (60 s) is kept.
                spec.connect_timeout = Duration::from_secs(20);
                spec.time_limit = j.limit;
                spec.sack = j.sack;
                Scheduled { at: j.at, spec }
            })
            .collect();
        self.path
            .spawn_in(Node::Sender, move || -> Result<Vec<Summary>> {
                let mut cm = libcm::Cm::embedded(cm_ttcp::cm_config())?;
                Ok(cm_ttcp::send_scheduled(&scheduled, Some(&mut cm))?)
            })?
            .join()
            .map_err(|_| RealError::Thread("sender"))?
    }

    /// Stop the receivers and tear the path down. Returns every
    /// receiver's summaries (TCP/CM's, then Linux TCP's, then CC-UDP's,
    /// each in the order its transfers ended).
    pub fn finish(mut self) -> Result<Vec<Summary>> {
        let mut got = Vec::new();
        for r in self.receivers.drain(..) {
            got.extend(r.stop()?);
        }
        self.path.teardown()?;
        Ok(got)
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        for r in self.receivers.drain(..) {
            let _ = r.stop();
        }
        // `Path`'s own Drop tears the namespaces down.
    }
}

/// A CM embedded in this thread, for the applications of `cm_apps`.
pub fn embedded_cm() -> Result<libcm::ccudp::SharedCm> {
    Ok(libcm::ccudp::SharedCm::new(std::cell::RefCell::new(
        libcm::Cm::embedded(libcm::Config::default())?,
    )))
}

/// Bytes each transfer moved per second over `[from, to]` (seconds since
/// `cm_clock::epoch`), from its progress samples (linear between samples).
pub fn rate_between(s: &Summary, from: f64, to: f64) -> f64 {
    if to <= from {
        return f64::NAN;
    }
    let at = |t_abs: f64| -> f64 {
        let t = t_abs - s.start_s;
        if t <= 0.0 {
            return 0.0;
        }
        let mut prev = (0.0_f64, 0_u64);
        for p in &s.progress {
            if p.t >= t {
                let span = p.t - prev.0;
                let frac = if span > 0.0 { (t - prev.0) / span } else { 1.0 };
                return prev.1 as f64 + frac * (p.bytes as f64 - prev.1 as f64);
            }
            prev = (p.t, p.bytes);
        }
        s.bytes.max(prev.1) as f64
    };
    (at(to) - at(from)) * 8.0 / (to - from)
}

/// A node's Linux TCP loss events so far: fast recoveries
/// (`TCPSackRecovery` + `TCPRenoRecovery`, one per window with losses,
/// RFC 6582) and retransmission timeouts (`TCPTimeouts`), from its
/// namespace's `/proc/net/netstat` (what `nstat` reads). Comparable with
/// a CM macroflow's `reductions` and `timeouts`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TcpLossEvents {
    /// Fast recoveries entered.
    pub recoveries: u64,
    /// Retransmission timeouts.
    pub timeouts: u64,
}

/// [`TcpLossEvents`] of `node`'s namespace.
pub fn tcp_loss_events(path: &Path, node: Node) -> Result<TcpLossEvents> {
    TcpLossEvents::of(&path.mib(node, "netstat", "TcpExt")?).ok_or_else(|| {
        RealError::Program("/proc/net/netstat lacks TCPSackRecovery or TCPTimeouts".into())
    })
}

impl TcpLossEvents {
    /// From a namespace's `TcpExt` counters ([`Path::mib`]).
    fn of(tcp_ext: &HashMap<String, u64>) -> Option<TcpLossEvents> {
        let get = |name: &str| tcp_ext.get(name).copied();
        Some(TcpLossEvents {
            recoveries: get("TCPSackRecovery")? + get("TCPRenoRecovery").unwrap_or(0),
            timeouts: get("TCPTimeouts")?,
        })
    }
}

/// Whether this process can build paths (root), with the message to show
/// when it cannot.
pub fn require_root() -> Result<()> {
    if cm_netem::is_root() {
        Ok(())
    } else {
        Err(RealError::NotRoot)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loss_events_add_sack_and_reno_recoveries() {
        let c = |kv: &[(&str, u64)]| kv.iter().map(|&(k, v)| (k.to_owned(), v)).collect();
        let all = c(&[
            ("TCPRenoRecovery", 2),
            ("TCPSackRecovery", 31),
            ("TCPTimeouts", 4),
        ]);
        assert_eq!(
            TcpLossEvents::of(&all),
            Some(TcpLossEvents {
                recoveries: 33,
                timeouts: 4
            })
        );
        assert_eq!(TcpLossEvents::of(&c(&[("TCPTimeouts", 4)])), None);
        assert_eq!(TcpLossEvents::of(&c(&[("TCPSackRecovery", 1)])), None);
    }
}
