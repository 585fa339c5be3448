//! One single-producer single-consumer ring of length-prefixed frames over
//! shared memory (layout in the module docs of [`crate::shm`]).
//!
//! Every access to shared memory is an atomic access to an aligned u64 or
//! u32, so the peer writing the same bytes at the same time is a race on
//! values, never undefined behaviour: a hostile peer can make this side read
//! garbage, which the checks here turn into [`RingError::Corrupt`], and
//! nothing else. Each side keeps its own position in its own memory and only
//! publishes copies.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed, Ordering::SeqCst};

/// The record header of a wrap marker: skip to the start of the data.
const WRAP: u64 = u32::MAX as u64;
/// Record header size.
const HEADER: u64 = 8;
/// Where an empty ring starts again from the beginning (see
/// [`Producer::push`]).
const REWIND_AT: u64 = 16 * 1024;

/// Why a ring operation failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RingError {
    /// The peer broke the layout (positions, lengths or markers that cannot
    /// be): the link is unusable.
    #[error("shared ring corrupt: {0}")]
    Corrupt(&'static str),
    /// A frame larger than the ring can ever hold.
    #[error("frame of {0} bytes does not fit the ring")]
    TooLarge(usize),
    /// The region is not one of ours (size, magic or version).
    #[error("not a CM ring region: {0}")]
    BadRegion(&'static str),
}

/// Pointers to one ring's header and data inside a mapped region.
///
/// Invariant (established by `Region`, which owns the mapping and every
/// `RingView` of it): `hdr` points to 256 writable bytes and `data` to
/// `cap` writable bytes, both 8-aligned, mapped for as long as the view
/// exists; `cap` is a non-zero multiple of 8.
#[derive(Debug)]
pub(crate) struct RingView {
    hdr: *mut u8,
    data: *mut u8,
    cap: u64,
}

// SAFETY: the view only performs atomic accesses through its pointers; the
// mapping is shared memory that any thread may access.
#[allow(unsafe_code)]
unsafe impl Send for RingView {}

#[allow(unsafe_code)]
impl RingView {
    /// # Safety
    /// See the type's invariant.
    pub(crate) unsafe fn new(hdr: *mut u8, data: *mut u8, cap: u64) -> RingView {
        RingView { hdr, data, cap }
    }

    fn u64_at(&self, off: usize) -> &AtomicU64 {
        debug_assert!(off + 8 <= 256 && off % 8 == 0);
        // SAFETY: `off` is one of the fixed header offsets below (in bounds,
        // aligned); the mapping outlives `self` (type invariant); atomics
        // may alias memory another process writes.
        unsafe { &*(self.hdr.add(off).cast::<AtomicU64>()) }
    }

    fn u32_at(&self, off: usize) -> &AtomicU32 {
        debug_assert!(off + 4 <= 256 && off % 4 == 0);
        // SAFETY: as in `u64_at`.
        unsafe { &*(self.hdr.add(off).cast::<AtomicU32>()) }
    }

    fn tail(&self) -> &AtomicU64 {
        self.u64_at(0)
    }
    fn head(&self) -> &AtomicU64 {
        self.u64_at(64)
    }
    fn need_wake(&self) -> &AtomicU32 {
        self.u32_at(128)
    }
    fn need_space(&self) -> &AtomicU32 {
        self.u32_at(192)
    }

    /// The data word at byte index `idx` (8-aligned, `idx < cap`: every
    /// caller derives `idx` from `pos % cap` or checks `idx + len <= cap`).
    fn word(&self, idx: u64) -> &AtomicU64 {
        assert!(idx < self.cap && idx % 8 == 0, "ring index out of bounds");
        // SAFETY: checked in bounds and aligned just above; mapping alive.
        unsafe { &*(self.data.add(idx as usize).cast::<AtomicU64>()) }
    }

    pub(crate) fn cap(&self) -> u64 {
        self.cap
    }

    /// The current published positions (for initialising a side).
    pub(crate) fn positions(&self) -> (u64, u64) {
        (self.head().load(SeqCst), self.tail().load(SeqCst))
    }
}

fn padded(len: u64) -> u64 {
    HEADER + len.div_ceil(8) * 8
}

/// The producing side of a ring: its own tail.
#[derive(Debug)]
pub(crate) struct Producer {
    pos: u64,
}

impl Producer {
    pub(crate) fn at(pos: u64) -> Producer {
        Producer { pos }
    }

    /// Append one frame; `Ok(false)` if the ring has no room for it now.
    pub(crate) fn push(&mut self, r: &RingView, frame: &[u8]) -> Result<bool, RingError> {
        let cap = r.cap;
        let len = frame.len() as u64;
        let need = padded(len);
        // A record never straddles the end, so in the worst case it needs
        // the space up to the end (less than `need`) and `need` more: a
        // larger one might never fit, even in an empty ring.
        if 2 * need - HEADER > cap || len >= WRAP {
            return Err(RingError::TooLarge(frame.len()));
        }
        let used = self.used(r)?;
        let idx = self.pos % cap;
        let to_end = cap - idx;
        // An empty ring past its first [`REWIND_AT`] bytes starts again
        // from its beginning, through a wrap marker (which every consumer
        // follows): a ring that never holds much then only ever touches its
        // first pages, so a thousand clients do not each keep both rings'
        // pages resident (`cm bench load --bulk --clients 1000`: 261 MiB of
        // shared memory without this). The skipped bytes count as used
        // until the consumer passes the marker at its next pop, so until
        // then `idx - need` (at least half of `idx`) is free.
        let rewind = used == 0 && idx >= REWIND_AT && need <= idx / 2;
        let wrap = to_end < need || rewind;
        let total = if wrap { to_end + need } else { need };
        if cap - used < total {
            return Ok(false);
        }
        let mut at = idx;
        if wrap {
            r.word(idx).store(WRAP, SeqCst);
            self.pos += to_end;
            at = 0;
        }
        r.word(at).store(len, Relaxed);
        // Whole words as single loads; only the tail is assembled (a
        // variable-length copy per word was a `memmove` call per 8 bytes).
        let mut words = frame.chunks_exact(8);
        let mut w_at = at + HEADER;
        for chunk in words.by_ref() {
            let mut b = [0u8; 8];
            b.copy_from_slice(chunk);
            r.word(w_at).store(u64::from_le_bytes(b), Relaxed);
            w_at += 8;
        }
        let tail = words.remainder();
        if !tail.is_empty() {
            let mut b = [0u8; 8];
            for (d, s) in b.iter_mut().zip(tail) {
                *d = *s;
            }
            r.word(w_at).store(u64::from_le_bytes(b), Relaxed);
        }
        self.pos += need;
        // Publishes the words above (SeqCst includes release).
        r.tail().store(self.pos, SeqCst);
        Ok(true)
    }

    /// Whether a record of `need` bytes (header and padding included) fits
    /// now, a wrap marker before it included.
    fn fits(&self, r: &RingView, need: u64) -> Result<bool, RingError> {
        let cap = r.cap;
        let used = self.used(r)?;
        let to_end = cap - self.pos % cap;
        let total = if to_end < need { to_end + need } else { need };
        Ok(cap - used >= total)
    }

    /// Bytes published and not yet consumed, checked against the ring.
    fn used(&self, r: &RingView) -> Result<u64, RingError> {
        let head = r.head().load(SeqCst);
        let used = self.pos.wrapping_sub(head);
        if used > r.cap || head % 8 != 0 {
            return Err(RingError::Corrupt("consumer position"));
        }
        Ok(used)
    }

    /// After publishing: whether the consumer asked to be woken (and the
    /// request is now taken: ring its doorbell exactly once).
    pub(crate) fn take_wake(&self, r: &RingView) -> bool {
        r.need_wake().load(SeqCst) != 0 && r.need_wake().swap(0, SeqCst) != 0
    }

    /// The ring was full: ask the consumer to ring the producer's doorbell when
    /// it frees space. Returns whether there is room for `len` bytes after all
    /// (then no doorbell will come; retry at once).
    pub(crate) fn want_space(&self, r: &RingView, len: usize) -> Result<bool, RingError> {
        r.need_space().store(1, SeqCst);
        self.fits(r, padded(len as u64))
    }
}

/// The consuming side of a ring: its own head. Frames over
/// [`crate::MAX_FRAME`] are refused as corrupt.
#[derive(Debug)]
pub(crate) struct Consumer {
    pos: u64,
}

impl Consumer {
    pub(crate) fn at(pos: u64) -> Consumer {
        Consumer { pos }
    }

    /// Take the next frame into `out`; `Ok(false)` when the ring is empty.
    pub(crate) fn pop(&mut self, r: &RingView, out: &mut Vec<u8>) -> Result<bool, RingError> {
        let cap = r.cap;
        let tail = r.tail().load(SeqCst);
        let mut avail = tail.wrapping_sub(self.pos);
        if avail == 0 {
            return Ok(false);
        }
        if avail > cap || avail % 8 != 0 {
            return Err(RingError::Corrupt("producer position"));
        }
        let mut idx = self.pos % cap;
        let mut w = r.word(idx).load(SeqCst);
        let mut skipped = 0;
        if w == WRAP {
            skipped = cap - idx;
            if avail <= skipped {
                return Err(RingError::Corrupt("wrap marker without a record"));
            }
            avail -= skipped;
            idx = 0;
            w = r.word(0).load(SeqCst);
        }
        if w >> 32 != 0 {
            return Err(RingError::Corrupt("record header"));
        }
        let len = w;
        let need = padded(len);
        if len as usize > crate::MAX_FRAME || need > avail || idx + need > cap {
            return Err(RingError::Corrupt("record length"));
        }
        // Copied out a word at a time into whole 8-byte slots, then cut
        // to the frame's length (a variable-length copy per word was a
        // `memmove` call per 8 bytes: a tenth of the daemon's CPU under
        // `api_overhead`'s `alf/shm`).
        out.clear();
        out.resize(len.div_ceil(8) as usize * 8, 0);
        let mut at = idx + HEADER;
        for slot in out.chunks_exact_mut(8) {
            slot.copy_from_slice(&r.word(at).load(Relaxed).to_le_bytes());
            at += 8;
        }
        out.truncate(len as usize);
        self.pos += skipped + need;
        // Frees the space (SeqCst includes release: this side's reads came
        // first).
        r.head().store(self.pos, SeqCst);
        Ok(true)
    }

    /// Whether a frame (or garbage to report) waits.
    pub(crate) fn pending(&self, r: &RingView) -> bool {
        r.tail().load(SeqCst) != self.pos
    }

    /// About to sleep: ask the producer to ring the consumer's doorbell for the
    /// next frame. Returns whether the ring is still empty (safe to sleep).
    pub(crate) fn arm(&self, r: &RingView) -> bool {
        r.need_wake().store(1, SeqCst);
        !self.pending(r)
    }

    /// [`Consumer::arm`], also telling whether a request was standing
    /// until now (`false` after an earlier arm: the producer took it, so
    /// its doorbell rang or is about to).
    pub(crate) fn arm_swap(&self, r: &RingView) -> (bool, bool) {
        let was = r.need_wake().swap(1, SeqCst) != 0;
        (!self.pending(r), was)
    }

    /// Not sleeping after all: spare the producer a doorbell.
    pub(crate) fn disarm(&self, r: &RingView) {
        r.need_wake().store(0, SeqCst);
    }

    /// Whether the consumer's doorbell request is still standing (false once
    /// the producer took it, i.e. rang or is about to ring).
    pub(crate) fn armed(&self, r: &RingView) -> bool {
        r.need_wake().load(SeqCst) != 0
    }

    /// After consuming: whether the producer waits for space (the request
    /// is taken: ring its doorbell).
    pub(crate) fn take_space_wanted(&self, r: &RingView) -> bool {
        r.need_space().load(SeqCst) != 0 && r.need_space().swap(0, SeqCst) != 0
    }
}
