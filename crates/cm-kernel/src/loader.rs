//! Loading the `cm` congestion control into the kernel, reading its
//! reports and writing allowances.
//!
//! [`KernelTcp::load`] opens the embedded BPF object, loads it and
//! registers its `tcp_congestion_ops` through a struct_ops link, then
//! marks `cm` as allowed for unprivileged sockets. Dropping the handle
//! closes the link, which unregisters `cm`: so does the process's exit,
//! however it ends (the kernel closes the link's descriptor). Connections
//! that still use `cm` keep running on the loaded programs until they
//! close, on Reno once their allowances go stale.

use std::os::fd::{AsFd, BorrowedFd};
use std::sync::{Arc, Mutex, PoisonError};

use libbpf_rs::{Link, MapCore, MapFlags, MapHandle, Object, ObjectBuilder, RingBuffer};

use crate::wire::{self, Event, WireError};

/// The compiled program (`build.rs`); empty when clang was missing.
static OBJECT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/cm_tcp.bpf.o"));

/// The congestion control's name, as `sysctl net.ipv4.tcp_congestion_control`
/// and `setsockopt(TCP_CONGESTION)` take it.
pub const NAME: &str = "cm";

const AVAILABLE: &str = "/proc/sys/net/ipv4/tcp_available_congestion_control";
const DEFAULT: &str = "/proc/sys/net/ipv4/tcp_congestion_control";
const ALLOWED: &str = "/proc/sys/net/ipv4/tcp_allowed_congestion_control";

/// Why `cm` could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum KernelError {
    /// The crate was built without clang.
    #[error(
        "the `cm` TCP congestion control was not built (clang was missing when cm-kernel was compiled)"
    )]
    NotBuilt,
    /// Another `cm` is registered already.
    #[error(
        "a TCP congestion control named `cm` is registered already (another `cmd --kernel-tcp`?)"
    )]
    AlreadyRegistered,
    /// libbpf refused: no BTF, no struct_ops support, not root, …
    #[error(
        "loading the `cm` TCP congestion control: {0} (needs root or CAP_BPF+CAP_NET_ADMIN, and a kernel with BTF and BPF struct_ops, 5.13+)"
    )]
    Load(#[source] libbpf_rs::Error),
    /// Something the object must hold is not there.
    #[error("the BPF object has no `{0}`")]
    Missing(&'static str),
}

/// The loaded and registered congestion control.
pub struct KernelTcp {
    // Fields drop in order: the link first (unregistering `cm`), then the
    // reader and the maps, then the object.
    _link: Link,
    ring: RingBuffer<'static>,
    events: MapHandle,
    allow: MapHandle,
    dest: MapHandle,
    counters: MapHandle,
    queue: Arc<Mutex<Vec<Result<Event, WireError>>>>,
    _obj: Object,
}

impl std::fmt::Debug for KernelTcp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KernelTcp").finish_non_exhaustive()
    }
}

/// Whether this build holds the BPF program (clang was there at build time).
pub fn built() -> bool {
    !OBJECT.is_empty()
}

/// Why this process cannot load `cm`, if it visibly cannot: not built,
/// not root, no kernel BTF. `None` does not promise that loading works.
pub fn unsupported() -> Option<&'static str> {
    if !built() {
        return Some("clang when building cm-kernel");
    }
    if !rustix::process::geteuid().is_root() {
        return Some("root");
    }
    if !std::path::Path::new("/sys/kernel/btf/vmlinux").exists() {
        return Some("a kernel with BTF (/sys/kernel/btf/vmlinux)");
    }
    None
}

/// Whether the kernel lists `cm` among its available congestion controls.
pub fn registered() -> bool {
    std::fs::read_to_string(AVAILABLE).is_ok_and(|s| s.split_whitespace().any(|n| n == NAME))
}

impl KernelTcp {
    /// Load, register and allow `cm`.
    pub fn load() -> Result<KernelTcp, KernelError> {
        if OBJECT.is_empty() {
            return Err(KernelError::NotBuilt);
        }
        if registered() {
            return Err(KernelError::AlreadyRegistered);
        }
        let open = ObjectBuilder::default()
            .open_memory(OBJECT)
            .map_err(KernelError::Load)?;
        let mut obj = open.load().map_err(KernelError::Load)?;
        let mut link = None;
        for mut m in obj.maps_mut() {
            if m.name() == NAME {
                link = Some(m.attach_struct_ops().map_err(KernelError::Load)?);
            }
        }
        let link = link.ok_or(KernelError::Missing("struct_ops map `cm`"))?;
        allow_unprivileged();
        let handle = |name: &'static str| -> Result<MapHandle, KernelError> {
            let m = obj
                .maps()
                .find(|m| m.name() == name)
                .ok_or(KernelError::Missing(name))?;
            MapHandle::try_from(&m).map_err(KernelError::Load)
        };
        let events = handle("events")?;
        let allow = handle("allow")?;
        let dest = handle("dest")?;
        let counters = handle("counters")?;
        let queue: Arc<Mutex<Vec<Result<Event, WireError>>>> = Arc::default();
        let sink = Arc::clone(&queue);
        let mut rb = libbpf_rs::RingBufferBuilder::new();
        rb.add(&events, move |data: &[u8]| {
            sink.lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(Event::parse(data));
            0
        })
        .map_err(KernelError::Load)?;
        let ring = rb.build().map_err(KernelError::Load)?;
        Ok(KernelTcp {
            _link: link,
            ring,
            events,
            allow,
            dest,
            counters,
            queue,
            _obj: obj,
        })
    }

    /// The ring buffer's descriptor: readable when reports wait (for epoll).
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.events.as_fd()
    }

    /// Every report waiting, oldest first, appended to `out`.
    pub fn drain(&mut self, out: &mut Vec<Result<Event, WireError>>) -> Result<(), KernelError> {
        self.ring.consume().map_err(KernelError::Load)?;
        out.append(&mut self.queue.lock().unwrap_or_else(PoisonError::into_inner));
        Ok(())
    }

    /// Allow connection `id` a window of `cwnd` packets, as of `stamp_ns`
    /// (`CLOCK_MONOTONIC`, [`monotonic_ns`]).
    pub fn set_allowance(&self, id: u64, stamp_ns: u64, cwnd: u32) -> Result<(), KernelError> {
        let slot = wire::allow_slot(id).to_ne_bytes();
        let rec = wire::allow_record(id, stamp_ns, cwnd);
        self.allow
            .update(&slot, &rec, MapFlags::ANY)
            .map_err(KernelError::Load)
    }

    /// New connections of `uid` ([`wire::ALL_USERS`]: of anyone) to `addr`
    /// start with a window of `bytes`, as of `stamp_ns`.
    pub fn set_start_window(
        &self,
        addr: std::net::IpAddr,
        uid: u32,
        stamp_ns: u64,
        bytes: u64,
    ) -> Result<(), KernelError> {
        self.dest
            .update(
                &wire::dest_key(addr, uid),
                &wire::dest_record(stamp_ns, bytes),
                MapFlags::ANY,
            )
            .map_err(KernelError::Load)
    }

    /// Reports lost because the ring buffer was full.
    pub fn dropped(&self) -> u64 {
        self.counters
            .lookup(&0u32.to_ne_bytes(), MapFlags::ANY)
            .ok()
            .flatten()
            .and_then(|v| {
                v.get(..8)
                    .map(|b| u64::from_ne_bytes(b.try_into().unwrap_or([0; 8])))
            })
            .unwrap_or(0)
    }
}

impl Drop for KernelTcp {
    /// Before `cm` goes: a namespace whose default it is would keep the
    /// unloaded programs for its new connections, so this namespace's
    /// default (the one the daemon runs in) goes back to Reno. Other
    /// namespaces are their owners' to reset.
    fn drop(&mut self) {
        if std::fs::read_to_string(DEFAULT).is_ok_and(|d| d.trim() == NAME) {
            let _ = std::fs::write(DEFAULT, "reno");
        }
    }
}

/// `CLOCK_MONOTONIC` in ns, the clock `bpf_ktime_get_ns` reads.
pub fn monotonic_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    u64::try_from(t.tv_sec).unwrap_or(0) * 1_000_000_000 + u64::try_from(t.tv_nsec).unwrap_or(0)
}

/// Add `cm` to `net.ipv4.tcp_allowed_congestion_control`, so that any user
/// may choose it, and so that a network namespace may make it its default
/// without the kernel keeping a reference that blocks the next load.
/// Failure only narrows who may use `cm`; it is not an error.
fn allow_unprivileged() {
    let Ok(now) = std::fs::read_to_string(ALLOWED) else {
        return;
    };
    if now.split_whitespace().any(|n| n == NAME) {
        return;
    }
    let _ = std::fs::write(ALLOWED, format!("{} {NAME}", now.trim()));
}
