//! The CM behind QUIC connections: one thread owns a [`libcm::Cm`]
//! (embedded or connected to `cmd`), and every connection's controller
//! talks to it through a channel, so that quinn's controllers (which must
//! be `Send + Sync`) never hold the CM itself.
//!
//! After each feedback the thread refreshes the window share of every
//! connection it serves; a controller reads its share from an atomic
//! without waiting.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use libcm::{Bytes, Cm, Feedback, FlowId, LossMode};

/// What a controller tells the CM.
#[derive(Debug)]
pub(crate) enum Call {
    Open {
        dst: SocketAddr,
        reply: Sender<Option<(FlowId, Arc<AtomicU64>)>>,
    },
    Sent(FlowId, u64),
    Acked(FlowId, u64, Option<Duration>),
    /// Bytes lost, whether to persistent congestion, and when the most
    /// recently sent of them left.
    Lost(FlowId, u64, bool, std::time::Instant),
    Close(FlowId),
}

/// A handle on the CM thread; cheap to clone, `Send + Sync`.
#[derive(Clone, Debug)]
pub struct CmThread {
    tx: Arc<Mutex<Sender<Call>>>,
}

/// The CM thread could not start.
#[derive(Debug, thiserror::Error)]
#[error("starting the CM for QUIC: {0}")]
pub struct StartError(String);

impl CmThread {
    /// A thread running the CM that `make` builds (`Cm::embedded(..)`,
    /// `Cm::connect(..)`, `Cm::new()`), on this thread's behalf.
    pub fn spawn(
        make: impl FnOnce() -> Result<Cm, libcm::CmError> + Send + 'static,
    ) -> Result<CmThread, StartError> {
        let (tx, rx) = channel();
        let (ready_tx, ready_rx) = channel();
        std::thread::Builder::new()
            .name("cm-quic".into())
            .spawn(move || match make() {
                Ok(cm) => {
                    let _ = ready_tx.send(Ok(()));
                    serve(cm, &rx);
                }
                Err(e) => {
                    let _ = ready_tx.send(Err(e.to_string()));
                }
            })
            .map_err(|e| StartError(e.to_string()))?;
        ready_rx
            .recv()
            .map_err(|e| StartError(e.to_string()))?
            .map_err(StartError)?;
        Ok(CmThread {
            tx: Arc::new(Mutex::new(tx)),
        })
    }

    pub(crate) fn call(&self, c: Call) {
        let _ = self
            .tx
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .send(c);
    }

    /// Open a flow to `dst`: its id and the atomic its window share lands
    /// in (bytes). `None`: the CM refused or is gone.
    pub(crate) fn open(&self, dst: SocketAddr) -> Option<(FlowId, Arc<AtomicU64>)> {
        let (reply, rx) = channel();
        self.call(Call::Open { dst, reply });
        rx.recv_timeout(Duration::from_secs(5)).ok().flatten()
    }
}

/// The thread's loop: apply calls, drive the CM's timers, publish shares.
fn serve(mut cm: Cm, rx: &Receiver<Call>) {
    let mut flows: Vec<(FlowId, Arc<AtomicU64>)> = Vec::new();
    loop {
        let wait = cm
            .next_timeout()
            .unwrap_or(Duration::from_millis(50))
            .min(Duration::from_millis(50));
        let first = match rx.recv_timeout(wait) {
            Ok(c) => Some(c),
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => None,
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
        };
        for call in first.into_iter().chain(rx.try_iter()) {
            apply(&mut cm, &mut flows, call);
        }
        let _ = cm.dispatch();
        // Aging and idle decay change windows without a call: a timer
        // wake-up refreshes the shares too (one query per connection).
        publish(&mut cm, &flows);
    }
    for (f, _) in flows {
        let _ = cm.close(f);
    }
}

fn apply(cm: &mut Cm, flows: &mut Vec<(FlowId, Arc<AtomicU64>)>, call: Call) {
    match call {
        Call::Open { dst, reply } => {
            let opened = cm.open(None, dst).ok().map(|f| {
                let share = Arc::new(AtomicU64::new(0));
                flows.push((f, Arc::clone(&share)));
                (f, share)
            });
            let _ = reply.send(opened);
        }
        Call::Sent(f, n) => {
            let _ = cm.notify(f, n);
        }
        Call::Acked(f, n, rtt) => {
            let fb = Feedback {
                nsent: Bytes(n),
                nrecd: Bytes(n),
                loss: LossMode::None,
                rtt: rtt.map(|d| {
                    libcm::Duration::from_micros(u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
                }),
                lost_sent: None,
            };
            let _ = cm.update(f, fb);
        }
        Call::Lost(f, n, persistent, sent) => {
            let fb = Feedback {
                nsent: Bytes(n),
                nrecd: Bytes(0),
                loss: if persistent {
                    LossMode::Persistent
                } else {
                    LossMode::Transient
                },
                rtt: None,
                lost_sent: Some(cm_clock::from_std(sent)),
            };
            let _ = cm.update(f, fb);
        }
        Call::Close(f) => {
            flows.retain(|(g, _)| *g != f);
            let _ = cm.close(f);
        }
    }
}

/// Each flow's share of its macroflow's window: its share of the rate
/// times the smoothed RTT (for a window-based controller, exactly the
/// window divided among the flows by weight).
fn publish(cm: &mut Cm, flows: &[(FlowId, Arc<AtomicU64>)]) {
    for (f, share) in flows {
        if let Ok(e) = cm.query(*f) {
            if let (Some(rate), Some(srtt)) = (e.rate, e.srtt) {
                share.store(rate.bytes_in(srtt).get(), Ordering::Relaxed);
            }
        }
    }
}
