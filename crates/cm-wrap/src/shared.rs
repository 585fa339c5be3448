//! The library's process-wide state: the settings, the inbox to the
//! engine thread and the per-descriptor cache, created on the first
//! wrapped send and created again in a forked child.

use std::cell::Cell;
use std::net::SocketAddrV4;
use std::os::fd::BorrowedFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU8, Ordering};

use cm_force::{Engine, Inbox, Msg, Offer, WrapConfig};

/// What a descriptor is, as far as wrapping goes.
pub(crate) const UNKNOWN: u8 = 0;
/// Not an IPv4 UDP socket.
pub(crate) const OTHER: u8 = 1;
/// An IPv4 UDP socket the engine has no duplicate of yet.
pub(crate) const UDP: u8 = 2;
/// An IPv4 UDP socket the engine has a duplicate of.
pub(crate) const UDP_KNOWN: u8 = 3;

const CACHED_FDS: usize = 65_536;

static CLASS: [AtomicU8; CACHED_FDS] = [const { AtomicU8::new(UNKNOWN) }; CACHED_FDS];

thread_local! {
    /// Set on the engine's thread: its own calls pass straight through.
    pub(crate) static IN_ENGINE: Cell<bool> = const { Cell::new(false) };
}

/// The state of this process (a fork child makes its own).
pub(crate) struct Shared {
    pub(crate) cfg: WrapConfig,
    pub(crate) inbox: Arc<Inbox>,
    pub(crate) alive: Arc<AtomicBool>,
}

static SHARED: AtomicPtr<Shared> = AtomicPtr::new(std::ptr::null_mut());
static STARTING: AtomicBool = AtomicBool::new(false);
static DISABLED: AtomicBool = AtomicBool::new(false);
static ATFORK: std::sync::Once = std::sync::Once::new();

extern "C" fn child_after_fork() {
    // The parent's engine thread does not exist here, and its inbox lock
    // may have been held at the fork: leak the old state, start afresh.
    SHARED.store(std::ptr::null_mut(), Ordering::SeqCst);
    STARTING.store(false, Ordering::SeqCst);
    for c in &CLASS {
        if c.load(Ordering::Relaxed) == UDP_KNOWN {
            c.store(UDP, Ordering::Relaxed);
        }
    }
}

extern "C" fn at_exit() {
    let Some(s) = current() else { return };
    if s.cfg.report.is_none() || !s.alive.load(Ordering::Acquire) {
        return;
    }
    let done = Arc::new(AtomicBool::new(false));
    s.inbox.push(Msg::Flush(Arc::clone(&done)));
    let until = std::time::Instant::now() + std::time::Duration::from_millis(300);
    while !done.load(Ordering::Acquire) && std::time::Instant::now() < until {
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
}

fn current() -> Option<&'static Shared> {
    let p = SHARED.load(Ordering::Acquire);
    // SAFETY: a non-null pointer was made by `Box::into_raw` in `start`
    // and is never freed (a fork child leaks it), so it is valid for the
    // rest of the process.
    (!p.is_null()).then(|| unsafe { &*p })
}

/// The state, started on first use; `None` while it starts on another
/// thread, or if it cannot start (then everything passes through).
pub(crate) fn shared() -> Option<&'static Shared> {
    if let Some(s) = current() {
        return s.alive.load(Ordering::Relaxed).then_some(s);
    }
    if DISABLED.load(Ordering::Relaxed) || STARTING.swap(true, Ordering::AcqRel) {
        return None;
    }
    start()
}

fn disable(why: &str) -> Option<&'static Shared> {
    eprintln!("cm-wrap: {why}; this program's datagrams go out without congestion control");
    DISABLED.store(true, Ordering::Relaxed);
    None
}

fn start() -> Option<&'static Shared> {
    ATFORK.call_once(|| {
        // SAFETY: registering plain `extern "C" fn()`s that live as long
        // as the library (never unloaded while the program runs).
        unsafe {
            libc::pthread_atfork(None, None, Some(child_after_fork));
            libc::atexit(at_exit);
        }
    });
    let cfg = match WrapConfig::from_env() {
        Ok(c) => c,
        Err(e) => return disable(&e.to_string()),
    };
    let inbox = match Inbox::new() {
        Ok(i) => Arc::new(i),
        Err(e) => return disable(&format!("no eventfd: {e}")),
    };
    let alive = Arc::new(AtomicBool::new(true));
    let (tcfg, tinbox, talive) = (cfg.clone(), Arc::clone(&inbox), Arc::clone(&alive));
    let spawned = std::thread::Builder::new().name("cm-wrap".into()).spawn(move || {
        IN_ENGINE.with(|c| c.set(true));
        let report = tcfg.report.clone();
        let engine = libcm::Cm::new()
            .map_err(|e| e.to_string())
            .and_then(|cm| Engine::new(tcfg, cm).map_err(|e| e.to_string()));
        match engine {
            Ok(engine) => cm_force::run::run(engine, tinbox, Arc::new(AtomicBool::new(false)), report),
            Err(e) => {
                eprintln!("cm-wrap: cannot start the CM ({e}); datagrams go out without congestion control");
                talive.store(false, Ordering::Release);
            }
        }
    });
    if let Err(e) = spawned {
        return disable(&format!("cannot start its thread: {e}"));
    }
    let s = Box::into_raw(Box::new(Shared { cfg, inbox, alive }));
    SHARED.store(s, Ordering::Release);
    current()
}

/// The class of descriptor `fd`, classifying it on first sight.
pub(crate) fn class(fd: i32) -> u8 {
    let Ok(i) = usize::try_from(fd) else {
        return OTHER;
    };
    if let Some(c) = CLASS.get(i) {
        let v = c.load(Ordering::Relaxed);
        if v != UNKNOWN {
            return v;
        }
        let v = classify(fd);
        c.store(v, Ordering::Relaxed);
        return v;
    }
    classify(fd)
}

fn classify(fd: i32) -> u8 {
    // SAFETY: the descriptor is only borrowed for two getsockopt calls
    // within this function; if it is not open they fail with EBADF.
    let b = unsafe { BorrowedFd::borrow_raw(fd) };
    use rustix::net::{AddressFamily, SocketType, sockopt};
    match (sockopt::socket_type(b), sockopt::socket_domain(b)) {
        (Ok(SocketType::DGRAM), Ok(AddressFamily::INET)) => UDP,
        _ => OTHER,
    }
}

/// Forget what `fd` was (it is being closed or replaced); tell the engine
/// if it had the socket.
pub(crate) fn forget(fd: i32) {
    let Some(c) = usize::try_from(fd).ok().and_then(|i| CLASS.get(i)) else {
        return;
    };
    if c.swap(UNKNOWN, Ordering::Relaxed) == UDP_KNOWN {
        if let Some(s) = current() {
            s.inbox.push(Msg::Close(fd));
        }
    }
}

/// Hand one datagram of `fd` for `dst` to the engine.
pub(crate) fn offer(s: &Shared, fd: i32, dst: SocketAddrV4, payload: Vec<u8>) {
    let slot = usize::try_from(fd).ok().and_then(|i| CLASS.get(i));
    // The first datagram of a socket carries a duplicate of it: the
    // engine sends from it, so the program's address and port stay.
    let needs_dup = slot.is_none_or(|c| {
        c.compare_exchange(UDP, UDP_KNOWN, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
    });
    let sock = if needs_dup {
        // SAFETY: `fd` is the program's open socket (it is sending on it
        // now); borrowed only to duplicate it.
        let b = unsafe { BorrowedFd::borrow_raw(fd) };
        match rustix::io::fcntl_dupfd_cloexec(b, 3) {
            Ok(d) => Some(d),
            Err(_) => {
                if let Some(c) = slot {
                    c.store(UDP, Ordering::Relaxed);
                }
                return;
            }
        }
    } else {
        None
    };
    let carried = sock.is_some();
    let ok = s.inbox.push(Msg::Offer(Offer {
        fd,
        sock,
        dst,
        payload,
    }));
    if !ok && carried {
        if let Some(c) = slot {
            c.store(UDP, Ordering::Relaxed);
        }
    }
}
