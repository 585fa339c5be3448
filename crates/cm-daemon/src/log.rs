//! Structured logs: one `key=value` line per event on stderr (journald
//! keeps them under systemd), with a wall-clock timestamp.

use std::fmt::Arguments;
use std::sync::atomic::{AtomicBool, Ordering};

static QUIET: AtomicBool = AtomicBool::new(false);

/// Silence info-level lines (errors still print).
pub fn set_quiet(q: bool) {
    QUIET.store(q, Ordering::Relaxed);
}

/// Write one log line: `ts=<unix seconds> level=<level> <fields>`.
pub fn line(level: &str, fields: Arguments<'_>) {
    if level == "info" && QUIET.load(Ordering::Relaxed) {
        return;
    }
    let ts = cm_clock::unix_now();
    eprintln!("ts={ts:.6} level={level} {fields}");
}

/// `log!(info, "msg=\"...\" key={}", v)`.
#[macro_export]
macro_rules! log {
    ($level:ident, $($arg:tt)*) => {
        $crate::log::line(stringify!($level), format_args!($($arg)*))
    };
}
