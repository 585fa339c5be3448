//! The two ways libcm reaches a congestion manager: in-process
//! ([`embedded`]) or through the daemon ([`daemon`], over its control
//! socket and the shared-memory rings of [`rings`]). Both expose the same
//! operations with the same semantics; [`crate::Cm`] picks one.

pub(crate) mod daemon;
pub(crate) mod embedded;
mod rings;

/// The CM a [`crate::Cm`] talks to.
pub(crate) enum Backend {
    /// In this process.
    Embedded(Box<embedded::Embedded>),
    /// The host's daemon.
    Daemon(Box<daemon::DaemonConn>),
}
