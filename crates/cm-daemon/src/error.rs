//! Why the daemon could not start, or stopped: the library's typed errors
//! (the `cmd` binary reports them with their causes).

use std::path::PathBuf;

/// Why a [`DaemonConfig`](crate::DaemonConfig) was rejected.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The configuration file could not be read.
    #[error("cannot read config {}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The read error.
        #[source]
        source: std::io::Error,
    },
    /// The configuration file is not valid TOML for [`crate::DaemonConfig`].
    #[error("bad config {}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// What the parser found.
        #[source]
        source: Box<toml::de::Error>,
    },
    /// A value out of its range or not one of its choices.
    #[error("{0}")]
    Invalid(String),
    /// The core rejected the configuration this describes.
    #[error(transparent)]
    Core(#[from] cm_core::ConfigError),
}

/// Why the daemon could not start or keep serving.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DaemonError {
    /// The configuration was rejected.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// Another daemon answers on the socket path.
    #[error("a CM daemon is already listening on {} (stop it first)", .0.display())]
    AlreadyRunning(PathBuf),
    /// The control socket could not be bound.
    #[error("cannot bind {}", path.display())]
    Bind {
        /// The socket path.
        path: PathBuf,
        /// The bind error.
        #[source]
        source: std::io::Error,
    },
    /// A system call failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// `--kernel-tcp` could not load the `cm` TCP congestion control.
    #[error("--kernel-tcp: {0}")]
    KernelTcp(#[from] KernelStartError),
}

impl From<rustix::io::Errno> for DaemonError {
    fn from(e: rustix::io::Errno) -> Self {
        DaemonError::Io(e.into())
    }
}

/// Why `--kernel-tcp` could not start.
#[derive(Debug, thiserror::Error)]
pub enum KernelStartError {
    /// The congestion control could not be loaded.
    #[error(transparent)]
    Load(#[from] cm_kernel::KernelError),
    /// The core refused the daemon's own client.
    #[error("registering the kernel connections' client: {0}")]
    Core(String),
}
