//! Why a real-network experiment failed.

use cm_netem::NetemError;
use cm_ttcp::TtcpError;

/// Why a real-network experiment failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RealError {
    /// No real experiment of that name.
    #[error("unknown real experiment {0:?} (try `list`)")]
    Unknown(String),
    /// The process is not root.
    #[error(
        "real-network experiments build network namespaces, a tbf bottleneck and a TUN \
         delay box: run as root (e.g. `sudo cm experiment real-sharing --out out`)"
    )]
    NotRoot,
    /// Building, configuring or tearing down the emulated path failed.
    #[error(transparent)]
    Path(#[from] NetemError),
    /// A transfer or a receiver failed.
    #[error(transparent)]
    Transfer(#[from] TtcpError),
    /// The sender host's congestion manager could not be created.
    #[error("congestion manager: {0}")]
    Cm(libcm::CmError),
    /// A program or library the experiment runs is not installed.
    #[error("{0}")]
    Missing(String),
    /// Running or reading a program of the experiment failed.
    #[error("{0}")]
    Program(String),
    /// A thread of the rig (named here) panicked.
    #[error("the {0} thread panicked")]
    Thread(&'static str),
}

impl From<libcm::CmError> for RealError {
    fn from(e: libcm::CmError) -> RealError {
        RealError::Cm(e)
    }
}

impl RealError {
    /// A mapper for the errors of application `app` (one of `cm_apps`'s
    /// programs) that the experiment runs: "app: what went wrong".
    pub(crate) fn app(app: &'static str) -> impl Fn(cm_force::proxy::ProxyError) -> RealError {
        move |e| RealError::Program(format!("{app}: {e}"))
    }
}

/// Results of this crate.
pub type Result<T, E = RealError> = std::result::Result<T, E>;
