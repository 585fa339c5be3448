//! Arguments both modes refuse alike, at the call.
//!
//! The embedded core checks every argument as it applies a call. The
//! daemon checks them too, but a fire-and-forget call (`request`,
//! `notify`, `update`, `close`, weights, thresholds) has already returned
//! by then, and its refusal would only come back as an error on some later
//! call. So in daemon mode libcm checks here, before the call leaves the
//! process, what it can know locally: that the flow is one this handle
//! opened and has neither closed nor seen reclaimed, and that the values
//! are within the core's limits (the daemon runs the core's default
//! limits, [`cm_core::Config::default`]). The errors are the core's own,
//! so each bad call gets the same error (and the same C code) in both
//! modes. Embedded mode leaves the checks to the core.

use cm_core::{Config, Error, Feedback, FlowId};

use super::Cm;
use crate::backend::Backend;
use crate::error::CmError;

impl Cm {
    /// Daemon mode: `flow` must be open on this handle.
    pub(super) fn check_flow(&self, flow: FlowId) -> Result<(), CmError> {
        match &self.backend {
            Backend::Daemon(_) if !self.own.contains_key(&flow) => {
                Err(Error::UnknownFlow(flow).into())
            }
            _ => Ok(()),
        }
    }

    /// The largest k of a k-MTU request this CM takes.
    pub(super) fn request_limit(&self) -> u32 {
        match &self.backend {
            Backend::Embedded(e) => e.core.config().max_request_mtus,
            Backend::Daemon(_) => Config::default().max_request_mtus,
        }
    }

    /// Daemon mode: a k-MTU request on an open flow, k within the limit.
    pub(super) fn check_request(&self, flow: FlowId, k: u32) -> Result<(), CmError> {
        if self.is_daemon() && (k == 0 || k > Config::default().max_request_mtus) {
            return Err(Error::InvalidRequest(k).into());
        }
        self.check_flow(flow)
    }

    /// Daemon mode: feedback on an open flow with a usable RTT sample.
    pub(super) fn check_update(&self, flow: FlowId, fb: &Feedback) -> Result<(), CmError> {
        if let (true, Some(r)) = (self.is_daemon(), fb.rtt) {
            if r.is_zero() || r > Config::default().max_rtt_sample {
                return Err(Error::InvalidRtt(r).into());
            }
        }
        self.check_flow(flow)
    }

    /// Daemon mode: a weight in 1..=65535 on an open flow.
    pub(super) fn check_weight(&self, flow: FlowId, weight: u32) -> Result<(), CmError> {
        if self.is_daemon() && !(1..=u32::from(u16::MAX)).contains(&weight) {
            return Err(Error::InvalidWeight(weight).into());
        }
        self.check_flow(flow)
    }

    fn is_daemon(&self) -> bool {
        matches!(self.backend, Backend::Daemon(_))
    }
}
