//! The fast path: frames in shared memory, doorbells only when a side sleeps.
//!
//! A cross-CPU wake-up costs ~50 µs on the target machine and a
//! `SOCK_SEQPACKET` send/receive pair several µs of CPU, while a packet's
//! request, notify and update cost the core ~0.2 µs. So once a client is
//! connected, the frames of this protocol stop travelling through the
//! control socket and travel through two single-producer single-consumer
//! byte rings in a memory region both processes map, so grants,
//! notifications and updates cost no system call while both sides are
//! awake. The socket stays: it identifies the peer
//! (`SO_PEERCRED`), carries the handshake and the region's descriptors
//! (`SCM_RIGHTS`), and its hang-up is how the daemon learns a client died.
//!
//! ## Attaching
//!
//! After `Hello`, a client sends [`crate::ToDaemon::Attach`] on the socket.
//! The daemon answers [`crate::ToClient::Attached`] on the socket with three
//! descriptors: the region (a sealed `memfd`), the daemon's doorbell and the
//! client's doorbell (two `eventfd`s). From then on both sides send every
//! frame through the rings, in order, and read none from the socket. A
//! client that never attaches (or a daemon that refuses) keeps using the
//! socket: same frames, same meaning.
//!
//! ## Region layout (all integers little-endian, native atomics)
//!
//! ```text
//! 0      ring header "to daemon"   (256 bytes)
//! 256    ring header "to client"   (256 bytes)
//! 512    magic "CMSH" u32 | layout version u32 | ring_bytes u32
//! 576    client CPU + 1 u32 (written by a client each time it waits
//!        for the daemon by polling and yielding that CPU, taken (reset
//!        to 0) by the daemon when it looks: non-zero only if the client
//!        waited so since; a hint the daemon may use to run there)
//! 4096   ring data "to daemon"     (ring_bytes)
//! 4096+ring_bytes  ring data "to client" (ring_bytes)
//!
//! ring header: tail u64 @0 (producer) | head u64 @64 (consumer)
//!              | need_wake u32 @128 (set by a consumer going to sleep)
//!              | need_space u32 @192 (set by a producer finding it full)
//! record:      len u32 | 0 u32 | frame[len] | pad to 8 bytes
//!              (len = u32::MAX: skip to the start of the data: wrap)
//! ```
//!
//! Positions are byte counts that only grow (u64, never wrap in practice);
//! a record never straddles the end of the data area. A producer that finds
//! its ring empty past the first 16 KiB of the data area writes a wrap
//! record and starts again from the beginning, so a ring that never holds
//! much keeps only its first pages resident (consumers need nothing new:
//! it is an ordinary wrap).
//!
//! ## Doorbells: wake only a sleeper
//!
//! A consumer about to sleep sets its ring's `need_wake`, looks at the ring
//! once more, and sleeps on its doorbell only if the ring is still empty. A
//! producer, after publishing a record, takes `need_wake` (swaps it to 0) and
//! rings the consumer's doorbell only if it was set. All four accesses are
//! sequentially consistent, so one side always sees the other (Dekker's mutual
//! exclusion): no wake-up is lost, and a busy consumer costs its producers no
//! system call at all (the virtio "event suppression" and io_uring
//! `SQ_NEED_WAKEUP` idea). A sleeper silences its doorbell before it arms, and
//! rings it itself if it finds a frame after arming, so its descriptor is
//! readable exactly when something may wait (a ring still on its way costs one
//! spurious wake-up). `need_space` works the same way in the other direction,
//! for a producer that found the ring full.
//!
//! ## Trust
//!
//! The daemon maps memory a client can write at any time. It never keeps a
//! reference into the region: positions it owns live in its own memory
//! (the region only gets copies), the peer's position is checked against
//! the ring's size on every read, every record's length against what was
//! published, and a frame is copied out before it is decoded (so it cannot
//! change under the decoder). A client that breaks the layout gets
//! [`RingError::Corrupt`] and is disconnected; it can hurt no one else.
//! The region is sealed against shrinking and growing, so no client can
//! make the daemon's accesses fault.

mod doorbell;
mod pass;
mod region;
mod ring;

pub use doorbell::Doorbell;
pub use pass::{ATTACH_FDS, recv_with_fds, send_with_fds};
pub use region::{Region, Side};
pub use ring::RingError;

/// Size of each ring's data area unless configured.
pub const DEFAULT_RING_BYTES: u32 = MIN_RING_BYTES;

/// Smallest ring accepted: a frame of the largest size fits wherever the
/// ring's positions stand (a record never straddles the end, so in the
/// worst case it needs twice its size).
pub const MIN_RING_BYTES: u32 = 2 * crate::MAX_FRAME as u32 + 4096;

/// Largest ring accepted.
pub const MAX_RING_BYTES: u32 = 16 << 20;

/// Version of the region layout (in the region's own header).
pub const LAYOUT_VERSION: u32 = 1;
