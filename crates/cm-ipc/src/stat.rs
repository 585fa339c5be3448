//! Building `cm stat` records from the core's snapshots (shared by the
//! daemon and embedded mode so both report alike).

use cm_core::{FlowInfo, MacroflowInfo, Rate};

use crate::msg::{Estimate, FlowStat, MacroflowStat};

/// The uid meaning "shared by all users".
pub const ALL_USERS: u32 = u32::MAX;

/// A macroflow record; `uid` is the owner of its sharing partition,
/// `capacity` the bottleneck estimate it runs on
/// (`CongestionManager::capacity`).
pub fn macroflow_stat(m: &MacroflowInfo, uid: u32, capacity: Option<Rate>) -> MacroflowStat {
    MacroflowStat {
        id: m.id.to_u64(),
        dst: m.key.map(|k| k.dst),
        uid,
        window: m.window.get(),
        estimate: Estimate::from(cm_core::PathEstimate {
            rate: m.rate,
            srtt: m.srtt,
            rttvar: m.rttvar,
            loss: m.loss,
        }),
        in_flight: m.in_flight.get(),
        flows: u32::try_from(m.flows.len()).unwrap_or(u32::MAX),
        controller: crate::field::truncate(m.controller, crate::msg::MAX_NAME).to_owned(),
        capacity: capacity.map(Rate::bytes_per_sec),
        reductions: m.congestion.reductions,
        timeouts: m.congestion.timeouts,
    }
}

/// A flow record for its owner `uid` / `pid`.
pub fn flow_stat(f: &FlowInfo, uid: u32, pid: u32) -> FlowStat {
    FlowStat {
        id: f.id.to_u64(),
        macroflow: f.macroflow.to_u64(),
        uid,
        pid,
        dst: f.params.dst,
        share: f.share,
        in_flight: f.in_flight.get(),
        sent: f.counters.sent.get(),
        lost: f.counters.lost.get(),
        estimate: f.estimate.into(),
        peer: None,
        kernel: None,
    }
}
