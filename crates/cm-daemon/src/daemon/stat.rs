//! What `cm stat` and `cm query <host>` see: root sees every macroflow and
//! flow, other users their own and the shared ones. Kernel TCP connections
//! (`kernel.rs`) are listed with their local address, pid 0.

use cm_ipc::ToClient;

use super::Daemon;

impl Daemon {
    /// `Stat` (`host` None) or `QueryHost`: the listing, ended by `StatEnd`.
    pub(super) fn stat(&mut self, token: u64, uid: u32, seq: u32, host: Option<core::net::IpAddr>) {
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
                stat: cm_ipc::stat::macroflow_stat(
                    &m,
                    owner,
                    self.core.capacity(id).ok().flatten(),
                ),
            });
            if host.is_some() {
                continue;
            }
            for &f in &m.flows {
                if let Some(c) = self.kernel.as_ref().and_then(|k| k.conn_of(f)) {
                    if uid != 0 && c.uid != uid {
                        continue;
                    }
                    if let Ok(fi) = self.core.flow_info(f) {
                        let mut stat = cm_ipc::stat::flow_stat(&fi, c.uid, 0);
                        stat.dst = c.remote;
                        stat.kernel = Some(c.local);
                        out.push(ToClient::StatFlow { seq, stat });
                    }
                    continue;
                }
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
                    let mut stat = cm_ipc::stat::flow_stat(&fi, s.uid, s.pid);
                    stat.peer = self.peers.get(&f.to_u64()).copied();
                    out.push(ToClient::StatFlow { seq, stat });
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
