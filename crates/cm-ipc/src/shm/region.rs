//! The shared region: a sealed `memfd` mapped by the daemon and one client,
//! holding the two rings (layout in [`crate::shm`]).

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicU32, Ordering};

use rustix::fs::{MemfdFlags, SealFlags};
use rustix::mm::{MapFlags, ProtFlags};

use super::ring::{Consumer, Producer, RingError, RingView};
use super::{LAYOUT_VERSION, MAX_RING_BYTES, MIN_RING_BYTES};

/// Start of the ring data (one page of headers before it).
const DATA: usize = 4096;
/// Region magic, "CMSH" as a little-endian u32.
const MAGIC: u32 = u32::from_le_bytes(*b"CMSH");
/// Header offsets.
const TO_DAEMON_HDR: usize = 0;
const TO_CLIENT_HDR: usize = 256;
const INFO: usize = 512;
/// The client's CPU + 1 (0: not known), on a cache line of its own.
const CLIENT_CPU: usize = 576;

/// Which end of the link this process is: it produces into one ring and
/// consumes the other.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// libcm: produces calls, consumes grants and replies.
    Client,
    /// cmd: produces grants and replies, consumes calls.
    Daemon,
}

/// One mapped region and this side's positions in its two rings.
#[derive(Debug)]
pub struct Region {
    map: *mut u8,
    len: usize,
    fd: OwnedFd,
    tx_view: RingView,
    rx_view: RingView,
    tx: Producer,
    rx: Consumer,
}

// SAFETY: the region owns its mapping; its views perform atomic accesses
// only, so moving it to another thread is sound.
#[allow(unsafe_code)]
unsafe impl Send for Region {}

impl Region {
    /// The daemon's end of a new region with rings of `ring_bytes` each
    /// (rounded up to a multiple of 8, within [`MIN_RING_BYTES`] and
    /// [`MAX_RING_BYTES`]). The memfd is sealed against shrinking and
    /// growing before anyone else sees it.
    pub fn create(ring_bytes: u32) -> std::io::Result<Region> {
        let ring = ring_bytes.clamp(MIN_RING_BYTES, MAX_RING_BYTES).div_ceil(8) * 8;
        let len = DATA + 2 * ring as usize;
        let fd =
            rustix::fs::memfd_create("cm-ring", MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING)?;
        rustix::fs::ftruncate(&fd, len as u64)?;
        rustix::fs::fcntl_add_seals(&fd, SealFlags::SHRINK | SealFlags::GROW | SealFlags::SEAL)?;
        let map = map_shared(&fd, len)?;
        let r = Region::from_map(map, len, fd, ring, Side::Daemon);
        let info = r.info();
        info[1].store(LAYOUT_VERSION, Ordering::SeqCst);
        info[2].store(ring, Ordering::SeqCst);
        info[0].store(MAGIC, Ordering::SeqCst);
        Ok(r)
    }

    /// The client's end of a region received from the daemon, checked
    /// (size, magic, layout version, positions) before use.
    pub fn open(fd: OwnedFd, side: Side) -> Result<Region, RingError> {
        let st = rustix::fs::fstat(&fd).map_err(|_| RingError::BadRegion("fstat"))?;
        let len = usize::try_from(st.st_size).map_err(|_| RingError::BadRegion("size"))?;
        let max = DATA + 2 * MAX_RING_BYTES as usize;
        if !(DATA + 2 * MIN_RING_BYTES as usize..=max).contains(&len) {
            return Err(RingError::BadRegion("size"));
        }
        let map = map_shared(&fd, len).map_err(|_| RingError::BadRegion("mmap"))?;
        let ring = ((len - DATA) / 2) as u32;
        let mut r = Region::from_map(map, len, fd, ring, side);
        let info = r.info();
        if info[0].load(Ordering::SeqCst) != MAGIC {
            return Err(RingError::BadRegion("magic"));
        }
        if info[1].load(Ordering::SeqCst) != LAYOUT_VERSION {
            return Err(RingError::BadRegion("layout version"));
        }
        if info[2].load(Ordering::SeqCst) != ring || ring % 8 != 0 {
            return Err(RingError::BadRegion("ring size"));
        }
        let (_, tx_tail) = r.tx_view.positions();
        let (rx_head, _) = r.rx_view.positions();
        if tx_tail % 8 != 0 || rx_head % 8 != 0 {
            return Err(RingError::BadRegion("positions"));
        }
        r.tx = Producer::at(tx_tail);
        r.rx = Consumer::at(rx_head);
        Ok(r)
    }

    #[allow(unsafe_code)]
    fn from_map(map: *mut u8, len: usize, fd: OwnedFd, ring: u32, side: Side) -> Region {
        let (to_daemon, to_client) = {
            // SAFETY: `map` is a live mapping of `len = DATA + 2 * ring`
            // bytes (page-aligned); both headers lie in the first page and
            // each data area lies inside the mapping; `ring` is a non-zero
            // multiple of 8. The views live inside `Region`, which unmaps
            // only on drop.
            unsafe {
                let d = RingView::new(map.add(TO_DAEMON_HDR), map.add(DATA), u64::from(ring));
                let c = RingView::new(
                    map.add(TO_CLIENT_HDR),
                    map.add(DATA + ring as usize),
                    u64::from(ring),
                );
                (d, c)
            }
        };
        let (tx_view, rx_view) = match side {
            Side::Client => (to_daemon, to_client),
            Side::Daemon => (to_client, to_daemon),
        };
        Region {
            map,
            len,
            fd,
            tx_view,
            rx_view,
            tx: Producer::at(0),
            rx: Consumer::at(0),
        }
    }

    /// magic, layout version, ring bytes.
    #[allow(unsafe_code)]
    fn info(&self) -> &[AtomicU32; 3] {
        // SAFETY: offset INFO..INFO+12 lies in the header page of a live
        // mapping, 4-aligned; atomics may alias memory the peer writes.
        unsafe { &*(self.map.add(INFO).cast::<[AtomicU32; 3]>()) }
    }

    #[allow(unsafe_code)]
    fn client_cpu_cell(&self) -> &AtomicU32 {
        // SAFETY: offset CLIENT_CPU..+4 lies in the header page of a live
        // mapping, 4-aligned, apart from every other field.
        unsafe { &*(self.map.add(CLIENT_CPU).cast::<AtomicU32>()) }
    }

    /// Client: record the CPU this thread waits on, yielding it, for the
    /// daemon's answer (a store only when the cell does not already say
    /// so: at most once per look of the daemon's, which takes it).
    pub fn note_cpu(&self, cpu: u32) {
        let cell = self.client_cpu_cell();
        let v = cpu.saturating_add(1);
        if cell.load(Ordering::Relaxed) != v {
            cell.store(v, Ordering::Relaxed);
        }
    }

    /// Daemon: the CPU the client said it waits on, yielding it, if it
    /// waited so since the last take (untrusted: any value; a hint, never
    /// an index without a check). A client that stops waiting that way,
    /// or never did, has none: no stale CPU outlives its waits.
    pub fn take_client_cpu(&self) -> Option<u32> {
        let cell = self.client_cpu_cell();
        // A load first: no store (no cache line taken from the client)
        // while it has nothing to say.
        if cell.load(Ordering::Relaxed) == 0 {
            return None;
        }
        cell.swap(0, Ordering::Relaxed).checked_sub(1)
    }

    /// The memfd (to pass to the client).
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// Bytes of each ring's data area.
    pub fn ring_bytes(&self) -> u32 {
        self.tx_view.cap() as u32
    }

    /// Publish one frame to the peer; `Ok(false)` when the ring is full now.
    pub fn push(&mut self, frame: &[u8]) -> Result<bool, RingError> {
        self.tx.push(&self.tx_view, frame)
    }

    /// After [`Region::push`]: whether the peer sleeps and must have its
    /// doorbell rung (the request is taken: ring exactly once).
    pub fn take_peer_wake(&self) -> bool {
        self.tx.take_wake(&self.tx_view)
    }

    /// The outgoing ring was full: ask the peer to ring this side's doorbell
    /// when it frees space. Returns whether `len` bytes fit after all (retry
    /// now).
    pub fn want_space(&self, len: usize) -> Result<bool, RingError> {
        self.tx.want_space(&self.tx_view, len)
    }

    /// Take the peer's next frame into `out`; `Ok(false)` when none waits.
    pub fn pop(&mut self, out: &mut Vec<u8>) -> Result<bool, RingError> {
        self.rx.pop(&self.rx_view, out)
    }

    /// Whether a frame from the peer waits.
    pub fn pending(&self) -> bool {
        self.rx.pending(&self.rx_view)
    }

    /// About to sleep on this side's doorbell: ask the peer to ring it for its
    /// next frame. Returns whether nothing waits (sleeping is safe); if
    /// something does, consume it instead (and [`Region::disarm`]).
    pub fn arm(&self) -> bool {
        self.rx.arm(&self.rx_view)
    }

    /// [`Region::arm`], also returning whether this side's request was still
    /// standing: after an earlier arm, `false` means the peer took it and its
    /// ring of this side's doorbell came or is coming (so a consumer can count
    /// the rings it is owed).
    pub fn arm_counted(&self) -> (bool, bool) {
        self.rx.arm_swap(&self.rx_view)
    }

    /// Withdraw a doorbell request.
    pub fn disarm(&self) {
        self.rx.disarm(&self.rx_view)
    }

    /// Whether this side's doorbell request still stands (false: the peer took
    /// it and rang, or is ringing).
    pub fn armed(&self) -> bool {
        self.rx.armed(&self.rx_view)
    }

    /// After consuming: whether the peer waits for space in the ring this side
    /// consumes (the request is taken: ring its doorbell).
    pub fn take_peer_space(&self) -> bool {
        self.rx.take_space_wanted(&self.rx_view)
    }
}

#[allow(unsafe_code)]
fn map_shared(fd: &OwnedFd, len: usize) -> std::io::Result<*mut u8> {
    // SAFETY: a fresh shared mapping chosen by the kernel (null hint) of a
    // memfd of at least `len` bytes; nothing else refers to it yet.
    let p = unsafe {
        rustix::mm::mmap(
            std::ptr::null_mut(),
            len,
            ProtFlags::READ | ProtFlags::WRITE,
            MapFlags::SHARED,
            fd,
            0,
        )?
    };
    Ok(p.cast::<u8>())
}

impl Drop for Region {
    #[allow(unsafe_code)]
    fn drop(&mut self) {
        // SAFETY: `map`/`len` are the mapping made in `map_shared`; the
        // views die with `self`, so nothing refers to it after this.
        unsafe {
            let _ = rustix::mm::munmap(self.map.cast(), self.len);
        }
    }
}
