//! The engine's thread: wait for the program's datagrams, the CM's grants
//! and the receiver CM's responses, and serve them.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration as StdDuration;

use rustix::event::{PollFd, PollFlags, Timespec, poll};

use crate::engine::Engine;
use crate::inbox::{Inbox, Msg};

/// Serve `inbox` with `engine` until `stop` is set (checked at least
/// every second). Writes the report file every second if one is set.
pub fn run(
    mut engine: Engine,
    inbox: Arc<Inbox>,
    stop: Arc<AtomicBool>,
    report: Option<std::path::PathBuf>,
) {
    let mut msgs = Vec::new();
    let mut last_report = std::time::Instant::now();
    while !stop.load(Ordering::Relaxed) {
        let now = cm_clock::now();
        inbox.drain(&mut msgs);
        for m in msgs.drain(..) {
            match m {
                Msg::Offer(o) => engine.offer(now, o),
                Msg::Close(fd) => engine.close_fd(fd),
                Msg::Flush(done) => {
                    if let Some(path) = &report {
                        let _ = report_of(&engine, &inbox).write_to(path);
                    }
                    done.store(true, Ordering::Release);
                }
            }
        }
        engine.drive(now);
        if let Some(path) = &report {
            if last_report.elapsed() >= StdDuration::from_secs(1) {
                last_report = std::time::Instant::now();
                let _ = report_of(&engine, &inbox).write_to(path);
            }
        }
        let timeout = engine
            .next_timeout(cm_clock::now())
            .min(StdDuration::from_millis(if report.is_some() {
                1000
            } else {
                5000
            }));
        let ts = Timespec {
            tv_sec: timeout.as_secs() as i64,
            tv_nsec: i64::from(timeout.subsec_nanos()),
        };
        let inbox_fd = inbox.fd();
        engine.with_fds(|fds| {
            let mut pfds: Vec<PollFd<'_>> = Vec::with_capacity(fds.len() + 1);
            pfds.push(PollFd::from_borrowed_fd(inbox_fd, PollFlags::IN));
            for fd in fds {
                pfds.push(PollFd::from_borrowed_fd(*fd, PollFlags::IN));
            }
            let _ = poll(&mut pfds, Some(&ts));
        });
    }
    if let Some(path) = &report {
        let _ = report_of(&engine, &inbox).write_to(path);
    }
}

/// The engine's report with the inbox's drops.
fn report_of(engine: &Engine, inbox: &Inbox) -> crate::Report {
    let mut r = engine.report();
    r.inbox_overflow = inbox.overflowed.load(Ordering::Relaxed);
    r
}
