//! The hand-over from a wrapped program's threads to the engine's thread:
//! a bounded queue and an `eventfd` that wakes the engine.
//!
//! Pushing never blocks for longer than a short mutex hold and never
//! allocates beyond the datagram itself; a full inbox drops (and counts)
//! rather than grow or stall the program.

use std::collections::VecDeque;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use rustix::event::{EventfdFlags, eventfd};

use crate::engine::Offer;

/// Messages the inbox holds at most.
pub const INBOX_CAPACITY: usize = 4096;

/// One message from the program's side.
#[derive(Debug)]
pub enum Msg {
    /// A datagram.
    Offer(Offer),
    /// The program closed this descriptor.
    Close(i32),
    /// Write the report now and set the flag (the program is exiting).
    Flush(std::sync::Arc<std::sync::atomic::AtomicBool>),
}

/// The hand-over queue.
#[derive(Debug)]
pub struct Inbox {
    q: Mutex<VecDeque<Msg>>,
    efd: OwnedFd,
    /// Datagrams dropped because the inbox was full.
    pub overflowed: AtomicU64,
}

impl Inbox {
    /// An empty inbox.
    pub fn new() -> std::io::Result<Inbox> {
        let efd = eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK)?;
        Ok(Inbox {
            q: Mutex::new(VecDeque::new()),
            efd,
            overflowed: AtomicU64::new(0),
        })
    }

    /// Hand a message over. False (dropped, counted) when full; close
    /// messages are always taken.
    pub fn push(&self, msg: Msg) -> bool {
        {
            let Ok(mut q) = self.q.lock() else {
                return false;
            };
            if q.len() >= INBOX_CAPACITY && matches!(msg, Msg::Offer(_)) {
                self.overflowed.fetch_add(1, Ordering::Relaxed);
                return false;
            }
            q.push_back(msg);
        }
        let _ = rustix::io::write(&self.efd, &1u64.to_ne_bytes());
        true
    }

    /// Take everything waiting into `out`.
    pub fn drain(&self, out: &mut Vec<Msg>) {
        let mut b = [0u8; 8];
        let _ = rustix::io::read(&self.efd, &mut b);
        if let Ok(mut q) = self.q.lock() {
            out.extend(q.drain(..));
        }
    }

    /// The descriptor that becomes readable when a message waits.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.efd.as_fd()
    }
}
