//! Errors of libcm calls.

use cm_core::FlowId;
use cm_ipc::{DecodeError, ErrorCode};

/// Why a libcm call failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CmError {
    /// The in-process core refused the call (embedded mode).
    #[error(transparent)]
    Core(#[from] cm_core::Error),
    /// The daemon refused the call.
    #[error("daemon refused: {0:?}")]
    Daemon(ErrorCode),
    /// The CM refused the call and said why (a controller configuration
    /// that is unusable; in either mode).
    #[error("refused: {why}")]
    Refused {
        /// Why, as a code.
        code: ErrorCode,
        /// Why, in words.
        why: String,
    },
    /// The daemon refused an earlier fire-and-forget call on this flow.
    #[error("daemon refused an earlier call on flow {flow}: {code:?}")]
    Async {
        /// The flow.
        flow: FlowId,
        /// Why.
        code: ErrorCode,
    },
    /// The daemon sent bytes that are not the protocol.
    #[error("protocol error from the daemon: {0}")]
    Protocol(#[from] DecodeError),
    /// The daemon closed the connection.
    #[error("the CM daemon closed the connection")]
    Disconnected,
    /// The daemon did not answer a call within the reply timeout: it is
    /// alive (the connection is up) but stopped, hung or overloaded. The
    /// call's reply, if it ever comes, is dropped. See
    /// [`Cm::set_reply_timeout`](crate::Cm::set_reply_timeout).
    #[error("the CM daemon did not answer within {0:?}")]
    Timeout(std::time::Duration),
    /// No daemon listens at the socket path.
    #[error("no CM daemon at {path}: {source}")]
    NoDaemon {
        /// The socket path tried.
        path: std::path::PathBuf,
        /// The connect error.
        source: std::io::Error,
    },
    /// A socket or system call failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// The buffered-send queue of the flow is full (try again after the
    /// CM has drained some of it).
    #[error("send queue of flow {0} is full")]
    QueueFull(FlowId),
    /// The flow is not a buffered (`cm_send`) flow.
    #[error("flow {0} is not a buffered flow")]
    NotBuffered(FlowId),
    /// An argument libcm can reject before asking anyone.
    #[error("invalid argument: {0}")]
    Invalid(&'static str),
}

impl From<cm_core::controller::spec::SpecError> for CmError {
    /// A controller spec that does not parse, refused as the daemon would.
    fn from(e: cm_core::controller::spec::SpecError) -> Self {
        CmError::Refused {
            code: ErrorCode::InvalidArgument,
            why: e.to_string(),
        }
    }
}

impl From<rustix::io::Errno> for CmError {
    fn from(e: rustix::io::Errno) -> Self {
        CmError::Io(e.into())
    }
}

impl CmError {
    /// The error as a negative errno-style code for the C ABI.
    pub fn code(&self) -> i32 {
        use cm_core::Error as E;
        match self {
            CmError::Core(E::UnknownFlow(_) | E::UnknownMacroflow(_) | E::UnknownClient(_))
            | CmError::Daemon(ErrorCode::UnknownFlow | ErrorCode::UnknownMacroflow)
            | CmError::Async { .. } => -2, // ENOENT
            CmError::Core(E::LimitReached(_)) | CmError::Daemon(ErrorCode::LimitReached) => -24, // EMFILE
            CmError::Daemon(ErrorCode::PermissionDenied) => -1, // EPERM
            CmError::Daemon(ErrorCode::RateLimited) | CmError::QueueFull(_) => -11, // EAGAIN
            CmError::Refused { code, .. } => match code {
                ErrorCode::InvalidArgument => -22, // EINVAL
                c => CmError::Daemon(*c).code(),
            },
            CmError::Disconnected => -32,     // EPIPE
            CmError::Timeout(_) => -110,      // ETIMEDOUT
            CmError::NoDaemon { .. } => -111, // ECONNREFUSED
            CmError::Io(e) => -e.raw_os_error().unwrap_or(5),
            CmError::Protocol(_) | CmError::Daemon(_) => -71, // EPROTO
            CmError::Core(_) | CmError::NotBuffered(_) | CmError::Invalid(_) => -22, // EINVAL
        }
    }
}
