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

    /// Macroflow `mf` continues what another CM learned of its path (libcm
    /// falling back from a daemon that went away): its controller resumes
    /// from `window` ([`Controller::resume`](crate::controller::Controller::resume))
    /// and `srtt`, if given, is its first RTT sample.
    pub fn resume_macroflow(
        &mut self,
        now: Instant,
        mf: MacroflowId,
        window: crate::units::Bytes,
        srtt: Option<crate::time::Duration>,
    ) -> Result<(), Error> {
        let now = self.tick(now);
        let m = self.macroflow_mut(mf)?;
        let srtt = srtt.filter(|r| !r.is_zero());
        m.controller.resume(window, srtt);
        if let Some(r) = srtt {
            m.rtt.on_sample(r);
        }
        self.after_change(now, mf);
        Ok(())
    }

    /// The capacity estimate macroflow `mf` runs on, if any.
    pub fn capacity(&self, mf: MacroflowId) -> Result<Option<Rate>, Error> {
        self.macroflows
            .get(mf.key())
            .map(|m| m.capacity)
            .ok_or(Error::UnknownMacroflow(mf))
    }

    /// Remember macroflow `mf`'s controller state before a window
    /// reduction that may later prove false (sigcomm1999 §4.2.2: reordering
    /// mistaken for loss). A checkpoint already held is kept: an undo
    /// reverses every reduction since the first.
    pub fn checkpoint(&mut self, mf: MacroflowId) -> Result<(), Error> {
        let m = self.macroflow_mut(mf)?;
        if m.checkpoint.is_none() {
            m.checkpoint = Some(m.controller.clone());
        }
        Ok(())
    }

    /// Undo the reductions since the checkpoint (sigcomm1999 §4.2.2, "the
    /// reduction can then be reversed"): the controller returns to its
    /// checkpointed state, keeping the larger window if it has grown past
    /// it since. Returns whether there was a checkpoint.
    pub fn undo_reduction(&mut self, now: Instant, mf: MacroflowId) -> Result<bool, Error> {
        let now = self.tick(now);
        let m = self.macroflow_mut(mf)?;
        let Some(saved) = m.checkpoint.take() else {
            return Ok(false);
        };
        if saved.window() > m.controller.window() {
            m.controller = saved;
            m.controller.set_capacity(m.capacity);
        }
        self.after_change(now, mf);
        Ok(true)
    }

    /// Tell macroflow `mf` that its feedback comes in batches (the CM
    /// protocol's probe responses, sigcomm1999 §4.2.1) and resolves a byte
    /// on average `lag_per_mille` thousandths of an RTT later than
    /// per-packet acknowledgements would (500 / n for n probes per RTT);
    /// `None` returns to per-packet feedback. The window check allows for
    /// the lag, so the macroflow sends at window / RTT as an ACK-clocked
    /// flow with the same window would; the allowance is at most one
    /// window. The setting is per macroflow: the last caller's holds.
    pub fn set_feedback_lag(
        &mut self,
        now: Instant,
        mf: MacroflowId,
        lag_per_mille: Option<u16>,
    ) -> Result<(), Error> {
        let now = self.tick(now);
        let m = self.macroflow_mut(mf)?;
        if m.feedback_lag != lag_per_mille {
            m.feedback_lag = lag_per_mille;
            self.after_change(now, mf);
        }
        Ok(())
    }

    /// Forget macroflow `mf`'s checkpoint: its reductions were real.
    pub fn commit_reduction(&mut self, mf: MacroflowId) -> Result<(), Error> {
        self.macroflow_mut(mf)?.checkpoint = None;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::{Bytes, Config, CongestionManager, Feedback, Instant, LossMode, OpenParams};

    /// A false reduction (sigcomm1999 §4.2.2) is undone: the window returns
    /// to where it was at the checkpoint.
    #[test]
    fn undo_restores_the_window_before_a_false_reduction() {
        let mut cm = CongestionManager::new(Config::default()).unwrap();
        let t = Instant::from_micros(1_000);
        let c = cm.register_client(t).unwrap();
        let f = cm
            .open(t, c, OpenParams::to("192.0.2.1:9".parse().unwrap()))
            .unwrap();
        let mf = cm.macroflow_of(f).unwrap();
        let before = cm.macroflow_info(mf).unwrap().window;
        cm.notify(t, f, Bytes(4_000)).unwrap();
        cm.checkpoint(mf).unwrap();
        let fb = Feedback {
            nsent: Bytes(4_000),
            nrecd: Bytes(3_000),
            loss: LossMode::Transient,
            rtt: None,
            lost_sent: None,
        };
        cm.update(t, f, fb).unwrap();
        assert!(cm.macroflow_info(mf).unwrap().window < before);
        assert!(cm.undo_reduction(t, mf).unwrap());
        assert_eq!(cm.macroflow_info(mf).unwrap().window, before);
        assert!(!cm.undo_reduction(t, mf).unwrap());
    }
}
