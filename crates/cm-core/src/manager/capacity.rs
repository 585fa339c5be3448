//! Packet-bunch capacity samples: every flow of a macroflow feeds one
//! filter, so all of them run on one shared estimate (iscc §V-C: flows
//! sharing a link must hold consistent estimates of `C`; §VI-B: the
//! estimates come from packet bunches).

use crate::error::Error;
use crate::id::FlowId;
use crate::manager::CongestionManager;
use crate::time::Instant;
use crate::units::{Rate, mul_div};

/// The controller is told a new estimate only when it moved by more than
/// this fraction (parts per million: 1%) from the one it runs on, so sample
/// noise does not reach it on every report.
const CHANGE_PPM: u64 = 10_000;

impl CongestionManager {
    /// A bottleneck-rate sample for `flow`'s path, from a packet bunch its
    /// receiver measured ([`BunchSampler`](crate::bandwidth::BunchSampler)).
    /// It feeds the macroflow's [`CapacityFilter`](crate::bandwidth::CapacityFilter),
    /// shared by all the macroflow's flows; when the filtered estimate first
    /// appears or moves by more than 1%, it replaces the macroflow's
    /// capacity (as [`CongestionManager::set_capacity`] would, so it also
    /// overrides a capacity set explicitly) and the controller is told. A
    /// zero sample carries no information and is ignored.
    pub fn capacity_sample(
        &mut self,
        now: Instant,
        flow: FlowId,
        sample: Rate,
    ) -> Result<(), Error> {
        let now = self.tick(now);
        let f = self.flow(flow)?;
        let (mf, client) = (f.macroflow, f.client);
        self.touch(now, client);
        let Some(m) = self.macroflows.get_mut(mf.key()) else {
            return Ok(());
        };
        let estimate = m.filter.push(sample);
        if moved(m.capacity, estimate) {
            self.set_capacity(now, mf, estimate)?;
        }
        Ok(())
    }
}

/// Whether `new` differs from `old` by more than [`CHANGE_PPM`] of `old`.
fn moved(old: Option<Rate>, new: Option<Rate>) -> bool {
    match (old, new) {
        (Some(o), Some(n)) => {
            let (o, n) = (o.bytes_per_sec(), n.bytes_per_sec());
            o.abs_diff(n) > mul_div(o, CHANGE_PPM, 1_000_000, false)
        }
        (None, Some(_)) => true,
        // The filter never withdraws an estimate; an explicit one stays.
        (_, None) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bandwidth::{BunchSampler, BurstSchedule};
    use crate::{Bytes, Config, OpenParams};

    fn r(b: u64) -> Rate {
        Rate::from_bytes_per_sec(b)
    }

    /// A manager with one flow open to each address.
    fn with_flows(addrs: &[&str]) -> (CongestionManager, Vec<crate::FlowId>) {
        let mut cm = CongestionManager::new(Config::default()).unwrap();
        let client = cm.register_client(Instant::ZERO).unwrap();
        let flows = addrs
            .iter()
            .map(|a| {
                cm.open(Instant::ZERO, client, OpenParams::to(a.parse().unwrap()))
                    .unwrap()
            })
            .collect();
        (cm, flows)
    }

    #[test]
    fn two_flows_of_a_macroflow_share_one_estimate() {
        let t0 = Instant::ZERO;
        let (mut cm, f) = with_flows(&["192.0.2.1:80", "192.0.2.1:81"]);
        let (a, b) = (f[0], f[1]);
        let mf = cm.macroflow_of(a).unwrap();
        assert_eq!(cm.macroflow_of(b).unwrap(), mf);

        // Each flow's receiver samples its own bursts over a 1.25 MB/s
        // bottleneck (1250-byte packets 1 ms apart).
        let c = r(1_250_000);
        let mut samples = Vec::new();
        for flow in [a, b] {
            let mut sched = BurstSchedule::default();
            let mut rx = BunchSampler::new();
            for k in 0..8u64 {
                let tag = sched.next_packet();
                let t = Instant::from_micros(k / 4 * 50_000 + k % 4 * 1000);
                if let Some(s) = rx.on_packet(t, tag.burst, tag.index, tag.len, Bytes(1250)) {
                    samples.push((flow, s));
                }
            }
        }
        assert_eq!(samples.len(), 4);
        assert!(samples.iter().all(|&(_, s)| s == c));
        // Two samples from a, then one from b: three in the shared filter.
        for (i, &(flow, s)) in [samples[0], samples[1], samples[2]].iter().enumerate() {
            assert_eq!(cm.capacity(mf).unwrap(), None, "after {i} samples");
            cm.capacity_sample(t0, flow, s).unwrap();
        }
        assert_eq!(cm.capacity(mf).unwrap(), Some(c));
        assert_eq!(cm.macroflow_info(mf).unwrap().capacity, Some(c));

        // A sample 0.5% off does not move the controller's estimate; a
        // larger cluster 5% higher does, for both flows.
        cm.capacity_sample(t0, b, r(1_256_000)).unwrap();
        cm.capacity_sample(t0, b, r(1_256_000)).unwrap();
        assert_eq!(cm.capacity(mf).unwrap(), Some(c));
        for flow in [a, b, a, b, a, b] {
            cm.capacity_sample(t0, flow, r(1_312_500)).unwrap();
        }
        assert_eq!(cm.capacity(mf).unwrap(), Some(r(1_312_500)));
        assert_eq!(cm.macroflow_info(mf).unwrap().capacity, Some(r(1_312_500)));
    }

    #[test]
    fn other_macroflows_are_untouched_and_bad_input_is_refused() {
        let t0 = Instant::ZERO;
        let (mut cm, f) = with_flows(&["192.0.2.1:80", "192.0.2.2:80"]);
        let (a, other) = (f[0], f[1]);
        for _ in 0..3 {
            cm.capacity_sample(t0, a, r(1000)).unwrap();
        }
        cm.capacity_sample(t0, a, Rate::ZERO).unwrap();
        let (ma, mo) = (cm.macroflow_of(a).unwrap(), cm.macroflow_of(other).unwrap());
        assert_eq!(cm.capacity(ma).unwrap(), Some(r(1000)));
        assert_eq!(cm.capacity(mo).unwrap(), None);
        cm.close(t0, a).unwrap();
        assert_eq!(
            cm.capacity_sample(t0, a, r(1000)),
            Err(Error::UnknownFlow(a))
        );
    }

    #[test]
    fn moved_is_relative() {
        assert!(moved(None, Some(r(1))));
        assert!(!moved(None, None));
        assert!(!moved(Some(r(1000)), None));
        assert!(!moved(Some(r(100_000)), Some(r(101_000))));
        assert!(moved(Some(r(100_000)), Some(r(101_001))));
        assert!(moved(Some(r(100_000)), Some(r(98_999))));
    }
}
