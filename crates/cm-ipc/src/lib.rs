//! # cm-ipc: the Congestion Manager control protocol
//!
//! What a CM client (libcm) and the CM daemon (`cmd`) say to each other over
//! the daemon's control socket: the papers' API calls as messages
//! (cm-implementation-linux §2.1, §5 "bulk" calls), in a small versioned
//! binary encoding. This crate opens no socket: it encodes and decodes,
//! and maps the shared-memory rings with their `eventfd` doorbells
//! ([`shm`]).
//!
//! ## Where it sits
//!
//! ```text
//! cm-core  <-  cm-ipc  <-  the daemon (cm-daemon), libcm
//! ```
//!
//! It depends on `cm-core` alone. Messages carry `cm-core`'s values
//! ([`cm_core::LossMode`], rates, RTTs, flow ids as integers). The daemon
//! decodes [`ToDaemon`] and answers with [`ToClient`]; libcm does the reverse.
//! Layout: [`ToDaemon`], [`ToClient`] and their values in `msg`, each message's
//! tag and body layout in `msg/codec/`, the bounds-checked field reader in
//! `field.rs`, the frame header and batching in `frame.rs`.
//!
//! ## One message, encoded and decoded
//!
//! ```
//! use cm_ipc::{Frame, ToDaemon, decode_frame};
//!
//! let msg = ToDaemon::Notify { flow: 7, nsent: 1460 };
//! let mut frame = Frame::new();
//! frame.push(&msg);
//! let bytes = frame.finish();
//! assert_eq!(decode_frame::<ToDaemon>(&bytes)?, vec![msg]);
//! # Ok::<(), cm_ipc::DecodeError>(())
//! ```
//!
//! ## Transport
//!
//! A Unix `SOCK_SEQPACKET` socket: message boundaries are kept by the
//! kernel, so one socket message carries exactly one [`Frame`]. The
//! control socket is what an application puts in its select/poll/epoll set
//! (cm-implementation-linux §2.2: "select() on a single per-application CM
//! control socket"); it is readable when grants or notifications wait.
//!
//! ## Frames and batching
//!
//! A frame is a header and up to [`MAX_MESSAGES`] messages:
//!
//! ```text
//! frame   = magic:u16 "CM" (0x4d43 LE) | version:u8 | flags:u8 (0) | count:u16 | message*
//! message = tag:u8 | len:u16 | body[len]
//! ```
//!
//! All integers are little-endian. Batching is what makes the daemon fast:
//! a cross-CPU wake-up costs ~50 µs on the target machine, so libcm sends
//! the notifications, updates and requests of many packets in one frame,
//! and the daemon answers with all the grants it issued in one frame
//! (the generalisation of `cm_bulk_request`/`_notify`/`_update`/`_query`,
//! cm-implementation-linux §5).
//!
//! ## Shared-memory rings
//!
//! Once connected, a client sends [`ToDaemon::Attach`] and from then on
//! the same frames travel through two rings in a memory region both sides
//! map, with an `eventfd` doorbell rung only for a side that sleeps; the
//! socket keeps the peer's identity, the handshake and the hang-up. See
//! [`shm`] for the layout, the wake-up protocol and the trust rules.
//!
//! ## Version
//!
//! [`VERSION`] is in every frame header; the first message a client sends
//! is [`ToDaemon::Hello`], answered by [`ToClient::Welcome`] or an
//! [`ErrorCode::UnsupportedVersion`] error. A frame of another version is
//! rejected whole.
//!
//! ## Replies
//!
//! Calls that return a value (`open`, `query`, `mtu`, `getmacroflow`,
//! `setmacroflow`, `stat`, `set_controller`) carry a client-chosen `seq`
//! that the reply echoes. Fire-and-forget calls (`request`, `notify`,
//! `update`, `close`, `thresh`, `set_capacity`, ...) get no reply; if one
//! fails the daemon sends an [`ToClient::Error`] with `seq` 0 naming the
//! flow. A refusal that has more to say than its code (a controller spec
//! that does not parse) is a [`ToClient::Refused`] with the reason in
//! words.
//!
//! ## Waiting: spin, then block
//!
//! Neither side should pay a sleep and a wake-up per batch: a cross-CPU
//! wake-up of a sleeping thread costs ~50 µs on the target machine, more
//! than a batch's work. So each side, when it would block, first polls
//! without blocking for a bounded time, yielding the CPU between polls:
//! the daemon for `spin_us` (its configuration) after a loop turn that
//! did work, a client for libcm's `Cm::set_spin` (adaptive: longer while
//! answers come within it, shorter while they do not) after it sent a call
//! that [`ToDaemon::expects_answer`]. A frame sent to a peer that is polling
//! needs no wake-up; a peer that has blocked is woken by the frame
//! arriving on its socket as before, so a wake-up cannot be lost (the
//! socket is the only signal; the spin only shortens the wait). This
//! changes no bytes on the wire.
//!
//! ## Signed estimates
//!
//! Rates, RTTs and loss are encoded as signed values where negative means
//! "no estimate yet" (RFC 3124's `cm_query` returns unsigned values and
//! cannot say so).
//!
//! ```
//! use cm_ipc::{Frame, ToDaemon};
//! let mut f = Frame::new();
//! f.push(&ToDaemon::Request { flow: 7, k: 4 });
//! f.push(&ToDaemon::Notify { flow: 7, nsent: 1460 });
//! let bytes = f.finish();
//! let msgs: Vec<ToDaemon> = cm_ipc::decode_frame(&bytes).unwrap();
//! assert_eq!(msgs[0], ToDaemon::Request { flow: 7, k: 4 });
//! ```
#![warn(missing_docs)]

mod field;
mod frame;
mod msg;
pub mod shm;
pub mod stat;

pub use field::DecodeError;
pub use frame::{Frame, decode_frame, decode_frame_each, decode_frame_into};
pub use msg::Message;
pub use msg::examples;
pub use msg::{
    ErrorCode, Estimate, FlowStat, MAX_NAME, MAX_SPEC, MAX_WHY, MacroflowStat, PeerMode, PeerStat,
    ToClient, ToDaemon,
};

/// Where the daemon listens unless told otherwise: `$CM_SOCKET`, else
/// `$XDG_RUNTIME_DIR/cm.sock`, else `/run/cm.sock` (one definition for the
/// daemon and every client).
pub fn default_socket_path() -> std::path::PathBuf {
    if let Some(p) = std::env::var_os("CM_SOCKET") {
        return std::path::PathBuf::from(p);
    }
    match std::env::var_os("XDG_RUNTIME_DIR") {
        Some(d) if !d.is_empty() => std::path::Path::new(&d).join("cm.sock"),
        _ => std::path::PathBuf::from("/run/cm.sock"),
    }
}

/// Protocol version carried in every frame header. Version 2 added the
/// controller and capacity of a macroflow to [`MacroflowStat`] (and the
/// `SetController`, `SetCapacity`, `Done` and `Refused` messages);
/// version 3 the CM protocol's peer state of a flow to [`FlowStat`] (and
/// `SetPeer`, `SetFeedbackLag`); version 4 the `CapacitySample` message
/// (packet-bunch samples for a macroflow's capacity filter); version 5
/// the kernel TCP connection's local address in [`FlowStat`]; version 6
/// a macroflow's loss events and timeouts in [`MacroflowStat`]; version 7
/// the age of the lost data in `Update` (when the most recently sent of the
/// lost bytes left the client).
pub const VERSION: u8 = 7;

/// Frame magic, "CM" read as a little-endian u16.
pub const MAGIC: u16 = u16::from_le_bytes(*b"CM");

/// Most messages one frame may carry.
pub const MAX_MESSAGES: usize = 4096;

/// Largest frame either side sends (well inside the default socket buffer).
pub const MAX_FRAME: usize = 64 * 1024;
