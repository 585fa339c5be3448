//! Batched UDP I/O for the CM's transports.
//!
//! A sender that the CM lets send many datagrams at once should not pay
//! one system call per datagram, and a receiver should not pay one wake-up
//! and one `recvfrom` per datagram. [`UdpIo`] wraps a [`UdpSocket`] and
//! moves batches:
//!
//! - **send**: UDP GSO (`UDP_SEGMENT`, Linux 4.18+), where one `sendmsg`
//!   carries up to 64 equal-sized datagrams that the kernel cuts apart;
//!   else `sendmmsg`, one call for up to 64 datagrams of any size; else one
//!   datagram per `send`. The path is detected once per socket; a GSO
//!   send the kernel refuses at run time (`EIO` from a device without
//!   checksum offload, `EINVAL`) is sent again by `sendmmsg` and GSO is off
//!   for the socket from then on.
//! - **receive**: `recvmmsg` of up to 64 datagrams per call, with UDP GRO
//!   (`UDP_GRO`, Linux 5.0+), where the kernel hands over runs of
//!   same-sized datagrams of one sender as one buffer with its segment
//!   size. [`RecvBatch`] cuts them apart again, so callers see datagrams.
//!
//! - **timestamps**: [`recv_stamped`] reads one datagram with the kernel's
//!   arrival time (`SO_TIMESTAMPNS`, [`enable_timestamps`]), for receivers
//!   that time arrivals (packet-bunch capacity samples).
//!
//! `CM_UDP_OFFLOAD` turns paths off for a process (see [`Offload`]), which
//! is how the fallbacks are tested and how a user rules this crate out
//! when chasing a problem.
//!
//! The design follows what `quinn-udp` does for QUIC; the crate is written
//! on `libc` instead of using `quinn-udp` because the CM needs `sendmmsg`
//! as the middle fallback (quinn-udp sends one transmit per call), ACKs of
//! mixed sizes to many peers in one call, and a way to force each
//! fallback in tests.

mod recv;
mod send;
mod stamp;
mod sys;

use std::io;
use std::net::UdpSocket;
use std::os::fd::AsRawFd;

pub use recv::{Datagram, RecvBatch};
pub use stamp::{Stamped, enable_timestamps, recv_stamped};

/// The most datagrams one call moves (`UDP_MAX_SEGMENTS` of older kernels;
/// also the batch of `sendmmsg` and `recvmmsg`).
pub const MAX_BATCH: usize = 64;

/// The most bytes one GSO send carries (below the 65,507-byte UDP payload
/// limit of IPv4).
pub const MAX_GSO_BYTES: usize = 65_000;

/// How datagrams leave a socket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendPath {
    /// UDP generic segmentation offload: one call per run of equal-sized
    /// datagrams.
    Gso,
    /// `sendmmsg`: one call per batch of datagrams.
    Mmsg,
    /// One `send` per datagram.
    Single,
}

impl SendPath {
    /// Lower-case name (`gso`, `sendmmsg`, `single`).
    pub fn name(self) -> &'static str {
        match self {
            SendPath::Gso => "gso",
            SendPath::Mmsg => "sendmmsg",
            SendPath::Single => "single",
        }
    }
}

/// Which batching a socket may use. [`Offload::from_env`] reads
/// `CM_UDP_OFFLOAD`: a comma-separated list of `no-gso`, `no-gro`,
/// `no-mmsg` (neither `sendmmsg` nor `recvmmsg`), or `none` (all three);
/// empty or unset allows everything.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Offload {
    /// Try UDP GSO on send.
    pub gso: bool,
    /// Try UDP GRO on receive.
    pub gro: bool,
    /// Use `sendmmsg` / `recvmmsg` (otherwise one datagram per call).
    pub mmsg: bool,
}

impl Default for Offload {
    fn default() -> Offload {
        Offload::ALL
    }
}

impl Offload {
    /// Everything the kernel offers.
    pub const ALL: Offload = Offload {
        gso: true,
        gro: true,
        mmsg: true,
    };
    /// One datagram per call each way.
    pub const NONE: Offload = Offload {
        gso: false,
        gro: false,
        mmsg: false,
    };

    /// Parse a `CM_UDP_OFFLOAD` value.
    pub fn parse(s: &str) -> Result<Offload, String> {
        let mut o = Offload::ALL;
        for word in s.split(',').map(str::trim).filter(|w| !w.is_empty()) {
            match word {
                "no-gso" => o.gso = false,
                "no-gro" => o.gro = false,
                "no-mmsg" => o.mmsg = false,
                "none" => o = Offload::NONE,
                "all" => o = Offload::ALL,
                other => {
                    return Err(format!(
                        "CM_UDP_OFFLOAD: unknown word {other:?} (expected a comma-separated \
                         list of no-gso, no-gro, no-mmsg, none, all)"
                    ));
                }
            }
        }
        Ok(o)
    }

    /// The process's setting from `CM_UDP_OFFLOAD`.
    pub fn from_env() -> io::Result<Offload> {
        match std::env::var("CM_UDP_OFFLOAD") {
            Ok(v) => Offload::parse(&v).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e)),
            Err(_) => Ok(Offload::ALL),
        }
    }
}

/// Counters of one socket's batched I/O.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IoStats {
    /// Send system calls made (including refused ones).
    pub send_calls: u64,
    /// Datagrams the kernel accepted.
    pub datagrams_sent: u64,
    /// GSO sends the kernel refused (then sent another way).
    pub gso_refused: u64,
    /// Receive system calls that returned data.
    pub recv_calls: u64,
    /// Datagrams received (after cutting GRO buffers apart).
    pub datagrams_received: u64,
    /// Received buffers that GRO had coalesced from several datagrams.
    pub gro_buffers: u64,
}

/// A UDP socket with batched send and receive. Receives never block
/// (`MSG_DONTWAIT`: `WouldBlock` when nothing is waiting); sends block or
/// return `WouldBlock` as the socket is set (the socket's mode is shared
/// with every clone of its descriptor, so it is the owner's to choose).
#[derive(Debug)]
pub struct UdpIo {
    sock: UdpSocket,
    path: SendPath,
    gro: bool,
    /// `sendmmsg` and `recvmmsg` allowed.
    mmsg: bool,
    stats: IoStats,
}

impl UdpIo {
    /// Wrap `sock` with what `CM_UDP_OFFLOAD` allows and the kernel offers.
    pub fn new(sock: UdpSocket) -> io::Result<UdpIo> {
        UdpIo::with_offload(sock, Offload::from_env()?)
    }

    /// Wrap `sock` with what `offload` allows and the kernel offers.
    pub fn with_offload(sock: UdpSocket, offload: Offload) -> io::Result<UdpIo> {
        let fd = sock.as_raw_fd();
        let path = if offload.gso && sys::gso_known(fd) {
            SendPath::Gso
        } else if offload.mmsg {
            SendPath::Mmsg
        } else {
            SendPath::Single
        };
        let gro = offload.gro && sys::enable_gro(fd);
        Ok(UdpIo {
            sock,
            path,
            gro,
            mmsg: offload.mmsg,
            stats: IoStats::default(),
        })
    }

    /// Turn off the paths `offload` rules out (never turns one on): an
    /// application's or a benchmark's choice for one socket, as
    /// `CM_UDP_OFFLOAD` is for the process.
    pub fn restrict(&mut self, offload: Offload) {
        self.mmsg &= offload.mmsg;
        if !offload.gso && self.path == SendPath::Gso {
            self.path = self.fallback();
        }
        if !self.mmsg && self.path == SendPath::Mmsg {
            self.path = SendPath::Single;
        }
        if !offload.gro && self.gro {
            // Off, or the kernel keeps coalescing: then it stays reported.
            self.gro = !sys::set_gro(self.sock.as_raw_fd(), false);
        }
    }

    /// Where GSO falls back to: `sendmmsg` if allowed, else one per call.
    fn fallback(&self) -> SendPath {
        if self.mmsg {
            SendPath::Mmsg
        } else {
            SendPath::Single
        }
    }

    /// The socket.
    pub fn socket(&self) -> &UdpSocket {
        &self.sock
    }

    /// The socket back (GRO stays on if it was turned on).
    pub fn into_socket(self) -> UdpSocket {
        self.sock
    }

    /// How datagrams leave now (GSO can turn into `sendmmsg` on a refusal).
    pub fn send_path(&self) -> SendPath {
        self.path
    }

    /// How many datagrams of `segment` bytes to hand to one
    /// [`UdpIo::send_datagrams`] so that every system call it makes is
    /// full: one GSO run ([`MAX_GSO_BYTES`], at most [`MAX_BATCH`]) on the
    /// GSO path (64 datagrams of 1216 bytes would go as a run of 53 and
    /// one of 11), else [`MAX_BATCH`] (one `sendmmsg`, or that many calls
    /// of one datagram).
    pub fn run_len(&self, segment: usize) -> usize {
        match self.path {
            SendPath::Gso => (MAX_GSO_BYTES / segment.max(1)).clamp(1, MAX_BATCH),
            SendPath::Mmsg | SendPath::Single => MAX_BATCH,
        }
    }

    /// Whether the kernel coalesces received datagrams (UDP GRO).
    pub fn gro(&self) -> bool {
        self.gro
    }

    /// Whether receives take up to [`MAX_BATCH`] datagrams per call.
    pub fn batched_recv(&self) -> bool {
        self.mmsg
    }

    /// The counters so far.
    pub fn stats(&self) -> IoStats {
        self.stats
    }
}
