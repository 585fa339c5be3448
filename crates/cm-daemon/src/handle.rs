//! Applying one client call to the core, with the trust checks of
//! cm-implementation-linux §5 and RFC 3124 §6: a client may act only on its
//! own flows; flows of different users share a macroflow only when
//! configured; every refusal is an error message, never a dropped client.

use cm_core::{Bytes, Feedback, FlowId, MacroflowId, OpenParams, Thresholds};
use cm_ipc::{ErrorCode, ToClient, ToDaemon};

use crate::server::Daemon;

/// The core's error as a wire code.
fn code_of(e: &cm_core::Error) -> ErrorCode {
    use cm_core::Error as E;
    match e {
        E::UnknownFlow(_) | E::UnknownClient(_) => ErrorCode::UnknownFlow,
        E::UnknownMacroflow(_) => ErrorCode::UnknownMacroflow,
        E::LimitReached(_) => ErrorCode::LimitReached,
        _ => ErrorCode::InvalidArgument,
    }
}

/// The seq of a call that expects a reply (0 for fire-and-forget calls).
fn seq_of(m: &ToDaemon) -> u32 {
    match *m {
        ToDaemon::Open { seq, .. }
        | ToDaemon::Query { seq, .. }
        | ToDaemon::Mtu { seq, .. }
        | ToDaemon::GetMacroflow { seq, .. }
        | ToDaemon::SetMacroflow { seq, .. }
        | ToDaemon::Stat { seq }
        | ToDaemon::QueryHost { seq, .. }
        | ToDaemon::Ping { seq }
        | ToDaemon::Attach { seq } => seq,
        _ => 0,
    }
}

/// The flow a call is about (0 if none).
fn flow_of(m: &ToDaemon) -> u64 {
    match *m {
        ToDaemon::Close { flow }
        | ToDaemon::Request { flow, .. }
        | ToDaemon::Notify { flow, .. }
        | ToDaemon::Update { flow, .. }
        | ToDaemon::Query { flow, .. }
        | ToDaemon::Mtu { flow, .. }
        | ToDaemon::RateUpdates { flow, .. }
        | ToDaemon::Thresh { flow, .. }
        | ToDaemon::GetMacroflow { flow, .. }
        | ToDaemon::SetMacroflow { flow, .. }
        | ToDaemon::SetWeight { flow, .. } => flow,
        _ => 0,
    }
}

impl Daemon {
    /// The macroflow sharing partition of a user: one per uid unless users
    /// share (then all use partition 0).
    pub(crate) fn partition(&self, uid: u32) -> u64 {
        if self.cfg.share_across_users {
            0
        } else {
            u64::from(uid) + 1
        }
    }

    /// The uid owning a macroflow's partition (`ALL_USERS` when shared).
    pub(crate) fn macroflow_uid(&self, id: MacroflowId, key_partition: Option<u64>) -> u32 {
        match key_partition {
            Some(0) => cm_ipc::stat::ALL_USERS,
            Some(p) => u32::try_from(p - 1).unwrap_or(cm_ipc::stat::ALL_USERS),
            None => self
                .mf_owner
                .get(&id.to_u64())
                .copied()
                .unwrap_or(cm_ipc::stat::ALL_USERS),
        }
    }

    /// Whether `uid` may put flows into (or look at) macroflow `id`.
    fn may_use_macroflow(&self, uid: u32, id: MacroflowId) -> bool {
        let Ok(info) = self.core.macroflow_info(id) else {
            return false;
        };
        let owner = self.macroflow_uid(id, info.key.map(|k| k.partition));
        self.cfg.share_across_users || owner == uid
    }

    /// Apply one call from session `token`, at `now` (read once per frame).
    pub(crate) fn handle(&mut self, now: cm_core::Instant, token: u64, m: ToDaemon) {
        let seq = seq_of(&m);
        let flow_raw = flow_of(&m);
        let Some(s) = self.sessions.get_mut(&token) else {
            return;
        };
        if !s.limiter.take(now.as_micros()) {
            s.limited += 1;
            if s.limited == 1 || s.limited.is_power_of_two() {
                crate::log!(
                    warn,
                    "msg=\"client over its message rate\" session={token} uid={} refused={}",
                    s.uid,
                    s.limited
                );
            }
            self.error(token, seq, flow_raw, ErrorCode::RateLimited);
            return;
        }
        let (uid, client) = (s.uid, s.client);
        let client = match (&m, client) {
            (ToDaemon::Hello { version }, None) => {
                let version = *version;
                self.hello(now, token, version);
                return;
            }
            (ToDaemon::Hello { .. }, Some(_)) => {
                self.error(token, 0, 0, ErrorCode::InvalidArgument);
                return;
            }
            (_, None) => {
                self.error(token, seq, flow_raw, ErrorCode::NotIntroduced);
                return;
            }
            (_, Some(c)) => c,
        };
        // Calls on a flow: it must be this client's.
        let flow = FlowId::from_u64(flow_raw);
        let needs_flow = !matches!(
            m,
            ToDaemon::Open { .. }
                | ToDaemon::Stat { .. }
                | ToDaemon::QueryHost { .. }
                | ToDaemon::Ping { .. }
                | ToDaemon::Attach { .. }
                | ToDaemon::SocketDoorbell { .. }
        );
        if needs_flow && self.owner.get(&flow_raw) != Some(&token) {
            // Another user's flow looks exactly like no flow at all.
            self.error(token, seq, flow_raw, ErrorCode::UnknownFlow);
            return;
        }
        let reply: Result<Option<ToClient>, ErrorCode> = match m {
            ToDaemon::Hello { .. } => Ok(None),
            ToDaemon::Open { seq, src, dst } => self.open(now, token, client, uid, seq, src, dst),
            ToDaemon::Close { .. } => self
                .core
                .close(now, flow)
                .map(|()| {
                    self.owner.remove(&flow_raw);
                    if let Some(s) = self.sessions.get_mut(&token) {
                        s.flows = s.flows.saturating_sub(1);
                    }
                    None
                })
                .map_err(|e| code_of(&e)),
            ToDaemon::Request { k, .. } => self
                .core
                .request_mtus(now, flow, k)
                .map(|()| None)
                .map_err(|e| code_of(&e)),
            ToDaemon::Notify { nsent, .. } => self
                .core
                .notify(now, flow, Bytes(nsent))
                .map(|()| None)
                .map_err(|e| code_of(&e)),
            ToDaemon::Update {
                nsent,
                nrecd,
                loss,
                rtt_us,
                ..
            } => {
                let fb = Feedback {
                    nsent: Bytes(nsent),
                    nrecd: Bytes(nrecd),
                    loss,
                    rtt: rtt_us.map(cm_core::Duration::from_micros),
                };
                self.core
                    .update(now, flow, fb)
                    .map(|()| None)
                    .map_err(|e| code_of(&e))
            }
            ToDaemon::Query { seq, .. } => self
                .core
                .query(flow)
                .map(|e| {
                    Some(ToClient::Estimate {
                        seq,
                        estimate: e.into(),
                    })
                })
                .map_err(|e| code_of(&e)),
            ToDaemon::Mtu { seq, .. } => self
                .core
                .mtu(flow)
                .map(|b| {
                    Some(ToClient::Mtu {
                        seq,
                        mtu: u32::try_from(b.get()).unwrap_or(u32::MAX),
                    })
                })
                .map_err(|e| code_of(&e)),
            ToDaemon::RateUpdates { on, .. } => self
                .core
                .set_rate_updates(now, flow, on)
                .map(|()| None)
                .map_err(|e| code_of(&e)),
            ToDaemon::Thresh {
                rate_down,
                rate_up,
                rtt_down,
                rtt_up,
                ..
            } => {
                let t = Thresholds {
                    rate_down,
                    rate_up,
                    rtt_down,
                    rtt_up,
                };
                self.core
                    .set_thresholds(now, flow, t)
                    .map(|()| None)
                    .map_err(|e| code_of(&e))
            }
            ToDaemon::GetMacroflow { seq, .. } => self
                .core
                .macroflow_of(flow)
                .map(|id| {
                    Some(ToClient::Macroflow {
                        seq,
                        id: id.to_u64(),
                    })
                })
                .map_err(|e| code_of(&e)),
            ToDaemon::SetMacroflow { seq, target, .. } => {
                self.set_macroflow(now, uid, seq, flow, target)
            }
            ToDaemon::SetWeight { weight, .. } => self
                .core
                .set_weight(now, flow, weight)
                .map(|()| None)
                .map_err(|e| code_of(&e)),
            ToDaemon::Stat { seq } => {
                self.stat(token, uid, seq, None);
                Ok(None)
            }
            ToDaemon::QueryHost { seq, dst } => {
                self.stat(token, uid, seq, Some(dst));
                Ok(None)
            }
            ToDaemon::Ping { seq } => Ok(Some(ToClient::Pong { seq })),
            ToDaemon::Attach { seq } => {
                self.attach(token, seq);
                Ok(None)
            }
            ToDaemon::SocketDoorbell { on } => self.socket_doorbell(token, on).map(|()| None),
            _ => Err(ErrorCode::InvalidArgument),
        };
        match reply {
            Ok(Some(r)) => {
                if let Some(s) = self.sessions.get_mut(&token) {
                    s.push(&r);
                }
            }
            Ok(None) => {}
            Err(code) => self.error(token, seq, flow_raw, code),
        }
    }

    fn hello(&mut self, now: cm_core::Instant, token: u64, version: u8) {
        if version != cm_ipc::VERSION {
            self.error(token, 0, 0, ErrorCode::UnsupportedVersion);
            return;
        }
        let c = match self.core.register_client(now) {
            Ok(c) => c,
            Err(_) => {
                self.error(token, 0, 0, ErrorCode::LimitReached);
                return;
            }
        };
        self.by_client.insert(c, token);
        let mtu = u32::try_from(self.core.config().mtu.get()).unwrap_or(u32::MAX);
        if let Some(s) = self.sessions.get_mut(&token) {
            s.client = Some(c);
            let uid = s.uid;
            s.push(&ToClient::Welcome {
                version: cm_ipc::VERSION,
                client: c.to_u64(),
                uid,
                mtu,
            });
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn open(
        &mut self,
        now: cm_core::Instant,
        token: u64,
        client: cm_core::ClientId,
        uid: u32,
        seq: u32,
        src: Option<core::net::SocketAddr>,
        dst: core::net::SocketAddr,
    ) -> Result<Option<ToClient>, ErrorCode> {
        let flows = self.sessions.get(&token).map_or(0, |s| s.flows);
        if flows >= self.cfg.max_flows_per_client {
            return Err(ErrorCode::LimitReached);
        }
        let mut p = OpenParams::to(dst);
        p.src = src;
        p.partition = self.partition(uid);
        let f = self.core.open(now, client, p).map_err(|e| code_of(&e))?;
        self.owner.insert(f.to_u64(), token);
        if let Some(s) = self.sessions.get_mut(&token) {
            s.flows += 1;
        }
        Ok(Some(ToClient::Opened {
            seq,
            flow: f.to_u64(),
        }))
    }

    fn set_macroflow(
        &mut self,
        now: cm_core::Instant,
        uid: u32,
        seq: u32,
        flow: FlowId,
        target: Option<u64>,
    ) -> Result<Option<ToClient>, ErrorCode> {
        let target = target.map(MacroflowId::from_u64);
        if let Some(t) = target {
            if !self.may_use_macroflow(uid, t) {
                // Someone else's macroflow is indistinguishable from none.
                return Err(ErrorCode::UnknownMacroflow);
            }
        }
        let id = self
            .core
            .set_macroflow(now, flow, target)
            .map_err(|e| code_of(&e))?;
        if target.is_none() {
            self.mf_owner.insert(id.to_u64(), uid);
        }
        Ok(Some(ToClient::Macroflow {
            seq,
            id: id.to_u64(),
        }))
    }

    /// `cm stat` / `cm query`: root sees everything, others their own.
    fn stat(&mut self, token: u64, uid: u32, seq: u32, host: Option<core::net::IpAddr>) {
        let mut out = Vec::new();
        for id in self.core.macroflow_ids() {
            let Ok(m) = self.core.macroflow_info(id) else {
                continue;
            };
            if host.is_some() && m.key.map(|k| k.dst) != host {
                continue;
            }
            let owner = self.macroflow_uid(id, m.key.map(|k| k.partition));
            let visible = uid == 0 || owner == uid || owner == cm_ipc::stat::ALL_USERS;
            if !visible {
                continue;
            }
            out.push(ToClient::StatMacroflow {
                seq,
                stat: cm_ipc::stat::macroflow_stat(&m, owner),
            });
            if host.is_some() {
                continue;
            }
            for &f in &m.flows {
                let Some(s) = self
                    .owner
                    .get(&f.to_u64())
                    .and_then(|t| self.sessions.get(t))
                else {
                    continue;
                };
                if uid != 0 && s.uid != uid {
                    continue;
                }
                if let Ok(fi) = self.core.flow_info(f) {
                    out.push(ToClient::StatFlow {
                        seq,
                        stat: cm_ipc::stat::flow_stat(&fi, s.uid, s.pid),
                    });
                }
            }
        }
        out.push(ToClient::StatEnd { seq });
        if let Some(s) = self.sessions.get_mut(&token) {
            for m in &out {
                s.push(m);
            }
        }
    }
}
