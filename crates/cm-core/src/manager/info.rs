//! Queries (`cm_query`) and introspection for `cm stat`.

use crate::controller::Controller;
use crate::error::Error;
use crate::flow::{CongestionCounters, FlowCounters, MacroflowKey, OpenParams, PathEstimate};
use crate::id::{ClientId, FlowId, MacroflowId};
use crate::manager::CongestionManager;
use crate::manager::feedback::estimate;
use crate::scheduler::Scheduler;
use crate::time::Duration;
use crate::units::{Bytes, Rate};

/// A snapshot of one macroflow.
#[derive(Clone, Debug, PartialEq)]
pub struct MacroflowInfo {
    /// Its id.
    pub id: MacroflowId,
    /// The default-aggregation key, if it was created by `open`.
    pub key: Option<MacroflowKey>,
    /// Controller name.
    pub controller: &'static str,
    /// Scheduler name.
    pub scheduler: &'static str,
    /// Congestion window.
    pub window: Bytes,
    /// Rate estimate (window / srtt).
    pub rate: Option<Rate>,
    /// Smoothed RTT.
    pub srtt: Option<Duration>,
    /// RTT variation.
    pub rttvar: Option<Duration>,
    /// Minimum RTT in this activity period.
    pub min_rtt: Option<Duration>,
    /// Recent loss fraction.
    pub loss: Option<f64>,
    /// Bytes in flight.
    pub in_flight: Bytes,
    /// Bytes granted and not yet notified.
    pub reserved: Bytes,
    /// The shaper's credit in bytes as of its last grant decision (negative:
    /// the debt the last grant left, repaid at the shaping rate before the
    /// next grant, or to within rate × `Config::pacing_slack` of it).
    pub shaper_credit: i64,
    /// The rate the shaper releases grants at (`None`: unpaced).
    pub shaping_rate: Option<Rate>,
    /// MTU.
    pub mtu: Bytes,
    /// Whether the controller is in slow start.
    pub slow_start: bool,
    /// The bottleneck capacity estimate the controller is told (iscc §VI-B),
    /// from packet-bunch samples or set explicitly; `None`: none yet.
    pub capacity: Option<Rate>,
    /// Exponential-aging halvings taken since feedback stopped (0: closed loop).
    pub aging_steps: u32,
    /// The loss events and timeouts its controller answered.
    pub congestion: CongestionCounters,
    /// Its flows.
    pub flows: Vec<FlowId>,
    /// When it was created.
    pub created: crate::time::Instant,
}

/// A snapshot of one flow.
#[derive(Clone, Debug, PartialEq)]
pub struct FlowInfo {
    /// Its id.
    pub id: FlowId,
    /// Its macroflow.
    pub macroflow: MacroflowId,
    /// Its client.
    pub client: ClientId,
    /// Its addresses.
    pub params: OpenParams,
    /// Scheduler weight.
    pub weight: u32,
    /// Fraction of the macroflow's weight: its share of the rate.
    pub share: f64,
    /// Requested bytes not yet granted.
    pub pending: Bytes,
    /// Granted bytes not yet notified.
    pub granted: Bytes,
    /// Bytes in flight.
    pub in_flight: Bytes,
    /// Its path estimate.
    pub estimate: PathEstimate,
    /// Counters.
    pub counters: FlowCounters,
    /// When it was opened.
    pub opened: crate::time::Instant,
}

impl CongestionManager {
    /// `cm_query`: the flow's share of the rate, and the macroflow's srtt,
    /// rttvar and loss; `None` fields mean "no estimate yet".
    pub fn query(&self, flow: FlowId) -> Result<PathEstimate, Error> {
        let f = self.flows.get(flow.key()).ok_or(Error::UnknownFlow(flow))?;
        let m = self
            .macroflows
            .get(f.macroflow.key())
            .ok_or(Error::UnknownMacroflow(f.macroflow))?;
        Ok(estimate(m, f))
    }

    /// Snapshot of a macroflow.
    pub fn macroflow_info(&self, id: MacroflowId) -> Result<MacroflowInfo, Error> {
        let m = self
            .macroflows
            .get(id.key())
            .ok_or(Error::UnknownMacroflow(id))?;
        let srtt = m.rtt.srtt();
        Ok(MacroflowInfo {
            id,
            key: m.key,
            controller: m.controller.name(),
            scheduler: m.scheduler.name(),
            window: m.controller.window(),
            rate: m.controller.rate(srtt),
            srtt,
            rttvar: m.rtt.rttvar(),
            min_rtt: m.rtt.min_rtt(),
            loss: m.loss.fraction(),
            in_flight: m.in_flight,
            reserved: m.reserved,
            shaper_credit: m.shaper.credit(),
            shaping_rate: m.shaping_rate(),
            mtu: m.mtu,
            slow_start: m.controller.in_slow_start(),
            capacity: m.capacity,
            aging_steps: m.aging.map_or(0, |a| a.steps),
            congestion: m.congestion,
            flows: m.flows.clone(),
            created: m.created,
        })
    }

    /// A macroflow's congestion window and its number of flows, without
    /// the copy of its flow list that [`CongestionManager::macroflow_info`]
    /// makes: for a caller that shares the window out often.
    pub fn macroflow_window(&self, id: MacroflowId) -> Result<(Bytes, usize), Error> {
        let m = self
            .macroflows
            .get(id.key())
            .ok_or(Error::UnknownMacroflow(id))?;
        Ok((m.controller.window(), m.flows.len()))
    }

    /// Snapshot of a flow.
    pub fn flow_info(&self, id: FlowId) -> Result<FlowInfo, Error> {
        let f = self.flows.get(id.key()).ok_or(Error::UnknownFlow(id))?;
        let m = self
            .macroflows
            .get(f.macroflow.key())
            .ok_or(Error::UnknownMacroflow(f.macroflow))?;
        Ok(FlowInfo {
            id,
            macroflow: f.macroflow,
            client: f.client,
            params: f.params,
            weight: f.weight,
            share: f64::from(f.weight) / m.total_weight.max(1) as f64,
            pending: f.pending,
            granted: f.granted,
            in_flight: f.in_flight,
            estimate: estimate(m, f),
            counters: f.counters,
            opened: f.opened,
        })
    }

    /// Ids of all macroflows (including lingering empty ones).
    pub fn macroflow_ids(&self) -> Vec<MacroflowId> {
        self.macroflows
            .iter()
            .map(|(k, _)| MacroflowId::from_key(k))
            .collect()
    }

    /// Number of open flows.
    pub fn flow_count(&self) -> usize {
        self.flows.len()
    }

    /// Number of macroflows (including lingering empty ones).
    pub fn macroflow_count(&self) -> usize {
        self.macroflows.len()
    }
}
