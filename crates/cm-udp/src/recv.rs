//! Receiving: `recvmmsg` batches, GRO buffers cut back into datagrams.

use std::io;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;

use crate::sys::{self, Received};
use crate::{MAX_BATCH, UdpIo};

/// Bytes of one receive slot when GRO may coalesce (the kernel's limit
/// for a coalesced UDP buffer).
const GRO_SLOT: usize = 65_536;

/// One received datagram: where it is in its [`RecvBatch`] and who sent it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Datagram {
    slot: usize,
    offset: usize,
    len: usize,
    /// The sender.
    pub from: Option<SocketAddr>,
    /// The datagram was longer than its buffer and was cut.
    pub truncated: bool,
}

impl Datagram {
    /// Its length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it is empty (a zero-length datagram).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// Buffers for [`UdpIo::recv`] and the datagrams of the last receive.
#[derive(Debug)]
pub struct RecvBatch {
    slots: Vec<Vec<u8>>,
    received: Vec<Received>,
    datagrams: Vec<Datagram>,
    /// Buffers the last receive offered the kernel, and filled.
    offered: usize,
    filled: usize,
}

impl RecvBatch {
    /// Room for `slots` receive buffers (at most [`MAX_BATCH`] are used per
    /// call) of `slot_bytes` each; with GRO on a socket, each slot is made
    /// at least 64 KiB by the first receive.
    pub fn new(slots: usize, slot_bytes: usize) -> RecvBatch {
        let slots = slots.clamp(1, MAX_BATCH);
        RecvBatch {
            slots: vec![vec![0; slot_bytes.max(1)]; slots],
            received: vec![Received::default(); slots],
            datagrams: Vec::new(),
            offered: 0,
            filled: 0,
        }
    }

    /// Whether the last receive filled every buffer it offered: if not,
    /// the socket had nothing more waiting at that moment, and a caller
    /// draining it can stop without another (empty) system call.
    pub fn filled_all(&self) -> bool {
        self.offered > 0 && self.filled == self.offered
    }

    /// The datagrams of the last receive, in arrival order.
    pub fn datagrams(&self) -> &[Datagram] {
        &self.datagrams
    }

    /// The bytes of `d`.
    pub fn data(&self, d: &Datagram) -> &[u8] {
        self.slots
            .get(d.slot)
            .and_then(|s| s.get(d.offset..d.offset + d.len))
            .unwrap_or(&[])
    }

    /// The datagrams of the last receive with their bytes.
    pub fn iter(&self) -> impl Iterator<Item = (Option<SocketAddr>, &[u8])> + '_ {
        self.datagrams.iter().map(|d| (d.from, self.data(d)))
    }
}

impl UdpIo {
    /// Receive what is waiting, up to one batch: `recvmmsg` of up to
    /// [`MAX_BATCH`] buffers (one without batching), each cut into its
    /// datagrams if GRO coalesced it. Returns the number of datagrams now in
    /// `batch`; `WouldBlock` if none was waiting.
    pub fn recv(&mut self, batch: &mut RecvBatch) -> io::Result<usize> {
        batch.datagrams.clear();
        batch.offered = 0;
        batch.filled = 0;
        if self.gro {
            for s in &mut batch.slots {
                if s.len() < GRO_SLOT {
                    s.resize(GRO_SLOT, 0);
                }
            }
        }
        let n = if self.mmsg { batch.slots.len() } else { 1 };
        let offered = n.min(batch.slots.len());
        let got = sys::recvmmsg(
            self.sock.as_raw_fd(),
            &mut batch.slots,
            offered,
            &mut batch.received,
        )?;
        self.stats.recv_calls += 1;
        batch.offered = offered;
        batch.filled = got;
        for (slot, r) in batch.received.iter().take(got).enumerate() {
            match r.segment {
                Some(seg) if seg < r.len => {
                    self.stats.gro_buffers += 1;
                    let mut offset = 0;
                    while offset < r.len {
                        let len = seg.min(r.len - offset);
                        batch.datagrams.push(Datagram {
                            slot,
                            offset,
                            len,
                            from: r.from,
                            truncated: r.truncated,
                        });
                        offset += len;
                    }
                }
                _ => batch.datagrams.push(Datagram {
                    slot,
                    offset: 0,
                    len: r.len,
                    from: r.from,
                    truncated: r.truncated,
                }),
            }
        }
        self.stats.datagrams_received += batch.datagrams.len() as u64;
        Ok(batch.datagrams.len())
    }
}
