//! Test harness: a CM in either mode. Daemon mode runs the real `cmd`
//! daemon loop on a thread, on a socket in a fresh temporary directory that
//! is removed (and the daemon stopped) when the guard drops.

#![allow(dead_code)]

use std::path::PathBuf;

use libcm::{Cm, Config, Transport};

/// A daemon on a thread (`cm_daemon::TempDaemon`) with a client shortcut.
pub struct TestDaemon {
    pub path: PathBuf,
    _d: cm_daemon::TempDaemon,
}

impl TestDaemon {
    pub fn start() -> TestDaemon {
        TestDaemon::with_config(cm_daemon::DaemonConfig::default())
    }

    pub fn with_config(cfg: cm_daemon::DaemonConfig) -> TestDaemon {
        let d = cm_daemon::TempDaemon::with_config(cfg).expect("daemon starts");
        TestDaemon {
            path: d.socket().to_path_buf(),
            _d: d,
        }
    }

    /// A client over the shared-memory rings.
    pub fn client(&self) -> Cm {
        TestDaemon::client_at(&self.path, Transport::SharedMemory)
    }

    /// A client of the daemon at `path` whose frames travel as asked (and
    /// do: the daemon must not have fallen back to the socket).
    pub fn client_at(path: &std::path::Path, t: Transport) -> Cm {
        let cm = Cm::connect_with(path, t).expect("connect to daemon");
        assert_eq!(cm.transport(), Some(t));
        cm
    }
}

/// Either mode (daemon mode over either transport), holding what keeps it
/// alive. `transport` is the daemon's (ignored in embedded mode).
pub struct Harness {
    pub daemon: Option<TestDaemon>,
    pub transport: Transport,
}

impl Harness {
    pub fn embedded() -> Harness {
        Harness {
            daemon: None,
            transport: Transport::SharedMemory,
        }
    }
    pub fn daemon() -> Harness {
        Harness {
            daemon: Some(TestDaemon::start()),
            transport: Transport::SharedMemory,
        }
    }
    pub fn daemon_socket() -> Harness {
        Harness {
            daemon: Some(TestDaemon::start()),
            transport: Transport::Socket,
        }
    }
    pub fn cm(&self) -> Cm {
        match &self.daemon {
            Some(d) => TestDaemon::client_at(&d.path, self.transport),
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

/// Run the same test body in both modes (daemon mode over shared memory
/// and over the socket).
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
            #[test]
            fn daemon_socket() {
                let h = common::Harness::daemon_socket();
                ($body)(&h);
            }
        }
    };
}

/// Raw access to the control socket, as a hostile client would have.
pub mod raw {
    use rustix::net::*;
    use std::os::fd::OwnedFd;

    /// A SEQPACKET connection to the daemon at `path`, with no handshake.
    pub fn connect_raw(path: &std::path::Path) -> OwnedFd {
        let fd = socket_with(
            AddressFamily::UNIX,
            SocketType::SEQPACKET,
            SocketFlags::CLOEXEC,
            None,
        )
        .unwrap();
        connect(&fd, &SocketAddrUnix::new(path).unwrap()).unwrap();
        fd
    }

    /// Send one frame and decode the daemon's answer.
    pub fn roundtrip(fd: &OwnedFd, bytes: &[u8]) -> Vec<cm_ipc::ToClient> {
        send(fd, bytes, SendFlags::empty()).unwrap();
        recv_frame(fd)
    }

    /// Wait for the daemon's next frame and decode it.
    pub fn recv_frame(fd: &OwnedFd) -> Vec<cm_ipc::ToClient> {
        let mut buf = vec![0u8; 65536];
        let (n, _) = recv(fd, &mut buf, RecvFlags::empty()).unwrap();
        cm_ipc::decode_frame(&buf[..n]).unwrap()
    }
}
