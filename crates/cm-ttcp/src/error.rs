//! Why a transfer or a receiver failed.

use std::net::SocketAddr;

/// Why a transfer or a receiver failed. Never a panic: every bad input and
/// every network failure ends up here.
///
/// Each message ends with its underlying error, so one `{}` prints the whole
/// story; the underlying error stays in the variant for code that matches on
/// it and is not also reported as [`std::error::Error::source`] (a chain
/// printer such as anyhow's `{:#}` would print it twice).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TtcpError {
    /// The transfer description is unusable (zero bytes, port 0, ...).
    #[error("invalid transfer: {0}")]
    Invalid(String),
    /// A socket or system call failed.
    #[error("{context}: {error}")]
    Io {
        /// What was being done.
        context: String,
        /// The system error.
        error: std::io::Error,
    },
    /// The congestion manager refused a call or went away.
    #[error("congestion manager: {0}")]
    Cm(libcm::CmError),
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
    #[error("transfer {index}: {error}")]
    Transfer {
        /// Its index in the group.
        index: usize,
        /// Why.
        error: Box<TtcpError>,
    },
}

impl From<libcm::CmError> for TtcpError {
    fn from(e: libcm::CmError) -> TtcpError {
        TtcpError::Cm(e)
    }
}

impl TtcpError {
    pub(crate) fn io(context: impl Into<String>, error: std::io::Error) -> TtcpError {
        TtcpError::Io {
            context: context.into(),
            error,
        }
    }

    pub(crate) fn errno(context: impl Into<String>, e: rustix::io::Errno) -> TtcpError {
        TtcpError::io(context, e.into())
    }
}

/// Results of this crate.
pub type Result<T, E = TtcpError> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chain_printer_shows_each_cause_once() {
        let e = TtcpError::Transfer {
            index: 2,
            error: Box::new(TtcpError::io(
                "bind 0.0.0.0:5001",
                std::io::Error::from(std::io::ErrorKind::AddrInUse),
            )),
        };
        assert_eq!(
            e.to_string(),
            "transfer 2: bind 0.0.0.0:5001: address in use"
        );
        assert_eq!(
            format!("{:#}", anyhow::Error::from(e)),
            "transfer 2: bind 0.0.0.0:5001: address in use"
        );
        let cm = TtcpError::from(libcm::CmError::Disconnected);
        assert!(std::error::Error::source(&cm).is_none(), "{cm}");
    }
}
