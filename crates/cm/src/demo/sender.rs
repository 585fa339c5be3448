//! The sending host, written as an application of libcm would be: an
//! embedded [`libcm::Cm`] and always-backlogged ALF flows that send exactly
//! when granted (`cm_request` → `cmapp_send` callback → send → `cm_notify`,
//! cm-implementation-linux §2.1.1), and feed the receivers' CC-UDP acks
//! back with `cm_update` (§3.3). The datagrams, acks and loss rule are
//! CC-UDP's (`cm_transport::ccudp`), time is `cm-clock`'s.

use std::cell::RefCell;
use std::net::{SocketAddr, UdpSocket};
use std::rc::Rc;
use std::time::Duration as StdDuration;

use anyhow::{Context, Result};
use cm_core::{Bytes, Config, FlowId, Instant};
use cm_transport::ccudp::feedback::Accounting;
use cm_transport::ccudp::wire::{self, DATA_HEADER_LEN, DataHeader, Packet};
use libcm::{Cm, CmEvent};

use crate::ccudp_acks::is_transient;

/// One application flow.
pub struct App {
    pub dst: SocketAddr,
    pub start: StdDuration,
    pub id: Option<FlowId>,
    /// CC-UDP's record of what it sent and what became of it.
    acct: Accounting,
    /// Bytes acknowledged as received.
    pub acked: u64,
    /// Bytes reported lost.
    pub lost: u64,
    /// Bytes acknowledged when the measurement window opened.
    pub acked_at_mark: u64,
}

impl App {
    /// A flow to `dst` that starts `start` after the run begins.
    pub fn new(dst: SocketAddr, start: StdDuration) -> Self {
        App {
            dst,
            start,
            id: None,
            acct: Accounting::new(),
            acked: 0,
            lost: 0,
            acked_at_mark: 0,
        }
    }
}

/// What the send callback and the loop share.
struct Shared {
    apps: Vec<App>,
    sock: UdpSocket,
    buf: Vec<u8>,
    padding: Vec<u8>,
    error: Option<anyhow::Error>,
}

impl Shared {
    /// `cmapp_send`: one datagram of the granted size, `cm_notify` (0
    /// declines), and a new request: always backlogged.
    fn on_grant(&mut self, cm: &mut Cm, flow: FlowId, bytes: Bytes) {
        let Some(i) = self.apps.iter().position(|a| a.id == Some(flow)) else {
            return;
        };
        let app = &mut self.apps[i];
        let len = usize::try_from(bytes.get()).unwrap_or(usize::MAX);
        let now = cm_clock::now();
        let h = DataHeader {
            session: i as u16,
            seq: app.acct.next_seq(),
            ts: wire::timestamp(now),
        };
        let pad = len.saturating_sub(DATA_HEADER_LEN).min(self.padding.len());
        h.encode(&self.padding[..pad], &mut self.buf);
        let sent = match self.sock.send_to(&self.buf, app.dst) {
            Ok(n) => {
                app.acct.on_queued(n);
                app.acct.on_departed(now);
                n as u64
            }
            Err(e) if is_transient(&e) => 0,
            Err(e) => {
                self.error = Some(anyhow::Error::new(e).context("sender send"));
                0
            }
        };
        if let Err(e) = cm.notify(flow, sent).and_then(|()| cm.request(flow)) {
            self.error = Some(anyhow::Error::new(e).context("cm_notify / cm_request"));
        }
    }
}

/// The sender's event loop state.
pub struct Sender {
    pub cm: Cm,
    shared: Rc<RefCell<Shared>>,
    /// When the run began.
    t0: Instant,
    buf: Vec<u8>,
}

impl Sender {
    /// A sender on an ephemeral port of `ip`, with an embedded CM.
    pub fn new(cfg: Config, apps: Vec<App>, ip: std::net::IpAddr) -> Result<Self> {
        let sock = UdpSocket::bind((ip, 0)).context("binding sender socket")?;
        sock.set_nonblocking(true)?;
        let mut cm = Cm::embedded(cfg)?;
        let shared = Rc::new(RefCell::new(Shared {
            apps,
            sock,
            buf: Vec::with_capacity(65_536),
            padding: vec![0; 65_536],
            error: None,
        }));
        let cb = shared.clone();
        cm.register_send(move |cm, flow, bytes| cb.borrow_mut().on_grant(cm, flow, bytes));
        Ok(Sender {
            cm,
            shared,
            t0: cm_clock::now(),
            buf: vec![0; 65_536],
        })
    }

    /// Time since the run began.
    pub fn elapsed(&self) -> StdDuration {
        cm_clock::to_std_duration(cm_clock::now().saturating_since(self.t0))
    }

    /// The end of the run: the applications (with what they counted) and
    /// the time since the start.
    pub fn finish(self) -> (Vec<App>, StdDuration) {
        let elapsed = self.elapsed();
        (std::mem::take(&mut self.shared.borrow_mut().apps), elapsed)
    }

    /// Run `f` on the applications.
    pub fn with_apps<T>(&self, f: impl FnOnce(&mut [App]) -> T) -> T {
        f(&mut self.shared.borrow_mut().apps)
    }

    /// One turn of the loop: start due flows, serve grants, report
    /// timeouts, then wait for acks until `deadline` (time since the start)
    /// or the next timer, and report what they say.
    pub fn turn(&mut self, deadline: StdDuration) -> Result<()> {
        self.start_flows()?;
        self.serve()?;
        let mut wait = deadline.saturating_sub(self.elapsed());
        if let Some(t) = self.cm.next_timeout() {
            wait = wait.min(t);
        }
        let timers = self.with_apps(|apps| {
            apps.iter()
                .filter_map(|a| a.acct.poll_timeout())
                .min()
                .map(cm_clock::until)
        });
        if let Some(t) = timers {
            wait = wait.min(t);
        }
        let wait = wait.clamp(StdDuration::from_micros(1), StdDuration::from_millis(20));
        let readable = {
            let s = self.shared.borrow();
            crate::wait::readable(&s.sock, wait)?
        };
        if readable {
            self.read_acks()?;
        }
        self.timeouts(cm_clock::now())?;
        self.serve()
    }

    fn start_flows(&mut self) -> Result<()> {
        let elapsed = self.elapsed();
        let due: Vec<(usize, SocketAddr)> = self.with_apps(|apps| {
            apps.iter()
                .enumerate()
                .filter(|(_, a)| a.id.is_none() && elapsed >= a.start)
                .map(|(i, a)| (i, a.dst))
                .collect()
        });
        for (i, dst) in due {
            let f = self.cm.open(None, dst)?;
            self.with_apps(|apps| apps[i].id = Some(f));
            self.cm.request(f)?; // cm_request: keep one request pending
        }
        Ok(())
    }

    /// Deliver grants to the send callback; a grant that expired unused is
    /// asked for again.
    fn serve(&mut self) -> Result<()> {
        self.cm.dispatch()?;
        while let Some(ev) = self.cm.poll_event()? {
            match ev {
                CmEvent::Send { flow, bytes } => {
                    self.shared.borrow_mut().on_grant(&mut self.cm, flow, bytes);
                }
                CmEvent::GrantExpired { flow, .. } => self.cm.request(flow)?,
                _ => {}
            }
        }
        match self.shared.borrow_mut().error.take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Read every ack waiting and report what each resolved (`cm_update`).
    fn read_acks(&mut self) -> Result<()> {
        loop {
            let n = match self.shared.borrow().sock.recv(&mut self.buf) {
                Ok(n) => n,
                Err(e) if is_transient(&e) => return Ok(()),
                Err(e) => return Err(e).context("sender recv"),
            };
            let Ok(Packet::Ack(ack)) = wire::decode(&self.buf[..n]) else {
                continue;
            };
            let now = cm_clock::now();
            let update = self.with_apps(|apps| {
                let app = apps.get_mut(usize::from(ack.session))?;
                let fb = app.acct.on_ack(now, &ack)?;
                app.acked += fb.nrecd.get();
                app.lost += fb.nsent.get() - fb.nrecd.get();
                Some((app.id?, fb))
            });
            if let Some((flow, fb)) = update {
                self.cm.update(flow, fb)?;
            }
        }
    }

    /// Nothing heard for a retransmission timeout: what is in flight is
    /// lost to persistent congestion (RFC 3124 §5.1.1, a TCP timeout).
    fn timeouts(&mut self, now: Instant) -> Result<()> {
        let fbs: Vec<_> = self.with_apps(|apps| {
            apps.iter_mut()
                .filter_map(|a| {
                    let fb = a.acct.handle_timeout(now)?;
                    a.lost += fb.nsent.get();
                    Some((a.id?, fb))
                })
                .collect()
        });
        for (flow, fb) in fbs {
            self.cm.update(flow, fb)?;
        }
        Ok(())
    }
}
