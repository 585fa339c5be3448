//! Layered streaming over the CM (cm-implementation-linux §3.4–3.5, Figs
//! 8–9; sigcomm1999 §5): a server whose synthetic source has 4 cumulative
//! layers, and a client that plays the frames out after a startup buffer.
//!
//! The server adapts in either of the two ways the implementation paper
//! compares ([`Api`]):
//!
//! - **ALF** (request/callback, §3.5): it keeps one request outstanding
//!   and, at each grant, asks `cm_query` for the rate, picks the layer
//!   that rate carries and sends the next packet of the current frame at
//!   that layer ([`crate::alf::AlfChannel`]).
//! - **Rate callbacks** (§3.4): `cm_register_update` + `cm_thresh`; the
//!   server sends each frame on its own clock at the layer chosen at the
//!   last callback, into a kernel-like buffer (a `CcUdpSocket`'s send
//!   queue of bounded size; what does not fit is dropped).
//!
//! Feedback reaches the server's CM from the client's CC-UDP
//! acknowledgements (the client reads through a `CcUdpSocket`).

mod client;
mod server;

pub use client::{ClientConfig, MAX_AHEAD, StreamClient, StreamReport, StreamSecond};
pub use server::{ServerReport, StreamServer};

use std::time::Duration;

/// How the server learns the rate.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Api {
    /// Request/callback, with `cm_query` at each grant.
    #[default]
    Alf,
    /// Rate callbacks (`cm_register_update` + `cm_thresh`) and the
    /// server's own clock.
    Rate,
}

impl std::str::FromStr for Api {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "alf" => Ok(Api::Alf),
            "rate" => Ok(Api::Rate),
            _ => Err(format!("unknown API {s:?}: give alf or rate")),
        }
    }
}

/// The synthetic source: cumulative layer rates and the frame rate.
#[derive(Clone, Debug, PartialEq)]
pub struct Layers {
    /// Bits per second with layers `0..=i`, increasing.
    pub cumulative_bps: Vec<f64>,
    /// Frames per second.
    pub fps: f64,
}

impl Default for Layers {
    /// 4 layers: a 250 kbit/s base and enhancements of 250, 500 and
    /// 750 kbit/s (0.25, 0.5, 1 and 1.75 Mbit/s cumulative), 25 frames/s.
    fn default() -> Self {
        Layers {
            cumulative_bps: vec![250e3, 500e3, 1_000e3, 1_750e3],
            fps: 25.0,
        }
    }
}

impl Layers {
    /// The highest layer `rate` (bytes/s) carries (0 if none).
    pub fn layer_for(&self, rate_bytes_per_sec: f64) -> usize {
        let bps = rate_bytes_per_sec * 8.0;
        self.cumulative_bps
            .iter()
            .rposition(|r| *r <= bps)
            .unwrap_or(0)
    }

    /// Bytes layer `l` adds to each frame.
    pub fn frame_bytes(&self, l: usize) -> usize {
        let below = if l == 0 {
            0.0
        } else {
            self.cumulative_bps[l - 1]
        };
        ((self.cumulative_bps[l] - below) / 8.0 / self.fps).round() as usize
    }

    /// The time between frames.
    pub fn interval(&self) -> Duration {
        Duration::from_secs_f64(1.0 / self.fps)
    }

    /// Number of layers.
    pub fn len(&self) -> usize {
        self.cumulative_bps.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.cumulative_bps.is_empty()
    }
}

/// Bytes of a stream packet's header.
pub const PACKET_HEADER: usize = 21;
const MAGIC: [u8; 4] = *b"LAY1";

/// One packet's header: which frame, layer and piece it carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Piece {
    /// Frame number, from 0.
    pub frame: u32,
    /// Layer.
    pub layer: u8,
    /// This piece's index in the layer's share of the frame.
    pub chunk: u16,
    /// Pieces of that share.
    pub chunks: u16,
    /// Send time, ns since the Unix epoch.
    pub sent_ns: u64,
}

impl Piece {
    /// The packet: header, then `data` zero bytes.
    pub fn encode(&self, data: usize) -> Vec<u8> {
        let mut b = vec![0u8; PACKET_HEADER + data];
        b[..4].copy_from_slice(&MAGIC);
        b[4..8].copy_from_slice(&self.frame.to_be_bytes());
        b[8] = self.layer;
        b[9..11].copy_from_slice(&self.chunk.to_be_bytes());
        b[11..13].copy_from_slice(&self.chunks.to_be_bytes());
        b[13..21].copy_from_slice(&self.sent_ns.to_be_bytes());
        b
    }

    /// The header of `b`, if it is a stream packet (never panics).
    pub fn decode(b: &[u8]) -> Option<Piece> {
        if b.len() < PACKET_HEADER || b[..4] != MAGIC {
            return None;
        }
        let p = Piece {
            frame: u32::from_be_bytes(b[4..8].try_into().ok()?),
            layer: b[8],
            chunk: u16::from_be_bytes(b[9..11].try_into().ok()?),
            chunks: u16::from_be_bytes(b[11..13].try_into().ok()?),
            sent_ns: u64::from_be_bytes(b[13..21].try_into().ok()?),
        };
        (p.chunk < p.chunks).then_some(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layers_and_pieces() {
        let l = Layers::default();
        assert_eq!(l.layer_for(0.0), 0);
        assert_eq!(l.layer_for(62_500.0), 1); // 500 kbit/s
        assert_eq!(l.layer_for(200_000.0), 2); // 1.6 Mbit/s
        assert_eq!(l.layer_for(250_000.0), 3);
        assert_eq!(l.frame_bytes(0), 1250);
        assert_eq!(l.frame_bytes(3), 3750);
        let p = Piece {
            frame: 7,
            layer: 2,
            chunk: 1,
            chunks: 3,
            sent_ns: 99,
        };
        let b = p.encode(100);
        assert_eq!(b.len(), PACKET_HEADER + 100);
        assert_eq!(Piece::decode(&b), Some(p));
        assert_eq!(Piece::decode(&b[..20]), None);
        let bad = Piece { chunk: 3, ..p }.encode(0);
        assert_eq!(Piece::decode(&bad), None);
    }
}
