//! The receiving end of either transport, served on the calling thread or
//! its own.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::error::{Result, TtcpError};
use crate::spec::{ReceiverOptions, Until};
use crate::summary::{Summary, Transport};
use crate::{ccudp, linux_tcp, tcpcm};

enum Inner {
    TcpCm(tcpcm::receiver::UdpReceiver),
    Linux(linux_tcp::TcpReceiverLoop),
    CcUdp(ccudp::receiver::CcUdpReceiver),
}

/// The receiving end of either transport.
pub struct Receiver {
    inner: Inner,
}

impl std::fmt::Debug for Receiver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Receiver")
            .field("local", &self.local_addr())
            .finish()
    }
}

impl Receiver {
    /// Bind `addr` (port 0: any free port) for `transport`: a UDP socket
    /// for TCP/CM, a TCP listener for Linux TCP (its algorithm only governs
    /// the ACK direction), a UDP socket for CC-UDP's control messages (each
    /// transfer then gets a receiving socket of its own).
    pub fn bind(
        addr: SocketAddr,
        transport: &Transport,
        opts: ReceiverOptions,
    ) -> Result<Receiver> {
        if opts.rcv_wnd == 0 {
            return Err(TtcpError::Invalid("receive window must be > 0".into()));
        }
        let inner = match transport {
            Transport::TcpCm => Inner::TcpCm(tcpcm::receiver::UdpReceiver::bind(addr, opts)?),
            Transport::LinuxTcp { cc } => {
                Inner::Linux(linux_tcp::TcpReceiverLoop::bind(addr, cc, opts)?)
            }
            Transport::CcUdp => Inner::CcUdp(ccudp::receiver::CcUdpReceiver::bind(addr, opts)?),
        };
        Ok(Receiver { inner })
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        match &self.inner {
            Inner::TcpCm(r) => r.local_addr(),
            Inner::Linux(r) => r.local_addr(),
            Inner::CcUdp(r) => r.local_addr(),
        }
    }

    /// Receive until `until` says stop; `on_done` sees each summary as its
    /// connection ends. Returns every summary (unfinished connections at
    /// the stop are reported with `complete: false`).
    pub fn serve(
        &mut self,
        until: &Until<'_>,
        on_done: &mut dyn FnMut(&Summary),
    ) -> Result<Vec<Summary>> {
        match &mut self.inner {
            Inner::TcpCm(r) => r.serve(until, on_done),
            Inner::Linux(r) => r.serve(until, on_done),
            Inner::CcUdp(r) => r.serve(until, on_done),
        }
    }

    /// Receive until `stop` is set.
    pub fn serve_until(&mut self, stop: &AtomicBool) -> Result<Vec<Summary>> {
        let until = Until {
            stop: Some(stop),
            ..Until::default()
        };
        self.serve(&until, &mut |_| {})
    }

    /// Receive until `count` connections finished or `timeout` passed.
    pub fn serve_count(&mut self, count: usize, timeout: Option<Duration>) -> Result<Vec<Summary>> {
        let until = Until {
            count: Some(count),
            deadline: timeout.map(|t| Instant::now() + t),
            ..Until::default()
        };
        self.serve(&until, &mut |_| {})
    }

    /// Serve on a new thread (spawned from this one, so in its network
    /// namespace) until [`ReceiverHandle::stop`].
    pub fn spawn(mut self) -> ReceiverHandle {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let thread = std::thread::spawn(move || self.serve_until(&flag));
        ReceiverHandle { stop, thread }
    }
}

/// A receiver serving on its own thread.
#[derive(Debug)]
pub struct ReceiverHandle {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<Result<Vec<Summary>>>,
}

impl ReceiverHandle {
    /// Stop serving and return the summaries.
    pub fn stop(self) -> Result<Vec<Summary>> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread
            .join()
            .unwrap_or_else(|_| Err(TtcpError::Invalid("receiver thread panicked".into())))
    }
}
