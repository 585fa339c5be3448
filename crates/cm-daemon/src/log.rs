//! Structured logs: one `key=value` line per event on stderr (journald
//! keeps them under systemd), with a wall-clock timestamp.

use std::fmt::Arguments;
use std::sync::atomic::{AtomicBool, Ordering};

static QUIET: AtomicBool = AtomicBool::new(false);
static SILENT: AtomicBool = AtomicBool::new(false);

/// Silence info-level lines (errors still print).
pub fn set_quiet(q: bool) {
    QUIET.store(q, Ordering::Relaxed);
}

/// Silence every line, errors too: for a process that drives millions of
/// hostile sessions on purpose (the `session` fuzz target), where a
/// warning per malformed frame would be most of the work and gigabytes of
/// output.
pub fn set_silent(s: bool) {
    SILENT.store(s, Ordering::Relaxed);
}

/// Write one log line: `ts=<unix seconds> level=<level> <fields>`.
pub fn line(level: &str, fields: Arguments<'_>) {
    if SILENT.load(Ordering::Relaxed) || (level == "info" && QUIET.load(Ordering::Relaxed)) {
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
