//! [`Scenario::validate`]: every value of a scenario checked before it runs.

use cm_sim::spec::{NodeRole, TopologySpec};

use super::{FlowSpec, Scenario, ScenarioError, Transport, bad};

fn check_time(what: &str, t: f64) -> Result<(), ScenarioError> {
    if !t.is_finite() || t < 0.0 {
        return bad(format!(
            "{what} must be a finite, non-negative number of seconds, got {t}"
        ));
    }
    Ok(())
}

impl Scenario {
    /// Checks every value; called by [`Scenario::from_toml`] and by `run`.
    pub fn validate(&self) -> Result<(), ScenarioError> {
        check_time("duration", self.duration)?;
        if self.duration == 0.0 {
            return bad("duration must be > 0".into());
        }
        if self.mss == 0 || self.mss > 65_000 {
            return bad(format!("mss must be in 1..=65000, got {}", self.mss));
        }
        if self.cm_initial_window == Some(0) {
            return bad("cm_initial_window must be > 0".into());
        }
        if let Some(c) = &self.cm_controller {
            if let Err(e) = c.parse::<cm_core::controller::ControllerConfig>() {
                return bad(format!("cm_controller: {e}"));
            }
        }
        if self.rcv_wnd == Some(0) {
            return bad("rcv_wnd must be > 0".into());
        }
        if !self.start_jitter_ms.is_finite() || self.start_jitter_ms < 0.0 {
            return bad(format!(
                "start_jitter_ms must be a finite, non-negative number of milliseconds, got {}",
                self.start_jitter_ms
            ));
        }
        match (&self.topology, self.bottleneck.is_absent()) {
            (Some(_), false) => {
                return bad("give either [bottleneck] (a dumbbell) or [topology], not both".into());
            }
            (None, true) => {
                return bad(
                    "bottleneck rate_bps must be > 0 (or give [topology] instead of [bottleneck])"
                        .into(),
                );
            }
            (Some(t), true) => {
                let d = super::Access::default();
                if self.access.rate_bps != d.rate_bps || self.access.delay_ms != d.delay_ms {
                    return bad(
                        "[access] is for the dumbbell; a [topology] gives every link".into(),
                    );
                }
                t.build()
                    .map_err(|e| ScenarioError::Invalid(format!("topology: {e}")))?;
                self.check_topology_hosts(t)?;
            }
            (None, false) => self.check_bottleneck()?,
        }
        let mut names = std::collections::BTreeSet::new();
        let senders: std::collections::BTreeSet<String> =
            self.flows.iter().map(FlowSpec::host_name).collect();
        for f in &self.flows {
            if !names.insert(f.name.as_str()) {
                return bad(format!("duplicate flow name {:?}", f.name));
            }
            let t = f.transport()?;
            check_time(&format!("flow {:?} start", f.name), f.start)?;
            if let Some(s) = f.stop {
                check_time(&format!("flow {:?} stop", f.name), s)?;
            }
            if senders.contains(&f.dst_name()) {
                return bad(format!(
                    "flow {:?}: dst {:?} is also a sender host (senders are left, receivers right)",
                    f.name,
                    f.dst_name()
                ));
            }
            if f.bytes == Some(0) {
                return bad(format!("flow {:?}: bytes must be > 0", f.name));
            }
            if f.weight == Some(0) || f.initial_window == Some(0) || f.packet_bytes == Some(0) {
                return bad(format!(
                    "flow {:?}: weight, initial_window and packet_bytes must be > 0",
                    f.name
                ));
            }
            match (t, f.rate_bps) {
                (Transport::Cbr | Transport::Proxy, None) => {
                    return bad(format!("flow {:?}: {} needs rate_bps", f.name, f.transport));
                }
                (_, Some(0)) => return bad(format!("flow {:?}: rate_bps must be > 0", f.name)),
                _ => {}
            }
            check_ramp(f, t)?;
            f.tcp_rules()?;
            if f.mean_bytes.is_some_and(|m| m.is_nan() || m < 1.0)
                || f.think_s.is_some_and(|m| m.is_nan() || m <= 0.0)
            {
                return bad(format!(
                    "flow {:?}: mean_bytes >= 1 and think_s > 0",
                    f.name
                ));
            }
        }
        self.host_controllers()?;
        Ok(())
    }

    /// Flows' `host` and `dst` must name hosts of the topology.
    fn check_topology_hosts(&self, t: &TopologySpec) -> Result<(), ScenarioError> {
        for f in &self.flows {
            for (what, name) in [("host", f.host_name()), ("dst", f.dst_name())] {
                match t.node(&name) {
                    None => {
                        return bad(format!(
                            "flow {:?}: {what} {name:?} is not a node of [topology] (its hosts: {})",
                            f.name,
                            t.hosts().collect::<Vec<_>>().join(", ")
                        ));
                    }
                    Some(n) if n.kind != NodeRole::Host => {
                        return bad(format!(
                            "flow {:?}: {what} {name:?} is a router; flows run between hosts",
                            f.name
                        ));
                    }
                    Some(_) => {}
                }
            }
        }
        Ok(())
    }

    /// The dumbbell's bottleneck and access links.
    fn check_bottleneck(&self) -> Result<(), ScenarioError> {
        let b = &self.bottleneck;
        if b.rate_bps == 0 || b.reverse_rate_bps == Some(0) {
            return bad("bottleneck rate_bps must be > 0".into());
        }
        if !(b.delay_ms.is_finite() && b.delay_ms >= 2.0 * self.access.delay_ms) {
            return bad(format!(
                "bottleneck delay_ms (one-way path delay) must be >= 2 x access delay_ms, got {}",
                b.delay_ms
            ));
        }
        if !(0.0..1.0).contains(&b.loss) {
            return bad(format!("bottleneck loss must be in [0, 1), got {}", b.loss));
        }
        if !(0.0..=1.0).contains(&b.reorder) {
            return bad(format!(
                "bottleneck reorder must be in [0, 1], got {}",
                b.reorder
            ));
        }
        if !(b.reorder_delay_ms.is_finite() && b.reorder_delay_ms >= 0.0)
            || (b.reorder > 0.0 && b.reorder_delay_ms <= 0.0)
        {
            return bad(format!(
                "bottleneck reorder_delay_ms must be a finite number of milliseconds >= 0, and > 0 when reorder > 0, got {}",
                b.reorder_delay_ms
            ));
        }
        if !(0.0..=1.0).contains(&b.duplicate) {
            return bad(format!(
                "bottleneck duplicate must be in [0, 1], got {}",
                b.duplicate
            ));
        }
        let queues = [
            b.queue.is_some(),
            b.queue_packets.is_some(),
            b.queue_bytes.is_some(),
        ];
        if queues.iter().filter(|&&q| q).count() > 1 {
            return bad("give at most one of queue, queue_packets, queue_bytes".into());
        }
        if let Some(q) = &b.queue {
            if q != "bdp" {
                return bad(format!("queue must be \"bdp\", got {q:?}"));
            }
        }
        if self.access.rate_bps == 0 || self.access.delay_ms.is_nan() || self.access.delay_ms < 0.0
        {
            return bad("access rate_bps must be > 0 and delay_ms >= 0".into());
        }
        Ok(())
    }
}

/// The ramp keys (cbr, proxy) and the proxy's queue keys.
fn check_ramp(f: &FlowSpec, t: Transport) -> Result<(), ScenarioError> {
    let ramps = f.ramp_bps.is_some() || f.ramp_every_s.is_some();
    if ramps && !matches!(t, Transport::Cbr | Transport::Proxy) {
        return bad(format!(
            "flow {:?}: ramp_bps and ramp_every_s are for cbr and proxy flows",
            f.name
        ));
    }
    match (f.ramp_bps, f.ramp_every_s) {
        (Some(_), Some(e)) if e.is_finite() && e > 0.0 => {}
        (None, None) => {}
        _ => {
            return bad(format!(
                "flow {:?}: give ramp_bps with ramp_every_s, a finite number of seconds > 0",
                f.name
            ));
        }
    }
    if (f.maxq.is_some() || f.drop.is_some()) && t != Transport::Proxy {
        return bad(format!(
            "flow {:?}: maxq and drop are for proxy flows",
            f.name
        ));
    }
    if f.maxq == Some(0) {
        return bad(format!("flow {:?}: maxq must be >= 1", f.name));
    }
    f.overflow()?;
    Ok(())
}
