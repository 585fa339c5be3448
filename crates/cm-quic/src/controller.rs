//! The quinn congestion controller: a QUIC connection as a CM flow.
//!
//! - quinn's sent packets are `cm_notify`s;
//! - the ACKs of one ACK frame are one `cm_update` (bytes acknowledged and
//!   the latest RTT sample, `on_end_acks` closing the batch);
//! - a congestion event is a `cm_update` of lost bytes, a transient loss,
//!   or a persistent one for persistent congestion (RFC 9002 §7.6);
//! - the window is the connection's share of its macroflow's window.
//!
//! A NewReno controller follows the same events alongside: its window is
//! used until the CM has published a share, and for good if the CM cannot
//! open a flow (it is gone or refuses), so no connection is left without
//! congestion control.

use std::any::Any;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use libcm::FlowId;
use quinn::congestion::{Controller, ControllerFactory, NewReno, NewRenoConfig};
use quinn_proto::RttEstimator;
use std::time::Instant;

use crate::actor::{Call, CmThread};

/// A `ControllerFactory` whose connections join the macroflow of `peer`.
/// Build one per connection (`quinn::TransportConfig::congestion_controller_factory`):
/// quinn does not tell a factory the peer's address.
#[derive(Clone, Debug)]
pub struct CmCongestion {
    cm: CmThread,
    peer: SocketAddr,
}

impl CmCongestion {
    /// Connections built by this factory are flows to `peer`.
    pub fn new(cm: CmThread, peer: SocketAddr) -> CmCongestion {
        CmCongestion { cm, peer }
    }
}

impl ControllerFactory for CmCongestion {
    fn build(self: Arc<Self>, now: Instant, current_mtu: u16) -> Box<dyn Controller> {
        Box::new(CmController::open(
            self.cm.clone(),
            self.peer,
            now,
            current_mtu,
        ))
    }
}

/// One connection's controller.
pub struct CmController {
    cm: CmThread,
    peer: SocketAddr,
    flow: Option<(FlowId, Arc<AtomicU64>)>,
    fallback: NewReno,
    mtu: u64,
    /// Acknowledged bytes of the ACK frame being processed.
    acked: u64,
    /// Its smallest RTT sample: the newest packet's, since an ACK frame's
    /// packets were all acknowledged at once.
    rtt: Option<std::time::Duration>,
}

impl std::fmt::Debug for CmController {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CmController")
            .field("peer", &self.peer)
            .field("flow", &self.flow.as_ref().map(|(f, _)| *f))
            .field("window", &self.window())
            .finish_non_exhaustive()
    }
}

impl CmController {
    fn open(cm: CmThread, peer: SocketAddr, now: Instant, mtu: u16) -> CmController {
        let flow = cm.open(peer);
        CmController {
            cm,
            peer,
            flow,
            fallback: NewReno::new(Arc::new(NewRenoConfig::default()), now, mtu),
            mtu: u64::from(mtu),
            acked: 0,
            rtt: None,
        }
    }

    /// Whether the connection is a CM flow (else NewReno alone).
    pub fn in_cm(&self) -> bool {
        self.flow.is_some()
    }
}

impl Drop for CmController {
    fn drop(&mut self) {
        if let Some((f, _)) = self.flow.take() {
            self.cm.call(Call::Close(f));
        }
    }
}

impl Controller for CmController {
    fn on_sent(&mut self, now: Instant, bytes: u64, last_packet_number: u64) {
        self.fallback.on_sent(now, bytes, last_packet_number);
        if let Some((f, _)) = &self.flow {
            self.cm.call(Call::Sent(*f, bytes));
        }
    }

    fn on_ack(
        &mut self,
        now: Instant,
        sent: Instant,
        bytes: u64,
        app_limited: bool,
        rtt: &RttEstimator,
    ) {
        self.fallback.on_ack(now, sent, bytes, app_limited, rtt);
        self.acked += bytes;
        // The newest packet's own sample (ACK delay included, as TCP's).
        let sample = now.saturating_duration_since(sent);
        if !sample.is_zero() && self.rtt.is_none_or(|r| sample < r) {
            self.rtt = Some(sample);
        }
    }

    fn on_end_acks(
        &mut self,
        now: Instant,
        in_flight: u64,
        app_limited: bool,
        largest: Option<u64>,
    ) {
        self.fallback
            .on_end_acks(now, in_flight, app_limited, largest);
        if let Some((f, _)) = &self.flow {
            if self.acked > 0 {
                self.cm.call(Call::Acked(*f, self.acked, self.rtt.take()));
            }
        }
        self.acked = 0;
    }

    fn on_congestion_event(
        &mut self,
        now: Instant,
        sent: Instant,
        persistent: bool,
        lost_bytes: u64,
    ) {
        self.fallback
            .on_congestion_event(now, sent, persistent, lost_bytes);
        if let Some((f, _)) = &self.flow {
            self.cm.call(Call::Lost(*f, lost_bytes, persistent, sent));
        }
    }

    fn on_mtu_update(&mut self, new_mtu: u16) {
        self.fallback.on_mtu_update(new_mtu);
        self.mtu = u64::from(new_mtu);
    }

    fn window(&self) -> u64 {
        match &self.flow {
            Some((_, share)) => match share.load(Ordering::Relaxed) {
                0 => self.fallback.window(),
                w => w.max(2 * self.mtu),
            },
            None => self.fallback.window(),
        }
    }

    fn clone_box(&self) -> Box<dyn Controller> {
        // A copy is a connection of its own: a flow of its own.
        Box::new(CmController::open(
            self.cm.clone(),
            self.peer,
            Instant::now(),
            u16::try_from(self.mtu).unwrap_or(1200),
        ))
    }

    fn initial_window(&self) -> u64 {
        self.fallback.initial_window()
    }

    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        self
    }
}
