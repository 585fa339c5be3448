//! The congestion manager: the API operations over flows and macroflows.
//!
//! Driver-facing shape like quinn-proto: every input is a method taking
//! `now`; outputs are [`Event`]s from [`CongestionManager::poll_event`]; the
//! driver sleeps until [`CongestionManager::poll_timeout`] and then calls
//! [`CongestionManager::handle_timeout`].
//!
//! This file holds lifecycle (clients, open, close, macroflow membership);
//! `send.rs` the request/grant/notify path, `feedback.rs` updates, aging and
//! rate callbacks, `timers.rs` the timer heap, `info.rs` queries and stats,
//! `choice.rs` the controller and capacity a macroflow runs on, `capacity.rs`
//! packet-bunch capacity samples.

mod capacity;
mod choice;
mod feedback;
mod info;
mod send;
mod timers;

pub use info::{FlowInfo, MacroflowInfo};

use std::collections::{BinaryHeap, HashMap, VecDeque};

use crate::config::Config;
use crate::error::{ConfigError, Error};
use crate::event::Event;
use crate::flow::{Flow, FlowCounters, MacroflowKey, OpenParams};
use crate::id::{ClientId, FlowId, MacroflowId};
use crate::macroflow::Macroflow;
use crate::scheduler::{Entry, Scheduler};
use crate::shaper::Shaper;
use crate::slab::Slab;
use crate::time::Instant;
use crate::units::Bytes;

use timers::TimerEntry;

/// A CM client and the flows it owns.
#[derive(Clone, Debug)]
struct Client {
    last_seen: Instant,
    flows: Vec<FlowId>,
    /// Deadline registered in the client timer heap.
    armed: Option<Instant>,
}

/// The sans-IO congestion manager for one host.
///
/// ```
/// use cm_core::{CongestionManager, Config, Event, Feedback, Instant, Duration, OpenParams};
///
/// let mut cm = CongestionManager::new(Config::default()).unwrap();
/// let now = Instant::ZERO;
/// let client = cm.register_client(now).unwrap();
/// let flow = cm.open(now, client, OpenParams::to("192.0.2.1:80".parse().unwrap())).unwrap();
/// cm.request(now, flow).unwrap();
/// let Some(Event::Grant { flow: f, bytes }) = cm.poll_event() else { panic!() };
/// assert_eq!((f, bytes), (flow, cm.mtu(flow).unwrap()));
/// cm.notify(now, flow, bytes).unwrap();
/// let later = now + Duration::from_millis(40);
/// cm.update(later, flow, Feedback::acked(bytes.get(), Duration::from_millis(40))).unwrap();
/// assert_eq!(cm.query(flow).unwrap().srtt, Some(Duration::from_millis(40)));
/// ```
#[derive(Debug)]
pub struct CongestionManager {
    cfg: Config,
    flows: Slab<Flow>,
    macroflows: Slab<Macroflow>,
    clients: Slab<Client>,
    by_key: HashMap<MacroflowKey, MacroflowId>,
    events: VecDeque<Event>,
    timers: BinaryHeap<TimerEntry>,
    /// The latest `now` seen: time never runs backwards inside the core.
    clock: Instant,
}

impl CongestionManager {
    /// A manager with no flows.
    pub fn new(cfg: Config) -> Result<Self, ConfigError> {
        cfg.validate()?;
        Ok(CongestionManager {
            cfg,
            flows: Slab::default(),
            macroflows: Slab::default(),
            clients: Slab::default(),
            by_key: HashMap::new(),
            events: VecDeque::new(),
            timers: BinaryHeap::new(),
            clock: Instant::ZERO,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// Monotonic view of the driver's clock: a `now` earlier than one
    /// already seen is treated as that one.
    fn tick(&mut self, now: Instant) -> Instant {
        self.clock = self.clock.max(now);
        self.clock
    }

    // ---- clients -------------------------------------------------------

    /// Register a client (an application). Its flows are reclaimed if it is
    /// not heard from for `Config::client_timeout`.
    pub fn register_client(&mut self, now: Instant) -> Result<ClientId, Error> {
        let now = self.tick(now);
        let key = self
            .clients
            .insert(Client {
                last_seen: now,
                flows: Vec::new(),
                armed: None,
            })
            .ok_or(Error::LimitReached("clients"))?;
        let id = ClientId::from_key(key);
        self.arm_client(id, now);
        Ok(id)
    }

    /// The client is alive (any call on one of its flows also counts).
    pub fn client_heartbeat(&mut self, now: Instant, client: ClientId) -> Result<(), Error> {
        let now = self.tick(now);
        let c = self
            .clients
            .get_mut(client.key())
            .ok_or(Error::UnknownClient(client))?;
        c.last_seen = now;
        Ok(())
    }

    /// The client left: close all its flows now.
    pub fn close_client(&mut self, now: Instant, client: ClientId) -> Result<usize, Error> {
        let now = self.tick(now);
        let c = self
            .clients
            .remove(client.key())
            .ok_or(Error::UnknownClient(client))?;
        let n = c.flows.len();
        for f in c.flows {
            self.close_flow_inner(now, f, false);
        }
        Ok(n)
    }

    /// The flows a client owns.
    pub fn client_flows(&self, client: ClientId) -> Result<&[FlowId], Error> {
        let c = self
            .clients
            .get(client.key())
            .ok_or(Error::UnknownClient(client))?;
        Ok(&c.flows)
    }

    fn touch(&mut self, now: Instant, client: ClientId) {
        if let Some(c) = self.clients.get_mut(client.key()) {
            c.last_seen = now;
        }
    }

    // ---- flows ---------------------------------------------------------

    /// `cm_open`: a new flow, placed in the macroflow for its destination
    /// host (and partition), created on first use.
    pub fn open(
        &mut self,
        now: Instant,
        client: ClientId,
        params: OpenParams,
    ) -> Result<FlowId, Error> {
        let now = self.tick(now);
        if self.clients.get(client.key()).is_none() {
            return Err(Error::UnknownClient(client));
        }
        if self.flows.len() >= self.cfg.max_flows {
            return Err(Error::LimitReached("flows"));
        }
        let key = MacroflowKey {
            dst: params.dst.ip(),
            partition: params.partition,
        };
        let mf = match self.by_key.get(&key) {
            Some(&m) => m,
            None => {
                let m = self.new_macroflow(now, Some(key))?;
                self.by_key.insert(key, m);
                m
            }
        };
        let client_slot = self.clients.get(client.key()).map_or(0, |c| c.flows.len());
        let flow = Flow {
            client,
            client_slot,
            macroflow: mf,
            params,
            opened: now,
            weight: 1,
            pending: Bytes::ZERO,
            grants: VecDeque::new(),
            granted: Bytes::ZERO,
            next_grant_seq: 0,
            in_flight: Bytes::ZERO,
            queued: false,
            epoch: 0,
            updates: None,
            counters: FlowCounters::default(),
        };
        let id = FlowId::from_key(
            self.flows
                .insert(flow)
                .ok_or(Error::LimitReached("flows"))?,
        );
        if let Some(c) = self.clients.get_mut(client.key()) {
            c.flows.push(id);
            c.last_seen = now;
        }
        self.attach(now, id, mf);
        Ok(id)
    }

    /// `cm_close`: destroy the flow; its grants and in-flight bytes are
    /// released and the macroflow's bandwidth repartitioned.
    pub fn close(&mut self, now: Instant, flow: FlowId) -> Result<(), Error> {
        let now = self.tick(now);
        let client = self.flow(flow)?.client;
        self.touch(now, client);
        self.close_flow_inner(now, flow, true);
        Ok(())
    }

    fn close_flow_inner(&mut self, now: Instant, flow: FlowId, unlink_client: bool) {
        let Some(mf) = self.flows.get(flow.key()).map(|f| f.macroflow) else {
            return;
        };
        self.detach(now, flow, mf);
        let Some(f) = self.flows.remove(flow.key()) else {
            return;
        };
        if unlink_client {
            if let Some(c) = self.clients.get_mut(f.client.key()) {
                let slot = f.client_slot;
                if slot < c.flows.len() && c.flows[slot] == flow {
                    c.flows.swap_remove(slot);
                    if let Some(&moved) = c.flows.get(slot) {
                        if let Some(mf) = self.flows.get_mut(moved.key()) {
                            mf.client_slot = slot;
                        }
                    }
                }
            }
        }
        self.after_change(now, mf);
    }

    /// The MTU for this flow's path (`cm_mtu`).
    pub fn mtu(&self, flow: FlowId) -> Result<Bytes, Error> {
        let f = self.flow(flow)?;
        Ok(self
            .macroflows
            .get(f.macroflow.key())
            .map_or(self.cfg.mtu, |m| m.mtu))
    }

    /// Set the MTU of a macroflow (e.g. after path MTU discovery).
    pub fn set_mtu(&mut self, now: Instant, mf: MacroflowId, mtu: Bytes) -> Result<(), Error> {
        let now = self.tick(now);
        if mtu.0 == 0 || mtu.0 > 65_535 {
            return Err(Error::InvalidMtu(mtu));
        }
        let m = self.macroflow_mut(mf)?;
        m.mtu = mtu;
        crate::controller::Controller::set_mtu(&mut m.controller, mtu);
        self.after_change(now, mf);
        Ok(())
    }

    /// Set a flow's scheduler weight (1..=65535; receiver hints use this,
    /// sigcomm1999 §3.2.1).
    pub fn set_weight(&mut self, now: Instant, flow: FlowId, weight: u32) -> Result<(), Error> {
        let now = self.tick(now);
        if !(1..=65_535).contains(&weight) {
            return Err(Error::InvalidWeight(weight));
        }
        let f = self
            .flows
            .get_mut(flow.key())
            .ok_or(Error::UnknownFlow(flow))?;
        let (old, mf, client) = (f.weight, f.macroflow, f.client);
        f.weight = weight;
        if let Some(m) = self.macroflows.get_mut(mf.key()) {
            m.total_weight = m.total_weight - u64::from(old) + u64::from(weight);
        }
        self.touch(now, client);
        self.check_thresholds(now, mf);
        Ok(())
    }

    /// `cm_getmacroflow`: the macroflow the flow belongs to.
    pub fn macroflow_of(&self, flow: FlowId) -> Result<MacroflowId, Error> {
        Ok(self.flow(flow)?.macroflow)
    }

    /// `cm_setmacroflow`: move the flow into `target`, or into a new
    /// macroflow of its own when `target` is `None`. Its in-flight bytes and
    /// outstanding grants move with it. Returns the flow's macroflow.
    pub fn set_macroflow(
        &mut self,
        now: Instant,
        flow: FlowId,
        target: Option<MacroflowId>,
    ) -> Result<MacroflowId, Error> {
        let now = self.tick(now);
        let old = self.flow(flow)?.macroflow;
        let new = match target {
            Some(m) => {
                if self.macroflows.get(m.key()).is_none() {
                    return Err(Error::UnknownMacroflow(m));
                }
                m
            }
            None => self.new_macroflow(now, None)?,
        };
        let client = self.flow(flow)?.client;
        self.touch(now, client);
        if new == old {
            return Ok(old);
        }
        self.detach(now, flow, old);
        self.attach(now, flow, new);
        self.after_change(now, old);
        Ok(new)
    }

    /// The macroflow `mf`, or `UnknownMacroflow`.
    pub(crate) fn macroflow_mut(&mut self, mf: MacroflowId) -> Result<&mut Macroflow, Error> {
        self.macroflows
            .get_mut(mf.key())
            .ok_or(Error::UnknownMacroflow(mf))
    }

    fn flow(&self, flow: FlowId) -> Result<&Flow, Error> {
        self.flows.get(flow.key()).ok_or(Error::UnknownFlow(flow))
    }

    fn new_macroflow(
        &mut self,
        now: Instant,
        key: Option<MacroflowKey>,
    ) -> Result<MacroflowId, Error> {
        let mtu = self.cfg.mtu;
        let m = Macroflow::new(
            now,
            key,
            self.cfg.controller.build(mtu),
            self.cfg.scheduler.build(),
            Shaper::new(now, self.cfg.burst_time).with_slack(self.cfg.pacing_slack),
            mtu,
        );
        let id = MacroflowId::from_key(
            self.macroflows
                .insert(m)
                .ok_or(Error::LimitReached("macroflows"))?,
        );
        Ok(id)
    }

    /// Put `flow` (already in the flow slab) into macroflow `mf`.
    fn attach(&mut self, now: Instant, flow: FlowId, mf: MacroflowId) {
        let Some(f) = self.flows.get_mut(flow.key()) else {
            return;
        };
        f.macroflow = mf;
        f.epoch = f.epoch.wrapping_add(1);
        f.queued = f.pending > Bytes::ZERO;
        let entry = Entry {
            flow,
            epoch: f.epoch,
        };
        let (weight, in_flight, granted, subscribed, backlogged) = (
            f.weight,
            f.in_flight,
            f.granted,
            f.updates.is_some(),
            f.queued,
        );
        let grants: Vec<u64> = f.grants.iter().map(|g| g.seq).collect();
        let Some(m) = self.macroflows.get_mut(mf.key()) else {
            return;
        };
        m.flows.push(flow);
        m.total_weight += u64::from(weight);
        m.in_flight += in_flight;
        m.reserved += granted;
        m.empty_since = None;
        if subscribed {
            m.subscribers.push(flow);
        }
        if backlogged {
            self.wake_from_idle(now, mf);
            if let Some(m) = self.macroflows.get_mut(mf.key()) {
                m.scheduler.push(entry);
            }
        }
        if let Some(m) = self.macroflows.get_mut(mf.key()) {
            let deadline = now + self.cfg.grant_timeout.max(m.rtt.srtt().unwrap_or_default());
            for seq in grants {
                m.expiry.push_back(crate::macroflow::Expiry {
                    deadline,
                    flow,
                    seq,
                });
            }
            if in_flight > Bytes::ZERO || granted > Bytes::ZERO {
                m.idle_since = None;
            }
        }
        self.after_change(now, mf);
    }

    /// Take `flow` out of macroflow `mf` (the flow stays in the slab).
    fn detach(&mut self, now: Instant, flow: FlowId, mf: MacroflowId) {
        let Some(f) = self.flows.get_mut(flow.key()) else {
            return;
        };
        let (weight, in_flight, granted) = (f.weight, f.in_flight, f.granted);
        f.queued = false;
        f.epoch = f.epoch.wrapping_add(1); // its scheduler entry is now stale
        let Some(m) = self.macroflows.get_mut(mf.key()) else {
            return;
        };
        if let Some(i) = m.flows.iter().position(|&x| x == flow) {
            m.flows.swap_remove(i);
        }
        if let Some(i) = m.subscribers.iter().position(|&x| x == flow) {
            m.subscribers.swap_remove(i);
        }
        m.total_weight = m.total_weight.saturating_sub(u64::from(weight));
        m.in_flight = m.in_flight - in_flight;
        m.reserved = m.reserved - granted;
        if m.flows.is_empty() {
            m.empty_since = Some(now);
        }
        self.note_if_idle(now, mf);
    }
}
