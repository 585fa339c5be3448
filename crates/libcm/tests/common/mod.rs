//! Test harness: a CM in either mode. Daemon mode runs the real `cmd`
//! daemon loop on a thread, on a socket in a fresh temporary directory that
//! is removed (and the daemon stopped) when the guard drops.

#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::thread::JoinHandle;

use libcm::{Cm, Config};

static N: AtomicU32 = AtomicU32::new(0);

/// A daemon on a thread.
pub struct TestDaemon {
    pub path: PathBuf,
    dir: PathBuf,
    stop: cmd::StopHandle,
    thread: Option<JoinHandle<()>>,
}

impl TestDaemon {
    pub fn start() -> TestDaemon {
        TestDaemon::with_config(cmd::DaemonConfig::default())
    }

    pub fn with_config(cfg: cmd::DaemonConfig) -> TestDaemon {
        cmd::log::set_quiet(true);
        let dir = std::env::temp_dir().join(format!(
            "libcm-test-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        ));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let path = dir.join("cm.sock");
        let mut d = cmd::Daemon::bind(cfg, &path).expect("daemon binds");
        let stop = d.stop_handle();
        let thread = std::thread::spawn(move || d.run().expect("daemon runs"));
        TestDaemon {
            path,
            dir,
            stop,
            thread: Some(thread),
        }
    }

    pub fn client(&self) -> Cm {
        Cm::connect(&self.path).expect("connect to daemon")
    }
}

impl Drop for TestDaemon {
    fn drop(&mut self) {
        self.stop.stop();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Either mode, holding what keeps it alive.
pub struct Harness {
    pub daemon: Option<TestDaemon>,
}

impl Harness {
    pub fn embedded() -> Harness {
        Harness { daemon: None }
    }
    pub fn daemon() -> Harness {
        Harness {
            daemon: Some(TestDaemon::start()),
        }
    }
    pub fn cm(&self) -> Cm {
        match &self.daemon {
            Some(d) => d.client(),
            None => Cm::embedded(Config::default()).expect("embedded"),
        }
    }
}

/// Wait (dispatching nothing) until an event is ready, up to 2 s.
pub fn next_event(cm: &mut Cm) -> libcm::CmEvent {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
    loop {
        if let Some(ev) = cm.poll_event().expect("poll_event") {
            return ev;
        }
        assert!(std::time::Instant::now() < deadline, "no event within 2 s");
        cm.wait(Some(std::time::Duration::from_millis(20)))
            .expect("wait");
    }
}

/// Run the same test body in both modes.
#[macro_export]
macro_rules! both_modes {
    ($name:ident, $body:expr) => {
        mod $name {
            use super::*;
            #[test]
            fn embedded() {
                let h = common::Harness::embedded();
                ($body)(&h);
            }
            #[test]
            fn daemon() {
                let h = common::Harness::daemon();
                ($body)(&h);
            }
        }
    };
}
