//! vat-style interactive audio over the CM (cm-implementation-linux §3.6,
//! Fig 2).
//!
//! vat sends constant-bit-rate audio and cannot downsample it, so the only
//! way it can follow the network is to drop packets before they are sent.
//! The paper splits that in two:
//!
//! - **long-term** changes of the available rate are met by a [`Policer`]
//!   that drops frames preemptively so that what passes matches the CM's
//!   rate for the flow (smoothed over seconds: `cm_query`);
//! - **short-term** variation (the controller's probing, a halving after a
//!   loss, a timeout) is absorbed by a small application buffer of a
//!   configurable size and policy. The paper's choice is drop-from-head:
//!   when the buffer is full the *oldest* frame goes, so what is sent next
//!   is the freshest. A drop-tail FIFO, the default of kernel and router
//!   buffers, instead keeps old frames and delays everything behind them.
//!   The buffer feeds the socket only when the CM grants (the socket's own
//!   queue holds at most one frame), as an ALF application does.
//!
//! [`VatSender`] is that pipeline, over a [`CcUdpSocket`] whose feedback is
//! the receiver's CC-UDP acknowledgements, or over a plain UDP socket
//! (`Transport::Udp`, the unresponsive baseline: no policer, no buffer).
//! [`VatReceiver`] reports one-way delay (from the send time each frame
//! carries; sender and receiver need one clock, as on one host or with
//! synchronised clocks), the RFC 3550 interarrival jitter and the loss.
//!
//! [`CcUdpSocket`]: libcm::ccudp::CcUdpSocket

mod frame;
mod policer;
mod receiver;
mod samples;
mod seen;
mod sender;
mod stats;

use std::time::Duration;

use cm_transport::maxq::Overflow;

pub use frame::{END_BYTES, End, FRAME_HEADER, Frame};
pub use policer::Policer;
pub use receiver::{ReceiverConfig, VatReceiver};
pub(crate) use sender::is_transient;
pub use sender::{END_COPIES, END_WAIT, SenderReport, VatSender};
pub use stats::{DelayStats, Second, VatReport};

/// How the frames travel.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Transport {
    /// Through the CM: policer, application buffer, CC-UDP.
    #[default]
    Cm,
    /// Plain UDP, every frame when it is made (no congestion control).
    Udp,
}

impl std::str::FromStr for Transport {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "cm" => Ok(Transport::Cm),
            "udp" => Ok(Transport::Udp),
            _ => Err(format!("unknown transport {s:?}: give cm or udp")),
        }
    }
}

/// The sender's settings. The default is the paper's vat: 64 kbit/s PCM
/// audio in 20 ms frames (160 bytes each), a buffer of 4 frames (80 ms of
/// audio) with drop-from-head, and the policer on.
#[derive(Clone, Debug)]
pub struct VatConfig {
    /// How the frames travel.
    pub transport: Transport,
    /// One frame every this long.
    pub frame_interval: Duration,
    /// Bytes per frame (the datagram's payload; at least [`FRAME_HEADER`]).
    pub frame_bytes: usize,
    /// Frames the application buffer holds.
    pub buffer: usize,
    /// What a full buffer drops.
    pub overflow: Overflow,
    /// Whether the policer drops frames to the CM's long-term rate.
    pub policer: bool,
    /// The policer's averaging time of the CM's rate.
    pub policer_window: Duration,
    /// How long to send.
    pub duration: Duration,
}

impl Default for VatConfig {
    fn default() -> Self {
        VatConfig {
            transport: Transport::Cm,
            frame_interval: Duration::from_millis(20),
            frame_bytes: 160,
            buffer: 4,
            overflow: Overflow::DropHead,
            policer: true,
            policer_window: Duration::from_secs(2),
            duration: Duration::from_secs(30),
        }
    }
}

impl VatConfig {
    /// The source's rate, bits per second (payload).
    pub fn bitrate(&self) -> f64 {
        self.frame_bytes as f64 * 8.0 / self.frame_interval.as_secs_f64()
    }

    /// Why these settings cannot run, if they cannot.
    pub fn check(&self) -> Result<(), String> {
        if self.frame_bytes < FRAME_HEADER || self.frame_bytes > 1400 {
            return Err(format!(
                "frame size {} bytes: give {FRAME_HEADER}..=1400",
                self.frame_bytes
            ));
        }
        if self.frame_interval < Duration::from_millis(1) {
            return Err("frame interval under 1 ms".into());
        }
        if self.buffer == 0 {
            return Err("a buffer of 0 frames: give at least 1".into());
        }
        if self.overflow == Overflow::Block {
            return Err("the buffer must drop (head or tail): audio cannot wait".into());
        }
        Ok(())
    }
}
