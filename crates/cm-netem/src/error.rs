//! Why building, using or tearing down an emulated path failed.
//!
//! Each variant's message says what was being done and ends with the
//! underlying error (an [`std::io::Error`], the error of a phase), so one
//! `{}` prints the whole story; the underlying error stays in the variant
//! for code that matches on it.

use std::io;
use std::process::ExitStatus;

use crate::config::ConfigError;

/// Why an operation of this crate failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NetemError {
    /// The path's configuration is unusable.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The process is not root.
    #[error("cm-netem needs root (CAP_NET_ADMIN) to create network namespaces")]
    NotRoot,
    /// A program (`ip`, `tc`) could not be started.
    #[error("cannot run {program} (is iproute2 installed?): {error}")]
    Spawn {
        /// The program.
        program: String,
        /// Why it did not start.
        error: io::Error,
    },
    /// A program ran and failed.
    #[error("`{cmd}` failed ({status}): {stderr}")]
    Command {
        /// The command line.
        cmd: String,
        /// Its exit status.
        status: ExitStatus,
        /// What it wrote to stderr.
        stderr: String,
    },
    /// A system call, file or socket operation failed.
    #[error("{context}: {error}")]
    Io {
        /// What was being done.
        context: String,
        /// The system error.
        error: io::Error,
    },
    /// A tool's output or a kernel file did not have the expected form.
    #[error("unexpected {what}: {detail}")]
    Parse {
        /// Which output.
        what: String,
        /// What was wrong with it.
        detail: String,
    },
    /// A helper thread (named here) panicked or died before answering.
    #[error("the {0} thread panicked or died")]
    Thread(String),
    /// The path was used after [`crate::Path::teardown`].
    #[error("the path is torn down")]
    TornDown,
    /// [`crate::Path::add_receiver_address`] was given an index outside 1..=200.
    #[error("receiver address index {0} out of 1..=200")]
    ReceiverIndex(u8),
    /// A failure injected by a test ([`crate::Path::build_failing_at`]).
    #[error("injected failure at {0:?}")]
    Injected(BuildStep),
    /// The topology description is unusable (see [`cm_sim::spec::SpecError`]).
    #[error("invalid topology: {0}")]
    Spec(cm_sim::spec::SpecError),
    /// A network has no node of this name.
    #[error("the network has no node named {0:?}")]
    UnknownNode(String),
    /// A network has no link of this id.
    #[error(
        "the network has no link {0} (links are numbered 2i for a->b and 2i+1 for b->a of entry i)"
    )]
    UnknownLink(usize),
    /// Building a multi-node network failed (everything built so far is torn down).
    #[error("building the emulated network: {0}")]
    BuildNetwork(Box<NetemError>),
    /// Building the path failed (everything built so far is torn down).
    #[error("building the emulated path: {0}")]
    Build(Box<NetemError>),
    /// One or more clean-up steps failed; every failure is listed.
    #[error("{what}: {}", .errors.join("; "))]
    Cleanup {
        /// Which clean-up (tearing down a path, sweeping namespaces).
        what: &'static str,
        /// Each failure, with its causes.
        errors: Vec<String>,
    },
    /// The self-test could not measure: nothing came through, nobody answered.
    #[error("{0}")]
    NoMeasurement(&'static str),
    /// A phase of the self-test failed to run.
    #[error("self-test {phase} phase: {error}")]
    Phase {
        /// `delay`, `rate` or `loss`.
        phase: &'static str,
        /// Why.
        error: Box<NetemError>,
    },
}

/// Steps of [`crate::Path::build`], for tests that inject a failure
/// part-way ([`NetemError::Injected`]).
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BuildStep {
    /// After the namespaces are created.
    Namespaces,
    /// After the delay box is running.
    DelayBox,
    /// At the bottleneck qdisc.
    Tbf,
    /// At the loss filter.
    Loss,
    /// Network: after the veths and delay boxes of the links exist.
    Links,
    /// Network: after the routes exist, before the qdiscs.
    Routes,
}

impl BuildStep {
    /// The injected failure of this step, if it is the one `fail_at`
    /// names (tests make a build fail part-way to check the clean-up).
    pub(crate) fn inject_if(self, fail_at: Option<BuildStep>) -> Result<()> {
        if fail_at == Some(self) {
            return Err(NetemError::Injected(self));
        }
        Ok(())
    }
}

impl NetemError {
    /// An [`NetemError::Io`] saying what was being done.
    pub(crate) fn io(context: impl Into<String>, error: io::Error) -> NetemError {
        NetemError::Io {
            context: context.into(),
            error,
        }
    }
}

impl From<cm_sim::spec::SpecError> for NetemError {
    fn from(e: cm_sim::spec::SpecError) -> NetemError {
        // Not a `#[source]`: the message already ends with it.
        NetemError::Spec(e)
    }
}

/// Results of this crate.
pub type Result<T, E = NetemError> = std::result::Result<T, E>;

/// Attach a context to an [`io::Result`].
pub(crate) trait IoContext<T> {
    /// `Err(e)` becomes [`NetemError::Io`] with the context `f()`.
    fn io_context<C: Into<String>>(self, f: impl FnOnce() -> C) -> Result<T>;
}

impl<T> IoContext<T> for io::Result<T> {
    fn io_context<C: Into<String>>(self, f: impl FnOnce() -> C) -> Result<T> {
        self.map_err(|e| NetemError::io(f(), e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_carry_every_cause() {
        let e = NetemError::Build(Box::new(NetemError::io(
            "open network namespace x",
            io::Error::from(io::ErrorKind::NotFound),
        )));
        let s = e.to_string();
        assert!(
            s.starts_with("building the emulated path: open network namespace x: "),
            "{s}"
        );
    }
}
