//! One client thread: its own daemon connection, its flows, and the loop
//! that drives them (per call, or with bulk calls), timing each query and
//! each grant. The phases it goes through are told by [`Shared`].

use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use libcm::{Bytes, Cm, CmEvent, Feedback, FlowId, Transport};

use super::hist::Hist;

/// First address of 198.18.0.0/15.
const NET_BASE: u32 = u32::from_be_bytes([198, 18, 0, 0]);

/// The RTT every update reports.
const RTT: libcm::Duration = libcm::Duration::from_millis(1);

/// Longest wait for one grant before it counts as timed out.
const GRANT_LIMIT: Duration = Duration::from_secs(1);

/// How long connecting may be retried (a full listen backlog).
const CONNECT_LIMIT: Duration = Duration::from_secs(20);

/// Where the run is.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Phase {
    /// Clients connect and open flows.
    Setup,
    /// Load, from `start` until `end`.
    Go {
        /// When the measured load starts.
        start: Instant,
        /// When clients stop starting cycles.
        end: Instant,
    },
    /// Measured: close and go.
    Release,
    /// Something failed: go without load.
    Abort,
}

/// What the clients and the main thread share.
pub struct Shared {
    phase: Mutex<Phase>,
    cv: Condvar,
    /// Clients done with setup (successfully or not).
    pub ready: AtomicU32,
    /// Clients done with the load.
    pub done: AtomicU32,
    /// Operations so far, over all clients (for progress).
    pub ops: AtomicU64,
    /// Some client failed.
    pub failed: AtomicBool,
}

impl Shared {
    /// In setup.
    pub fn new() -> Shared {
        Shared {
            phase: Mutex::new(Phase::Setup),
            cv: Condvar::new(),
            ready: AtomicU32::new(0),
            done: AtomicU32::new(0),
            ops: AtomicU64::new(0),
            failed: AtomicBool::new(false),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Phase> {
        self.phase
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Move every client to `p`.
    pub fn set(&self, p: Phase) {
        *self.lock() = p;
        self.cv.notify_all();
    }

    /// Wait until the phase is no longer `Setup` (`past_go`: nor `Go`).
    fn wait_past(&self, past_go: bool) -> Phase {
        let mut g = self.lock();
        loop {
            let p = *g;
            match p {
                Phase::Setup => {}
                Phase::Go { .. } if past_go => {}
                _ => return p,
            }
            g = self
                .cv
                .wait_timeout(g, Duration::from_millis(200))
                .map_or_else(|e| e.into_inner().0, |r| r.0);
        }
    }
}

/// One client's part of the run.
#[derive(Clone, Debug)]
pub struct ClientPlan {
    /// Index, 0-based.
    pub id: u32,
    /// Clients in the run.
    pub clients: u32,
    /// Flows to open.
    pub flows: u32,
    /// Distinct hosts over all clients.
    pub hosts: u32,
    /// Aggregate operations per second (0: unlimited).
    pub rate: f64,
    /// Bulk calls.
    pub bulk: bool,
    /// The daemon's socket.
    pub socket: PathBuf,
    /// How frames travel.
    pub transport: Transport,
}

/// What one client measured.
#[derive(Debug, Default)]
pub struct ClientResult {
    /// Operations completed.
    pub ops: u64,
    /// Query round trips (bulk: one bulk_query).
    pub query: Hist,
    /// Request -> Send event.
    pub grant: Hist,
    /// Grants not seen within 1 s.
    pub grant_timeouts: u64,
    /// Error events from the daemon (refused fire-and-forget calls).
    pub daemon_errors: u64,
    /// When this client finished its last cycle.
    pub finished: Option<Instant>,
    /// Why it stopped early.
    pub error: Option<String>,
}

/// A client's connection and flows.
struct Client {
    cm: Cm,
    flows: Vec<FlowId>,
    index: HashMap<u64, usize>,
    /// When each flow's outstanding request was made.
    pending: Vec<Option<Instant>>,
    /// Grants seen and not yet answered: (flow index, bytes).
    granted: Vec<(usize, Bytes)>,
}

/// The thread's body: setup, then the load when told, then wait to be
/// released (the daemon is measured with every client still connected).
pub fn run(plan: &ClientPlan, shared: &Shared) -> ClientResult {
    let mut res = ClientResult::default();
    let client = match setup(plan) {
        Ok(c) => Some(c),
        Err(e) => {
            res.error = Some(format!("client {}: {e}", plan.id));
            shared.failed.store(true, Ordering::SeqCst);
            None
        }
    };
    shared.ready.fetch_add(1, Ordering::SeqCst);
    let phase = shared.wait_past(false);
    if let (Some(mut c), Phase::Go { start, end }) = (client, phase) {
        if let Err(e) = c.load(plan, shared, start, end, &mut res) {
            res.error = Some(format!("client {}: {e}", plan.id));
            shared.failed.store(true, Ordering::SeqCst);
        }
        res.finished = Some(Instant::now());
        shared.done.fetch_add(1, Ordering::SeqCst);
        shared.wait_past(true);
        // `c` (the connection) closes here, after the measurement.
    } else {
        shared.done.fetch_add(1, Ordering::SeqCst);
    }
    res
}

fn connect(plan: &ClientPlan) -> Result<Cm, libcm::CmError> {
    let end = Instant::now() + CONNECT_LIMIT;
    loop {
        match Cm::connect_with(&plan.socket, plan.transport) {
            Ok(cm) => return Ok(cm),
            Err(e) if Instant::now() > end => return Err(e),
            Err(_) => std::thread::sleep(Duration::from_millis(10)),
        }
    }
}

fn setup(plan: &ClientPlan) -> Result<Client, libcm::CmError> {
    let mut cm = connect(plan)?;
    let first = u64::from(plan.id) * u64::from(plan.flows);
    let mut flows = Vec::with_capacity(plan.flows as usize);
    let mut index = HashMap::with_capacity(plan.flows as usize);
    for j in 0..plan.flows {
        let host = ((first + u64::from(j)) % u64::from(plan.hosts.max(1))) as u32;
        let ip = Ipv4Addr::from(NET_BASE + host);
        // Ports only tell the flows apart.
        let port = 1024 + (j % 60_000) as u16;
        let f = cm.open(None, SocketAddr::from((ip, port)))?;
        index.insert(f.to_u64(), flows.len());
        flows.push(f);
    }
    Ok(Client {
        cm,
        pending: vec![None; flows.len()],
        flows,
        index,
        granted: Vec::new(),
    })
}

impl Client {
    fn load(
        &mut self,
        plan: &ClientPlan,
        shared: &Shared,
        start: Instant,
        end: Instant,
        res: &mut ClientResult,
    ) -> Result<(), libcm::CmError> {
        // Operations per cycle: request, notify, update, query (per flow).
        let per_cycle = if plan.bulk {
            4.0 * self.flows.len() as f64
        } else {
            4.0
        };
        let interval = (plan.rate > 0.0)
            .then(|| Duration::from_secs_f64(per_cycle * f64::from(plan.clients) / plan.rate));
        // Clients start spread over one interval, not all at once.
        let mut next = start
            + interval.map_or(Duration::ZERO, |i| {
                i.mul_f64(f64::from(plan.id) / f64::from(plan.clients))
            });
        let mut i = 0usize;
        loop {
            let mut now = Instant::now();
            if now >= end {
                return Ok(());
            }
            if let Some(iv) = interval {
                if next > now {
                    std::thread::sleep(next - now);
                    now = Instant::now();
                }
                // Late by more than a cycle: no burst to catch up.
                next = if now > next + iv { now } else { next + iv };
            }
            let ops = if plan.bulk {
                self.bulk_cycle(end, res)?
            } else {
                let k = i % self.flows.len();
                i += 1;
                self.cycle(k, end, res)?
            };
            res.ops += ops;
            shared.ops.fetch_add(ops, Ordering::Relaxed);
        }
    }

    /// One flow's request -> grant -> notify -> update -> query.
    fn cycle(
        &mut self,
        k: usize,
        end: Instant,
        res: &mut ClientResult,
    ) -> Result<u64, libcm::CmError> {
        let mut ops = 0;
        let f = self.flows[k];
        if self.pending[k].is_none() {
            self.pending[k] = Some(Instant::now());
            self.cm.request(f)?;
            ops += 1;
        }
        let deadline = grant_deadline(end);
        if !self.wait_grants(|c| c.pending[k].is_none(), deadline, res)? {
            res.grant_timeouts += 1;
            return Ok(ops);
        }
        // Answer every grant seen (normally just this flow's).
        for (j, bytes) in std::mem::take(&mut self.granted) {
            let g = self.flows[j];
            self.cm.notify(g, bytes.get())?;
            self.cm.update(g, Feedback::acked(bytes.get(), RTT))?;
            ops += 2;
        }
        let t = Instant::now();
        self.cm.query(f)?;
        res.query.record(t.elapsed());
        Ok(ops + 1)
    }

    /// Every flow at once: bulk_request, the grants, bulk_notify,
    /// bulk_update, bulk_query.
    fn bulk_cycle(&mut self, end: Instant, res: &mut ClientResult) -> Result<u64, libcm::CmError> {
        let now = Instant::now();
        let mut reqs = Vec::with_capacity(self.flows.len());
        for (k, p) in self.pending.iter_mut().enumerate() {
            if p.is_none() {
                *p = Some(now);
                reqs.push((self.flows[k], 1));
            }
        }
        self.cm.bulk_request(&reqs)?;
        let mut ops = reqs.len() as u64;
        let deadline = grant_deadline(end);
        if !self.wait_grants(|c| c.pending.iter().all(Option::is_none), deadline, res)? {
            res.grant_timeouts += self.pending.iter().filter(|p| p.is_some()).count() as u64;
        }
        let granted = std::mem::take(&mut self.granted);
        let sent: Vec<(FlowId, u64)> = granted
            .iter()
            .map(|&(j, b)| (self.flows[j], b.get()))
            .collect();
        let fbs: Vec<(FlowId, Feedback)> = sent
            .iter()
            .map(|&(f, n)| (f, Feedback::acked(n, RTT)))
            .collect();
        self.cm.bulk_notify(&sent)?;
        self.cm.bulk_update(&fbs)?;
        ops += 2 * sent.len() as u64;
        let t = Instant::now();
        let est = self.cm.bulk_query(&self.flows)?;
        res.query.record(t.elapsed());
        Ok(ops + est.len() as u64)
    }

    /// Take events until `done` holds or `deadline` passes (false then).
    fn wait_grants(
        &mut self,
        done: impl Fn(&Client) -> bool,
        deadline: Instant,
        res: &mut ClientResult,
    ) -> Result<bool, libcm::CmError> {
        loop {
            while let Some(ev) = self.cm.poll_event()? {
                self.take(ev, res);
            }
            if done(self) {
                return Ok(true);
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(false);
            }
            self.cm
                .wait(Some((deadline - now).min(Duration::from_millis(10))))?;
        }
    }

    fn take(&mut self, ev: CmEvent, res: &mut ClientResult) {
        match ev {
            CmEvent::Send { flow, bytes } => {
                if let Some(&k) = self.index.get(&flow.to_u64()) {
                    if let Some(t) = self.pending[k].take() {
                        res.grant.record(t.elapsed());
                    }
                    self.granted.push((k, bytes));
                }
            }
            CmEvent::Error { .. } | CmEvent::FlowReclaimed { .. } => res.daemon_errors += 1,
            _ => {}
        }
    }
}

/// Wait for a grant at most [`GRANT_LIMIT`], and not long past the end.
fn grant_deadline(end: Instant) -> Instant {
    (Instant::now() + GRANT_LIMIT).min(end + Duration::from_millis(100))
}
