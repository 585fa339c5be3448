//! # cm-wrap: `LD_PRELOAD` congestion control for unmodified programs
//!
//! Loaded into a dynamically linked program (`cm wrap -- PROGRAM`), this
//! library interposes the calls that send UDP datagrams — `sendto`,
//! `send`, `sendmsg`, `sendmmsg` and `write` on IPv4 UDP sockets — and
//! hands each datagram to a [`cm_force::Engine`] on a thread of its own.
//! The engine queues it (MAXQ, drop-from-head by default), sends it from
//! the program's own socket when the Congestion Manager grants, and takes
//! feedback from the receiver CM on the destination host. The program
//! sees every send succeed at once, as with a kernel socket buffer; what
//! the path cannot carry is dropped at the queue instead of in the
//! network (transport-selection-middleware §4.3).
//!
//! Everything else passes straight to the C library: other descriptors,
//! other address families, loopback destinations (unless
//! `CM_WRAP_LOOPBACK=1`), DNS and the CM's own port, and the engine
//! thread's own calls. `close`, `dup2` and `dup3` are interposed to keep
//! the per-descriptor cache right; a forked child starts a fresh engine on
//! its first send.
//!
//! ## Limits
//!
//! - Static binaries and programs that make system calls directly (Go's
//!   runtime, for one) are not affected: there is nothing to interpose.
//! - Raw and IPv6 sockets are not wrapped; neither are `sendmsg` calls
//!   with ancillary data (GSO segment sizes, source-address control
//!   messages), which are passed on as they are.
//! - `MSG_DONTWAIT` and blocking make no difference: a wrapped send never
//!   blocks and never fails for want of room.
//! - When the program exits, what is still queued (at most MAXQ datagrams
//!   per flow) is discarded.
//!
//! This crate is the only one in the workspace that needs `unsafe` for
//! its purpose: exported C functions taking raw pointers, and `dlsym` for
//! the functions it interposes. Each block says what it relies on.
#![allow(unsafe_code)]
#![warn(missing_docs)]

mod hooks;
mod shared;
