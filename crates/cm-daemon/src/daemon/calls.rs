//! One client call, from its frame to its group: decoding, the message-rate
//! limit, the introduction (`Hello`), the trust checks of
//! cm-implementation-linux §5 and RFC 3124 §6 (a client may act only on
//! its own flows; every refusal is an error message, never a dropped
//! client), and the table that hands each message to the file of its API
//! group.

use cm_core::{FlowId, Rate};
use cm_ipc::{ErrorCode, ToClient, ToDaemon};

use super::Daemon;

/// What a call answers: a reply for its client, nothing, or an error code.
pub(super) type Reply = Result<Option<ToClient>, ErrorCode>;

/// The core's error as a wire code.
pub(super) fn code_of(e: &cm_core::Error) -> ErrorCode {
    use cm_core::Error as E;
    match e {
        E::UnknownFlow(_) | E::UnknownClient(_) => ErrorCode::UnknownFlow,
        E::UnknownMacroflow(_) => ErrorCode::UnknownMacroflow,
        E::LimitReached(_) => ErrorCode::LimitReached,
        _ => ErrorCode::InvalidArgument,
    }
}

/// A core call that answers nothing: no reply, or its error as a wire code.
pub(super) fn done(r: Result<(), cm_core::Error>) -> Reply {
    r.map(|()| None).map_err(|e| code_of(&e))
}

/// A core call whose value `reply` makes into the client's answer.
pub(super) fn answer<T>(r: Result<T, cm_core::Error>, reply: impl FnOnce(T) -> ToClient) -> Reply {
    r.map(|v| Some(reply(v))).map_err(|e| code_of(&e))
}

impl Daemon {
    /// Decode and apply one frame from a client, at `now`.
    pub(super) fn handle_frame(&mut self, token: u64, bytes: &[u8], now: cm_core::Instant) {
        // Each message is applied as it is decoded; on a malformed one,
        // those before it stand.
        let decoded = cm_ipc::decode_frame_each(bytes, |m| self.handle(now, token, m));
        if let Err(e) = decoded {
            if let Some(s) = self.sessions.get(&token) {
                crate::log!(
                    warn,
                    "msg=\"malformed frame\" session={token} uid={} error=\"{e}\"",
                    s.uid
                );
            }
            self.error(token, 0, 0, ErrorCode::Malformed);
        }
    }

    /// Send an error for a call.
    pub(super) fn error(&mut self, token: u64, seq: u32, flow: u64, code: ErrorCode) {
        self.reply(token, &ToClient::Error { seq, flow, code });
    }

    /// Queue a message for session `token` (if it is still there).
    pub(super) fn reply(&mut self, token: u64, m: &ToClient) {
        if let Some(s) = self.sessions.get_mut(&token) {
            s.push(m);
        }
    }

    /// Apply one call from session `token`, at `now` (read once per frame).
    fn handle(&mut self, now: cm_core::Instant, token: u64, m: &ToDaemon) {
        let seq = m.seq().unwrap_or(0);
        let on_flow = m.flow();
        let flow_raw = on_flow.unwrap_or(0);
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
        let client = match (m, client) {
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
        if on_flow.is_some() && self.owner.get(&flow_raw) != Some(&token) {
            // Another user's flow looks exactly like no flow at all.
            self.error(token, seq, flow_raw, ErrorCode::UnknownFlow);
            return;
        }
        let reply = match m {
            ToDaemon::Hello { .. } => Ok(None),
            // Flows and macroflows (flows.rs).
            ToDaemon::Open { seq, src, dst } => {
                self.open(now, token, client, uid, *seq, *src, *dst)
            }
            ToDaemon::Close { .. } => self.close(now, token, flow),
            ToDaemon::GetMacroflow { seq, .. } => self.get_macroflow(*seq, flow),
            ToDaemon::SetMacroflow { seq, target, .. } => {
                self.set_macroflow(now, uid, *seq, flow, *target)
            }
            ToDaemon::SetController { seq, spec, .. } => self.set_controller(now, *seq, flow, spec),
            ToDaemon::SetCapacity { capacity, .. } => self.set_capacity(now, flow, *capacity),
            ToDaemon::CapacitySample { sample, .. } => done(self.core.capacity_sample(
                now,
                flow,
                Rate::from_bytes_per_sec(*sample),
            )),
            ToDaemon::SetFeedbackLag { lag, .. } => self.set_feedback_lag(now, flow, *lag),
            ToDaemon::SetPeer { peer, .. } => {
                match peer {
                    Some(p) => self.peers.insert(flow_raw, *p),
                    None => self.peers.remove(&flow_raw),
                };
                Ok(None)
            }
            // What the caller may see (stat.rs).
            ToDaemon::Stat { seq } => {
                self.stat(token, uid, *seq, None);
                Ok(None)
            }
            ToDaemon::QueryHost { seq, dst } => {
                self.stat(token, uid, *seq, Some(*dst));
                Ok(None)
            }
            // The connection (here and rings.rs).
            ToDaemon::Ping { seq } => Ok(Some(ToClient::Pong { seq: *seq })),
            ToDaemon::Attach { seq } => {
                self.attach(token, *seq);
                Ok(None)
            }
            ToDaemon::SocketDoorbell { on } => self.socket_doorbell(token, *on).map(|()| None),
            // Sending, feedback and queries on a flow (sending.rs).
            m => self.flow_call(now, flow, m),
        };
        match reply {
            Ok(Some(r)) => self.reply(token, &r),
            Ok(None) => {}
            Err(code) => self.error(token, seq, flow_raw, code),
        }
    }

    /// `Hello`: register the client with the core and welcome it.
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
}
