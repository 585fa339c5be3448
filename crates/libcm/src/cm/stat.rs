//! What `cm stat` and `cm query <host>` show: every macroflow and flow the
//! caller may see (its own, or all of them for root at the daemon).

use core::net::IpAddr;

pub use cm_ipc::{FlowStat, MacroflowStat, PeerMode, PeerStat};
use cm_ipc::{ToClient, ToDaemon};

use super::Cm;
use crate::backend::Backend;
use crate::error::CmError;

/// A snapshot of the CM's state.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Stat {
    /// Macroflows.
    pub macroflows: Vec<MacroflowStat>,
    /// Flows.
    pub flows: Vec<FlowStat>,
}

impl Cm {
    /// A snapshot of the macroflows and flows this caller may see.
    pub fn stat(&mut self) -> Result<Stat, CmError> {
        match &mut self.backend {
            Backend::Embedded(e) => {
                let uid = rustix::process::getuid().as_raw();
                let pid =
                    u32::try_from(rustix::process::getpid().as_raw_nonzero().get()).unwrap_or(0);
                let mut s = Stat::default();
                for id in e.core.macroflow_ids() {
                    let Ok(m) = e.core.macroflow_info(id) else {
                        continue;
                    };
                    for &f in &m.flows {
                        if let Ok(fi) = e.core.flow_info(f) {
                            let mut stat = cm_ipc::stat::flow_stat(&fi, uid, pid);
                            stat.peer = self.peers.get(&f).copied();
                            s.flows.push(stat);
                        }
                    }
                    let capacity = e.core.capacity(id).ok().flatten();
                    s.macroflows
                        .push(cm_ipc::stat::macroflow_stat(&m, uid, capacity));
                }
                Ok(s)
            }
            Backend::Daemon(d) => {
                let mut s = Stat::default();
                for m in d.call_listing(|seq| ToDaemon::Stat { seq })? {
                    match m {
                        ToClient::StatMacroflow { stat, .. } => s.macroflows.push(stat),
                        ToClient::StatFlow { stat, .. } => s.flows.push(stat),
                        _ => {}
                    }
                }
                Ok(s)
            }
        }
    }

    /// The caller's macroflow(s) towards `dst` (`cm query <host>`).
    pub fn query_host(&mut self, dst: IpAddr) -> Result<Vec<MacroflowStat>, CmError> {
        match &mut self.backend {
            Backend::Embedded(_) => Ok(self
                .stat()?
                .macroflows
                .into_iter()
                .filter(|m| m.dst == Some(dst))
                .collect()),
            Backend::Daemon(d) => Ok(d
                .call_listing(|seq| ToDaemon::QueryHost { seq, dst })?
                .into_iter()
                .filter_map(|m| match m {
                    ToClient::StatMacroflow { stat, .. } => Some(stat),
                    _ => None,
                })
                .collect()),
        }
    }
}
