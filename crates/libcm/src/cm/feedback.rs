//! Feedback and what the CM knows: `cm_update`, `cm_query` and their bulk
//! forms (cm-implementation-linux §2.1, §5; RFC 3124 §4.3).

use cm_core::{Feedback, FlowId, PathEstimate};
use cm_ipc::{ToClient, ToDaemon};

use super::Cm;
use crate::backend::Backend;
use crate::error::CmError;

impl Cm {
    /// `cm_update(flow, nsent, nrecd, lossmode, rtt)`: feedback from the
    /// receiver. `fb.nsent` bytes were resolved, `fb.nrecd` of them arrived.
    pub fn update(&mut self, flow: FlowId, fb: Feedback) -> Result<(), CmError> {
        if fb.nrecd > fb.nsent {
            return Err(CmError::Invalid("nrecd exceeds nsent"));
        }
        self.check_update(flow, &fb)?;
        self.fire(
            flow,
            |core, now, flow| core.update(now, flow, fb),
            |flow| ToDaemon::update(flow.to_u64(), &fb, cm_clock::now()),
        )
    }

    /// `cm_query(flow)`: the flow's share of the path's rate, the path's
    /// smoothed RTT and variation, and its loss rate; `None` fields have no
    /// estimate yet.
    pub fn query(&mut self, flow: FlowId) -> Result<PathEstimate, CmError> {
        let e = self.ask(
            Some(flow),
            |e, flow| e.core.query(flow),
            |seq, flow| ToDaemon::Query {
                seq,
                flow: flow.to_u64(),
            },
            |r| match r {
                ToClient::Estimate { estimate, .. } => Some(estimate.into()),
                _ => None,
            },
            "unexpected reply to query",
        )?;
        self.note_estimate(flow, e);
        Ok(e)
    }

    /// `cm_bulk_update`: several feedback reports in one call.
    pub fn bulk_update(&mut self, fbs: &[(FlowId, Feedback)]) -> Result<(), CmError> {
        self.batched(|cm| fbs.iter().try_for_each(|&(f, fb)| cm.update(f, fb)))
    }

    /// `cm_bulk_query`: the estimates of several flows in one round trip.
    pub fn bulk_query(&mut self, flows: &[FlowId]) -> Result<Vec<PathEstimate>, CmError> {
        let ids: Vec<FlowId> = flows.iter().map(|&f| self.bid(f)).collect();
        let r = self.bulk_query_ids(&ids);
        match r {
            Err(e) if self.should_fail_over(&e) => {
                self.fail_over()?;
                let ids: Vec<FlowId> = flows.iter().map(|&f| self.bid(f)).collect();
                self.bulk_query_ids(&ids)
            }
            r => r,
        }
    }

    /// `bulk_query` in the ids of the CM in use.
    fn bulk_query_ids(&mut self, flows: &[FlowId]) -> Result<Vec<PathEstimate>, CmError> {
        match &mut self.backend {
            Backend::Embedded(e) => flows
                .iter()
                .map(|&f| e.core.query(f).map_err(CmError::from))
                .collect(),
            Backend::Daemon(d) => d
                .call_many(flows.len(), |i, seq| ToDaemon::Query {
                    seq,
                    flow: flows[i].to_u64(),
                })?
                .into_iter()
                .map(|r| match r {
                    ToClient::Estimate { estimate, .. } => Ok(estimate.into()),
                    ToClient::Error { code, .. } => Err(CmError::Daemon(code)),
                    _ => Err(CmError::Invalid("unexpected reply to query")),
                })
                .collect(),
        }
    }
}
