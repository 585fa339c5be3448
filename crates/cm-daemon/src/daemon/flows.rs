//! Opening and closing flows and their macroflows (`cm_open`, `cm_close`,
//! `cm_getmacroflow`, `cm_setmacroflow`), the controller and capacity
//! estimate of a flow's macroflow (`cm_set_controller`, `cm_set_capacity`),
//! with the sharing rule of cm-implementation-linux §5 "Trust issues":
//! flows of different users share a macroflow only when configured.
//!
//! Choosing the controller or the capacity acts on the whole macroflow, so
//! on every flow in it: with `share_across_users`, on other users' flows
//! to the same host too (the configuration that lets users share a
//! macroflow lets each of them steer it).

use cm_core::controller::ControllerConfig;
use cm_core::{ClientId, FlowId, MacroflowId, OpenParams, Rate};
use cm_ipc::{ErrorCode, ToClient};

use super::Daemon;
use super::calls::{Reply, answer, code_of, done};

/// Owners of gone macroflows tolerated beyond twice the live ones before
/// they are swept (`forget_expired_owners`).
pub(super) const MF_OWNER_SLACK: usize = 16;

impl Daemon {
    /// The macroflow sharing partition of a user: one per uid unless users
    /// share (then all use partition 0).
    fn partition(&self, uid: u32) -> u64 {
        if self.cfg.share_across_users {
            0
        } else {
            u64::from(uid) + 1
        }
    }

    /// The uid owning a macroflow's partition (`ALL_USERS` when shared).
    pub(super) fn macroflow_uid(&self, id: MacroflowId, key_partition: Option<u64>) -> u32 {
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

    /// `Open`: a flow for session `token`, in its user's partition.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn open(
        &mut self,
        now: cm_core::Instant,
        token: u64,
        client: ClientId,
        uid: u32,
        seq: u32,
        src: Option<core::net::SocketAddr>,
        dst: core::net::SocketAddr,
    ) -> Reply {
        if self.budget.over {
            return Ok(Some(limit(
                seq,
                0,
                "max_memory_mib",
                usize::try_from(self.cfg.max_memory_mib).unwrap_or(usize::MAX),
            )));
        }
        let flows = self.sessions.get(&token).map_or(0, |s| s.flows);
        if flows >= self.cfg.max_flows_per_client {
            return Ok(Some(limit(
                seq,
                0,
                "max_flows_per_client",
                self.cfg.max_flows_per_client,
            )));
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

    /// `Close`: the flow ends and its session forgets it.
    pub(super) fn close(&mut self, now: cm_core::Instant, token: u64, flow: FlowId) -> Reply {
        done(self.core.close(now, flow))?;
        self.owner.remove(&flow.to_u64());
        self.peers.remove(&flow.to_u64());
        if let Some(s) = self.sessions.get_mut(&token) {
            s.flows = s.flows.saturating_sub(1);
        }
        Ok(None)
    }

    /// `GetMacroflow`: the flow's macroflow.
    pub(super) fn get_macroflow(&self, seq: u32, flow: FlowId) -> Reply {
        answer(self.core.macroflow_of(flow), |id| ToClient::Macroflow {
            seq,
            id: id.to_u64(),
        })
    }

    /// `SetMacroflow`: move the flow into `target` (one the caller may
    /// use), or into a new macroflow the caller then owns.
    pub(super) fn set_macroflow(
        &mut self,
        now: cm_core::Instant,
        uid: u32,
        seq: u32,
        flow: FlowId,
        target: Option<u64>,
    ) -> Reply {
        let target = target.map(MacroflowId::from_u64);
        if let Some(t) = target {
            if !self.may_use_macroflow(uid, t) {
                // Someone else's macroflow is indistinguishable from none.
                return Err(ErrorCode::UnknownMacroflow);
            }
        } else if self.owned_by(uid) >= self.cfg.max_macroflows_per_user {
            return Ok(Some(limit(
                seq,
                flow.to_u64(),
                "max_macroflows_per_user",
                self.cfg.max_macroflows_per_user,
            )));
        }
        let id = self
            .core
            .set_macroflow(now, flow, target)
            .map_err(|e| code_of(&e))?;
        if target.is_none() {
            self.forget_expired_owners();
            self.mf_owner.insert(id.to_u64(), uid);
        }
        Ok(Some(ToClient::Macroflow {
            seq,
            id: id.to_u64(),
        }))
    }

    /// Live macroflows `uid` made (`max_macroflows_per_user`). Counted
    /// only when the map is past the limit's size, after forgetting the
    /// expired ones, so the common case costs one comparison.
    fn owned_by(&mut self, uid: u32) -> usize {
        if self.mf_owner.len() < self.cfg.max_macroflows_per_user {
            return 0;
        }
        let core = &self.core;
        self.mf_owner
            .retain(|&id, _| core.capacity(MacroflowId::from_u64(id)).is_ok());
        self.mf_owner.values().filter(|&&u| u == uid).count()
    }

    /// Macroflows expire in the core (their linger over) without an event:
    /// once the owners remembered outnumber twice the core's macroflows,
    /// forget those of macroflows that are gone. Amortised O(1) per
    /// `SetMacroflow`; the map stays within twice the core's macroflows
    /// (plus a few) instead of growing with every call ever made.
    fn forget_expired_owners(&mut self) {
        if self.mf_owner.len() < 2 * self.core.macroflow_count() + MF_OWNER_SLACK {
            return;
        }
        let core = &self.core;
        // `capacity` is the cheapest lookup that fails for a gone macroflow.
        self.mf_owner
            .retain(|&id, _| core.capacity(MacroflowId::from_u64(id)).is_ok());
    }

    /// `SetController`: run `spec` on the flow's macroflow. The text comes
    /// from the client: it is parsed, never trusted (a spec that does not
    /// parse is refused with the parser's reason). Not logged: a client
    /// may call it at its message rate; `cm stat` shows the result.
    pub(super) fn set_controller(
        &mut self,
        now: cm_core::Instant,
        seq: u32,
        flow: FlowId,
        spec: &str,
    ) -> Reply {
        let cfg = match spec.parse::<ControllerConfig>() {
            Ok(c) => c,
            Err(e) => {
                return Ok(Some(ToClient::Refused {
                    seq,
                    flow: flow.to_u64(),
                    code: ErrorCode::InvalidArgument,
                    why: e.to_string(),
                }));
            }
        };
        let mf = self.core.macroflow_of(flow).map_err(|e| code_of(&e))?;
        self.core
            .set_controller(now, mf, &cfg)
            .map_err(|e| code_of(&e))?;
        Ok(Some(ToClient::Done { seq }))
    }

    /// `SetCapacity`: the flow's macroflow runs on this bottleneck capacity
    /// estimate (bytes per second; `None` or 0 forgets it).
    pub(super) fn set_capacity(
        &mut self,
        now: cm_core::Instant,
        flow: FlowId,
        capacity: Option<u64>,
    ) -> Reply {
        let mf = self.core.macroflow_of(flow).map_err(|e| code_of(&e))?;
        let rate = capacity.map(Rate::from_bytes_per_sec);
        done(self.core.set_capacity(now, mf, rate))
    }

    /// `SetFeedbackLag`: the flow's feedback comes in batches; the
    /// macroflow's window allows for the lag.
    pub(super) fn set_feedback_lag(
        &mut self,
        now: cm_core::Instant,
        flow: FlowId,
        lag: Option<u16>,
    ) -> Reply {
        let mf = self.core.macroflow_of(flow).map_err(|e| code_of(&e))?;
        done(self.core.set_feedback_lag(now, mf, lag))
    }
}

/// A refusal that names the limit reached and its value (a configuration
/// key of `cmd.toml`), to the offender only.
pub(super) fn limit(seq: u32, flow: u64, name: &str, value: usize) -> ToClient {
    ToClient::Refused {
        seq,
        flow,
        code: ErrorCode::LimitReached,
        why: format!("limit {name} = {value} reached"),
    }
}
