//! What the CM protocol knows of a flow's peer, for `cm stat`: the
//! sender of the flow (libcm's `CcUdpSocket`) reports it.

use cm_core::FlowId;
use cm_ipc::{PeerStat, ToDaemon};

use super::Cm;
use crate::backend::Backend;
use crate::error::CmError;

impl Cm {
    /// Record what the CM protocol knows of `flow`'s peer (negotiated or
    /// not, probe RTT, loss), shown by [`Cm::stat`] and `cm stat`; `None`
    /// forgets it. Fire-and-forget in daemon mode.
    pub fn set_peer(&mut self, flow: FlowId, peer: Option<PeerStat>) -> Result<(), CmError> {
        match &mut self.backend {
            Backend::Embedded(e) => {
                e.core.flow_info(flow)?;
                match peer {
                    Some(p) => {
                        self.peers.insert(flow, p);
                    }
                    None => {
                        self.peers.remove(&flow);
                    }
                }
                Ok(())
            }
            Backend::Daemon(_) => {
                self.check_flow(flow)?;
                self.fire(
                    flow,
                    |_, _, _| Ok(()),
                    |flow| ToDaemon::SetPeer {
                        flow: flow.to_u64(),
                        peer,
                    },
                )
            }
        }
    }
}
