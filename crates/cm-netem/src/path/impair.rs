//! Reordering and duplication of sender → receiver packets, done by the delay
//! box (see its module docs for the model); changeable while the path runs.

use std::time::Duration;

use crate::config::{check_duplicate, check_reorder};
use crate::error::{NetemError, Result};

use super::Path;

impl Path {
    /// Hold each sender → receiver packet back with probability `p` (in `[0, 1]`) for
    /// `extra_delay` beyond the one-way delay, so packets read by the delay box less
    /// than `extra_delay` after it overtake it. `p = 0` turns reordering off;
    /// `extra_delay` must be non-zero when `p` is, and at most 10 s. Takes effect for
    /// packets the delay box reads from now on.
    pub fn set_reorder(&self, p: f64, extra_delay: Duration) -> Result<()> {
        check_reorder(p, extra_delay)?;
        let mut inner = self.lock();
        if inner.torn_down {
            return Err(NetemError::TornDown);
        }
        let Some(dbox) = inner.delay_box.as_ref() else {
            return Err(NetemError::TornDown);
        };
        dbox.controls().set_reorder(p, extra_delay);
        inner.reorder = (p, extra_delay);
        Ok(())
    }

    /// Write each sender → receiver packet twice with probability `p` (in `[0, 1]`),
    /// the copy right after the original. `p = 0` turns duplication off. Takes effect
    /// for packets the delay box reads from now on.
    pub fn set_duplicate(&self, p: f64) -> Result<()> {
        check_duplicate(p)?;
        let mut inner = self.lock();
        if inner.torn_down {
            return Err(NetemError::TornDown);
        }
        let Some(dbox) = inner.delay_box.as_ref() else {
            return Err(NetemError::TornDown);
        };
        dbox.controls().set_duplicate(p);
        inner.duplicate = p;
        Ok(())
    }

    /// The reorder probability and extra delay now in force.
    pub fn reorder(&self) -> (f64, Duration) {
        self.lock().reorder
    }

    /// The duplicate probability now in force.
    pub fn duplicate(&self) -> f64 {
        self.lock().duplicate
    }
}
