//! [`HostError`]: why an application could not be added to a host.

/// Why an application could not be added to a host. Each message ends with
/// its underlying error; that error is not also
/// [`std::error::Error::source`], so a chain printer shows it once.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// The CM refused.
    #[error("congestion manager: {0}")]
    Cm(cm_core::Error),
    /// The CM configuration is invalid.
    #[error("congestion manager config: {0}")]
    CmConfig(cm_core::ConfigError),
    /// Bad TCP parameters.
    #[error("tcp: {0}")]
    Tcp(cm_transport::TcpConfigError),
    /// Bad CBR parameters.
    #[error("cbr: {0}")]
    Cbr(cm_transport::CbrError),
    /// Bad audio parameters.
    #[error("audio: {0}")]
    Audio(cm_transport::AudioConfigError),
}

macro_rules! host_error_from {
    ($($variant:ident($ty:ty)),* $(,)?) => {$(
        impl From<$ty> for HostError {
            fn from(e: $ty) -> Self {
                HostError::$variant(e)
            }
        }
    )*};
}

host_error_from!(
    Cm(cm_core::Error),
    CmConfig(cm_core::ConfigError),
    Tcp(cm_transport::TcpConfigError),
    Cbr(cm_transport::CbrError),
    Audio(cm_transport::AudioConfigError),
);
