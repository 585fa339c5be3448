//! Which controller a macroflow runs, and the bottleneck capacity it is
//! told (iscc §V-D: ISCC needs C; §VI-B: one estimate per macroflow).

use crate::controller::{Controller, ControllerConfig};
use crate::error::Error;
use crate::id::MacroflowId;
use crate::manager::CongestionManager;
use crate::time::Instant;
use crate::units::Rate;

impl CongestionManager {
    /// Run `cfg` on macroflow `mf` from now on. The new controller starts
    /// from its initial state (slow start); the macroflow keeps its RTT
    /// estimate, its flows, their bytes in flight and its capacity estimate.
    pub fn set_controller(
        &mut self,
        now: Instant,
        mf: MacroflowId,
        cfg: &ControllerConfig,
    ) -> Result<(), Error> {
        let now = self.tick(now);
        let m = self.macroflow_mut(mf)?;
        let mut c = cfg.build(m.mtu);
        c.set_capacity(m.capacity);
        m.controller = c;
        m.aging = None;
        self.after_change(now, mf);
        Ok(())
    }

    /// The bottleneck capacity of macroflow `mf`'s path, as estimated by
    /// the caller (packet bunches, an explicit network signal, or
    /// configuration); `None` forgets it. Controllers that use it (ISCC)
    /// take it at once.
    pub fn set_capacity(
        &mut self,
        now: Instant,
        mf: MacroflowId,
        capacity: Option<Rate>,
    ) -> Result<(), Error> {
        let now = self.tick(now);
        let m = self.macroflow_mut(mf)?;
        let capacity = capacity.filter(|c| *c > Rate::ZERO);
        if m.capacity != capacity {
            m.capacity = capacity;
            m.controller.set_capacity(capacity);
            self.after_change(now, mf);
        }
        Ok(())
    }

    /// The capacity estimate macroflow `mf` runs on, if any.
    pub fn capacity(&self, mf: MacroflowId) -> Result<Option<Rate>, Error> {
        self.macroflows
            .get(mf.key())
            .map(|m| m.capacity)
            .ok_or(Error::UnknownMacroflow(mf))
    }
}
