//! # cm-netem: emulated network paths between network namespaces
//!
//! (docs to come)

pub mod config;
mod delaybox;
pub mod netns;
mod path;
pub mod selftest;
mod sys;

pub use config::{ConfigError, PathConfig, Queue, parse_duration, parse_queue, parse_rate};
pub use delaybox::{DelayBoxStats, DirectionStats};
pub use netns::sweep_stale;
pub use path::{BuildStep, NOT_ROOT, Node, Path, PathStats, QdiscStats, tbf_burst};
pub use selftest::{LossRule, SelfTestFailed, SelfTestOptions, SelfTestReport};
