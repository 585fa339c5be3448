//! # cm-report: numbers as the project prints them
//!
//! Every tool of the project (`cm demo`, `cm stat`, `cm ttcp`, `cm-netem`,
//! the experiments and the benchmarks) formats and summarises its
//! measurements with this crate, so that `10.0 MB` means the same thing
//! everywhere and a median is computed one way.
//!
//! - [`fmt`]: bytes, bit rates and durations in one style (decimal units,
//!   a space before the unit);
//! - [`stats`]: median, mean, Jain's fairness index;
//! - [`parse`]: numbers with units as typed on a command line (`10mbit`).
//!
//! ```
//! use cm_report::{fmt, stats};
//! assert_eq!(fmt::bytes(10_000_000), "10.0 MB");
//! assert_eq!(fmt::rate(9_520_000.0), "9.52 Mbit/s");
//! assert_eq!(fmt::micros(1_500), "1.50 ms");
//! assert_eq!(stats::median(&[3.0, 1.0, 2.0]), 2.0);
//! assert!((stats::jain(&[1.0, 1.0, 1.0]) - 1.0).abs() < 1e-12);
//! ```
#![warn(missing_docs)]

pub mod fmt;
pub mod parse;
pub mod stats;
