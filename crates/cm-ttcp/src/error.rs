//! Why a transfer or a receiver failed.

use std::net::SocketAddr;

/// Why a transfer or a receiver failed. Never a panic: every bad input and
/// every network failure ends up here.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TtcpError {
    /// The transfer description is unusable (zero bytes, port 0, ...).
    #[error("invalid transfer: {0}")]
    Invalid(String),
    /// A socket or system call failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The system error.
        #[source]
        source: std::io::Error,
    },
    /// The congestion manager refused a call or went away.
    #[error("congestion manager: {0}")]
    Cm(#[from] libcm::CmError),
    /// The peer never answered the connection request.
    #[error("{dst} unreachable: no answer to the connection request within {secs:.1} s{detail}")]
    Unreachable {
        /// The destination.
        dst: SocketAddr,
        /// How long the connection request was repeated.
        secs: f64,
        /// Extra detail (e.g. "; connection refused").
        detail: String,
    },
    /// The transfer made no progress for too long.
    #[error(
        "transfer to {dst} stalled: nothing acknowledged for {secs:.1} s ({acked} of {total} bytes acknowledged)"
    )]
    Stalled {
        /// The destination.
        dst: SocketAddr,
        /// Seconds without progress.
        secs: f64,
        /// Bytes acknowledged so far.
        acked: u64,
        /// Bytes to transfer.
        total: u64,
    },
    /// The Linux congestion control algorithm is not available.
    #[error(
        "congestion control {0:?} is not available (see /proc/sys/net/ipv4/tcp_available_congestion_control; root can load any algorithm the kernel has)"
    )]
    UnknownCongestionControl(String),
    /// One transfer of a group failed.
    #[error("transfer {index}: {source}")]
    Transfer {
        /// Its index in the group.
        index: usize,
        /// Why.
        #[source]
        source: Box<TtcpError>,
    },
}

impl TtcpError {
    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> TtcpError {
        TtcpError::Io {
            context: context.into(),
            source,
        }
    }

    pub(crate) fn errno(context: impl Into<String>, e: rustix::io::Errno) -> TtcpError {
        TtcpError::io(context, e.into())
    }
}

/// Results of this crate.
pub type Result<T, E = TtcpError> = std::result::Result<T, E>;
