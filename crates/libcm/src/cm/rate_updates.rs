//! Rate callbacks and thresholds: `cm_register_update`, the per-flow
//! subscription and `cm_thresh` (cm-implementation-linux §2.1.4, RFC 3124
//! §4.3).

use cm_core::{FlowId, PathEstimate, Thresholds};
use cm_ipc::ToDaemon;

use super::{Cm, UpdateCallback};
use crate::error::CmError;

impl Cm {
    /// `cm_register_update`: the function called for each rate update during
    /// [`Cm::dispatch`] (the paper's `cmapp_update`). Enable updates per flow
    /// with [`Cm::set_rate_updates`] or [`Cm::thresh`].
    pub fn register_update(&mut self, cb: impl FnMut(&mut Cm, FlowId, PathEstimate) + 'static) {
        self.on_update = Some(Box::new(cb) as UpdateCallback);
    }

    /// `cm_register_update` for one flow: turn [`crate::CmEvent::Update`]
    /// notifications on (reporting the current estimate at once) or off.
    pub fn set_rate_updates(&mut self, flow: FlowId, on: bool) -> Result<(), CmError> {
        self.check_flow(flow)?;
        self.fire(
            flow,
            |core, now, flow| core.set_rate_updates(now, flow, on),
            |flow| ToDaemon::RateUpdates {
                flow: flow.to_u64(),
                on,
            },
        )?;
        self.note_rate_updates(flow, on);
        Ok(())
    }

    /// `cm_thresh(down, up)`: report when the rate falls to 1/`rate_down`
    /// or rises to `rate_up` times the last report (likewise the RTT);
    /// subscribes the flow to updates.
    pub fn thresh(&mut self, flow: FlowId, t: Thresholds) -> Result<(), CmError> {
        t.validate()?;
        self.check_flow(flow)?;
        self.fire(
            flow,
            |core, now, flow| core.set_thresholds(now, flow, t),
            |flow| ToDaemon::Thresh {
                flow: flow.to_u64(),
                rate_down: t.rate_down,
                rate_up: t.rate_up,
                rtt_down: t.rtt_down,
                rtt_up: t.rtt_up,
            },
        )?;
        self.note_thresholds(flow, t);
        Ok(())
    }
}
