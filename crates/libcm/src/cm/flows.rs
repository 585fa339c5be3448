//! Flows and macroflows: `cm_open`, `cm_close`, `cm_mtu`,
//! `cm_getmacroflow`, `cm_setmacroflow` (cm-implementation-linux §2.1,
//! RFC 3124 §4) and the scheduler weight.

use core::net::SocketAddr;

use cm_core::{FlowId, MacroflowId, OpenParams};
use cm_ipc::{ToClient, ToDaemon};

use super::Cm;
use crate::error::CmError;

impl Cm {
    /// `cm_open(src, dst)`: a new flow to `dst`, in the macroflow of its
    /// destination host.
    pub fn open(&mut self, src: Option<SocketAddr>, dst: SocketAddr) -> Result<FlowId, CmError> {
        let flow = self.ask(
            None,
            |e, _| {
                let now = cm_clock::now();
                let mut p = OpenParams::to(dst);
                p.src = src;
                e.core.open(now, e.client, p)
            },
            |seq, _| ToDaemon::Open { seq, src, dst },
            |r| match r {
                ToClient::Opened { flow, .. } => Some(FlowId::from_u64(flow)),
                _ => None,
            },
            "unexpected reply to open",
        )?;
        Ok(self.opened(flow, src, dst))
    }

    /// `cm_mtu(flow)`: the largest grant unit on the flow's path.
    pub fn mtu(&mut self, flow: FlowId) -> Result<u32, CmError> {
        if let Some(&m) = self.mtus.get(&flow) {
            return Ok(m);
        }
        let m = self.ask(
            Some(flow),
            |e, flow| Ok(u32::try_from(e.core.mtu(flow)?.get()).unwrap_or(u32::MAX)),
            |seq, flow| ToDaemon::Mtu {
                seq,
                flow: flow.to_u64(),
            },
            |r| match r {
                ToClient::Mtu { mtu, .. } => Some(mtu),
                _ => None,
            },
            "unexpected reply to mtu",
        )?;
        self.mtus.insert(flow, m);
        Ok(m)
    }

    /// `cm_getmacroflow(flow)`.
    pub fn macroflow_of(&mut self, flow: FlowId) -> Result<MacroflowId, CmError> {
        self.ask(
            Some(flow),
            |e, flow| e.core.macroflow_of(flow),
            |seq, flow| ToDaemon::GetMacroflow {
                seq,
                flow: flow.to_u64(),
            },
            macroflow_reply,
            "unexpected reply to getmacroflow",
        )
    }

    /// `cm_setmacroflow(flow, target)`: move the flow into `target`, or into
    /// a macroflow of its own with `None`. Returns its macroflow.
    pub fn set_macroflow(
        &mut self,
        flow: FlowId,
        target: Option<MacroflowId>,
    ) -> Result<MacroflowId, CmError> {
        self.mtus.remove(&flow);
        self.ask(
            Some(flow),
            |e, flow| e.core.set_macroflow(cm_clock::now(), flow, target),
            |seq, flow| ToDaemon::SetMacroflow {
                seq,
                flow: flow.to_u64(),
                target: target.map(MacroflowId::to_u64),
            },
            macroflow_reply,
            "unexpected reply to setmacroflow",
        )
    }

    /// The flow's scheduler weight within its macroflow (1..=65535).
    pub fn set_weight(&mut self, flow: FlowId, weight: u32) -> Result<(), CmError> {
        self.check_weight(flow, weight)?;
        self.fire(
            flow,
            |core, now, flow| core.set_weight(now, flow, weight),
            |flow| ToDaemon::SetWeight {
                flow: flow.to_u64(),
                weight,
            },
        )?;
        self.note_weight(flow, weight);
        Ok(())
    }

    /// `cm_close(flow)`: the flow ends; its share goes to its siblings.
    pub fn close(&mut self, flow: FlowId) -> Result<(), CmError> {
        self.check_flow(flow)?;
        self.buffered.remove(&flow);
        self.peers.remove(&flow);
        let r = self.fire(
            flow,
            |core, now, flow| core.close(now, flow),
            |flow| ToDaemon::Close {
                flow: flow.to_u64(),
            },
        );
        self.forget(flow);
        r
    }
}

/// The daemon's answer naming a macroflow.
fn macroflow_reply(r: ToClient) -> Option<MacroflowId> {
    match r {
        ToClient::Macroflow { id, .. } => Some(MacroflowId::from_u64(id)),
        _ => None,
    }
}
