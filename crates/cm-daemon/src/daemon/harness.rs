//! The daemon driven in process, without sockets to listen on or a real
//! clock: sessions are made directly (each on one end of a socket pair
//! whose other end stands for the client), frames are handed to the same
//! `handle_frame` the event loop calls, time is whatever the caller says,
//! and a session's output is taken as decoded messages instead of being
//! sent. The `session` fuzz target (`fuzz/fuzz_targets/session.rs`) drives
//! it with arbitrary sequences of client messages and checks
//! [`Harness::check`] after every step.
//!
//! Not a stable API: hidden from the documentation, for fuzzing and tests.

use std::os::fd::OwnedFd;
use std::path::Path;

use cm_core::idhash::IdMap;
use cm_core::{CongestionManager, FlowId, Instant};
use cm_ipc::ToClient;
use rustix::net::{AddressFamily, RecvFlags, SocketFlags, SocketType, recv, socket_with};

use super::Daemon;
use crate::config::DaemonConfig;
use crate::error::DaemonError;
use crate::session::Session;

/// A daemon without an event loop, driven call by call.
pub struct Harness {
    daemon: Daemon,
    /// The client's end of each session's socket pair: what the daemon
    /// sends on the socket itself (before and while attaching a shared
    /// ring) is read back from here.
    peers: IdMap<u64, OwnedFd>,
    /// A scratch buffer for reading those frames.
    buf: Vec<u8>,
}

impl Harness {
    /// A daemon with configuration `cfg` and no clients.
    pub fn new(cfg: DaemonConfig) -> Result<Harness, DaemonError> {
        let core =
            CongestionManager::new(cfg.core_config()?).map_err(crate::error::ConfigError::from)?;
        // Never bound: nothing can connect to it.
        let listener = socket_with(
            AddressFamily::UNIX,
            SocketType::SEQPACKET,
            SocketFlags::CLOEXEC | SocketFlags::NONBLOCK,
            None,
        )?;
        Ok(Harness {
            daemon: Daemon::with_listener(cfg, core, listener, Path::new(""))?,
            peers: IdMap::default(),
            buf: vec![0; cm_ipc::MAX_FRAME],
        })
    }

    /// A client of user `uid` connects at `now`: its session token, or
    /// `None` when the daemon's client limits refuse it (as the event loop
    /// does on accepting).
    pub fn connect(
        &mut self,
        uid: u32,
        pid: u32,
        now: Instant,
    ) -> Result<Option<u64>, DaemonError> {
        let d = &mut self.daemon;
        if d.admit(uid).is_err() {
            return Ok(None);
        }
        let (ours, theirs) = rustix::net::socketpair(
            AddressFamily::UNIX,
            SocketType::SEQPACKET,
            SocketFlags::CLOEXEC | SocketFlags::NONBLOCK,
            None,
        )?;
        let token = d.next_token;
        d.next_token += 1;
        let rate = d.cfg.max_messages_per_sec;
        d.sessions
            .insert(token, Session::new(ours, uid, pid, rate, now.as_micros()));
        self.peers.insert(token, theirs);
        Ok(Some(token))
    }

    /// Session `token` sent `frame` (undecoded bytes), read at `now`.
    pub fn frame(&mut self, token: u64, frame: &[u8], now: Instant) {
        self.daemon.handle_frame(token, frame, now);
    }

    /// Run the core's timers due at `now` and route its events to the
    /// sessions (the event loop's turn, without sending).
    pub fn advance(&mut self, now: Instant) {
        let core = &mut self.daemon.core;
        if core.poll_timeout().is_some_and(|t| t <= now) {
            core.handle_timeout(now);
        }
        self.daemon.route_events();
    }

    /// The core's next deadline.
    pub fn next_timeout(&mut self) -> Option<Instant> {
        self.daemon.core.poll_timeout()
    }

    /// Everything queued for session `token` since the last call, oldest
    /// first: what went out on its socket, then what is queued. A frame
    /// that does not decode is an error (the daemon's encoder is broken).
    pub fn output(&mut self, token: u64) -> Result<Vec<ToClient>, String> {
        let mut frames = Vec::new();
        if let Some(peer) = self.peers.get(&token) {
            while let Ok((n, _)) = recv(peer, &mut self.buf, RecvFlags::DONTWAIT) {
                if n == 0 {
                    // An empty frame is a doorbell on the socket.
                    continue;
                }
                frames.push(self.buf[..n.min(self.buf.len())].to_vec());
            }
        }
        if let Some(s) = self.daemon.sessions.get_mut(&token) {
            frames.extend(s.take_frames());
        }
        let mut out = Vec::new();
        for f in frames {
            let msgs = cm_ipc::decode_frame::<ToClient>(&f)
                .map_err(|e| format!("the daemon sent a frame that does not decode: {e}"))?;
            out.extend(msgs);
        }
        Ok(out)
    }

    /// Drop what is queued for session `token`, undecoded; returns its
    /// frames' total length (for benchmarks: the daemon's encoding is
    /// measured, the client's decoding is not).
    pub fn discard_output(&mut self, token: u64) -> usize {
        self.daemon
            .sessions
            .get_mut(&token)
            .map_or(0, |s| s.take_frames().iter().map(Vec::len).sum())
    }

    /// Session `token` hangs up at `now`; its flows are reclaimed.
    pub fn disconnect(&mut self, token: u64, now: Instant) {
        self.daemon.drop_session_at(token, "harness", now);
        self.peers.remove(&token);
    }

    /// The live sessions' tokens, in no particular order.
    pub fn tokens(&self) -> Vec<u64> {
        self.daemon.sessions.keys().copied().collect()
    }

    /// The core client of session `token`, once it said `Hello`.
    pub fn client_of(&self, token: u64) -> Option<u64> {
        self.daemon
            .sessions
            .get(&token)
            .and_then(|s| s.client)
            .map(|c| c.to_u64())
    }

    /// Whether `flow` is open and belongs to session `token`.
    pub fn owns(&self, token: u64, flow: u64) -> bool {
        self.daemon.owner.get(&flow) == Some(&token)
            && self.daemon.core.flow_info(FlowId::from_u64(flow)).is_ok()
    }

    /// Open flows in the core.
    pub fn flow_count(&self) -> usize {
        self.daemon.core.flow_count()
    }

    /// Macroflows in the core, lingering empty ones included.
    pub fn macroflow_count(&self) -> usize {
        self.daemon.core.macroflow_count()
    }

    /// Macroflows the daemon remembers an owner for (those made by
    /// `SetMacroflow`; the entries of expired ones are swept lazily, so this
    /// stays within twice the most macroflows the core held, plus
    /// [`Harness::OWNER_SLACK`]).
    pub fn macroflow_owners(&self) -> usize {
        self.daemon.mf_owner.len()
    }

    /// See [`Harness::macroflow_owners`].
    pub const OWNER_SLACK: usize = super::flows::MF_OWNER_SLACK;

    /// Whether a client of the core still exists (a closed one must not).
    pub fn core_has_client(&self, client: u64) -> bool {
        self.daemon
            .core
            .client_flows(cm_core::ClientId::from_u64(client))
            .is_ok()
    }

    /// The daemon's bookkeeping agrees with the core and within its limits:
    ///
    /// * at most `max_clients` sessions, `max_clients_per_user` per uid;
    /// * each session at most `max_flows_per_client` flows; its count is
    ///   the number of flows it owns, which are exactly its core client's;
    /// * every owned flow is open, every open flow owned; the core has no
    ///   more than `max_flows`;
    /// * every flow of every macroflow is owned; every peer state is an
    ///   open flow's.
    pub fn check(&self) -> Result<(), String> {
        let d = &self.daemon;
        let cfg = &d.cfg;
        if d.sessions.len() > cfg.max_clients {
            return Err(format!("{} sessions > max_clients", d.sessions.len()));
        }
        for s in d.sessions.values() {
            let n = d.sessions.values().filter(|o| o.uid == s.uid).count();
            if n > cfg.max_clients_per_user {
                return Err(format!("uid {} has {n} sessions", s.uid));
            }
        }
        for (&t, s) in &d.sessions {
            let owned: Vec<u64> = d
                .owner
                .iter()
                .filter(|&(_, &o)| o == t)
                .map(|(&f, _)| f)
                .collect();
            if s.flows > cfg.max_flows_per_client {
                return Err(format!("session {t} has {} flows", s.flows));
            }
            if s.flows != owned.len() {
                return Err(format!(
                    "session {t} counts {} flows but owns {}",
                    s.flows,
                    owned.len()
                ));
            }
            let mut core_flows: Vec<u64> = match s.client {
                Some(c) => {
                    if d.by_client.get(&c) != Some(&t) {
                        return Err(format!("client {c:?} of session {t} not indexed"));
                    }
                    d.core
                        .client_flows(c)
                        .map_err(|e| format!("session {t}'s client: {e}"))?
                        .iter()
                        .map(|f| f.to_u64())
                        .collect()
                }
                None => Vec::new(),
            };
            let mut owned = owned;
            owned.sort_unstable();
            core_flows.sort_unstable();
            if owned != core_flows {
                return Err(format!(
                    "session {t} owns {owned:?}, its core client {core_flows:?}"
                ));
            }
        }
        for (c, t) in &d.by_client {
            if d.sessions.get(t).and_then(|s| s.client) != Some(*c) {
                return Err(format!(
                    "client {c:?} indexed to session {t} that is not it"
                ));
            }
        }
        if d.owner.len() != d.core.flow_count() {
            return Err(format!(
                "{} flows owned, {} open",
                d.owner.len(),
                d.core.flow_count()
            ));
        }
        if d.core.flow_count() > d.core.config().max_flows {
            return Err("more flows than max_flows".into());
        }
        for id in d.core.macroflow_ids() {
            let m = d
                .core
                .macroflow_info(id)
                .map_err(|e| format!("listed macroflow: {e}"))?;
            if let Some(f) = m.flows.iter().find(|f| !d.owner.contains_key(&f.to_u64())) {
                return Err(format!("flow {f:?} of macroflow {id:?} has no owner"));
            }
        }
        if let Some(f) = d.peers.keys().find(|f| !d.owner.contains_key(f)) {
            return Err(format!("peer state kept for flow {f}, which is closed"));
        }
        Ok(())
    }
}
