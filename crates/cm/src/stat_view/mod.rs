//! What `cm stat`, `cm top` and `cm query` show: the daemon's macroflow and
//! flow records (libcm's [`libcm::Stat`]) as serialisable views and as
//! aligned text tables.
//!
//! Estimates arrive signed, negative meaning "no estimate yet" (the RFC 3124
//! `cm_query` defect fixed in cm-ipc); here they become `None`, printed as
//! `-` in tables and `null` in JSON.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use cm_report::fmt;
use libcm::{Cm, CmError, FlowStat, MacroflowStat, Stat};
use serde::Serialize;

/// The uid of a macroflow shared by all users (cm-ipc `ALL_USERS`).
const ALL_USERS: u32 = u32::MAX;

/// The `--socket` option of every command that talks to the daemon.
#[derive(Debug, Clone, clap::Args)]
pub struct SocketArg {
    /// The daemon's control socket [default: $CM_SOCKET, else
    /// $XDG_RUNTIME_DIR/cm.sock, else /run/cm.sock].
    #[arg(long, short)]
    pub socket: Option<PathBuf>,
}

impl SocketArg {
    /// The socket to use ([`socket_path`]).
    pub fn path(&self) -> PathBuf {
        socket_path(self.socket.as_deref())
    }

    /// Connect to the daemon there ([`connect`]).
    pub fn connect(&self) -> Result<Cm> {
        connect(self.socket.as_deref())
    }
}

/// The daemon's socket: `--socket`, else libcm's default path.
pub fn socket_path(socket: Option<&Path>) -> PathBuf {
    socket.map_or_else(libcm::default_socket_path, Path::to_path_buf)
}

/// Connect to the daemon, or explain how to start one.
pub fn connect(socket: Option<&Path>) -> Result<Cm> {
    let path = socket_path(socket);
    match Cm::connect(&path) {
        Ok(cm) => Ok(cm),
        Err(CmError::NoDaemon { path, source }) => Err(anyhow::anyhow!(
            "no CM daemon is listening at {p} ({source}).\n\
             Start one with `cmd --socket {p}` (or plain `cmd` for the default path), \
             or install the systemd unit contrib/systemd/cmd.service \
             (`systemctl enable --now cmd`, socket /run/cm.sock); \
             point `--socket` or $CM_SOCKET at a running daemon.",
            p = path.display()
        )),
        Err(e) => Err(e).with_context(|| format!("talking to the CM daemon at {}", path.display())),
    }
}

/// A signed wire estimate as an option (negative: none).
fn est(v: i64) -> Option<u64> {
    u64::try_from(v).ok()
}

/// A loss fraction, if it is one.
fn loss(v: f64) -> Option<f64> {
    (0.0..=1.0).contains(&v).then_some(v)
}

/// Bytes per second to Mbit/s.
pub fn mbit(bytes_per_sec: f64) -> f64 {
    bytes_per_sec * 8.0 / 1e6
}

/// One macroflow.
#[derive(Clone, Debug, Serialize)]
pub struct MacroflowView {
    /// Its id.
    pub id: u64,
    /// Destination host (`None` for a macroflow made by `setmacroflow`).
    pub dst: Option<IpAddr>,
    /// Owner uid of its sharing partition; `None`: shared by all users.
    pub uid: Option<u32>,
    /// The controller it runs (`aimd`, `iscc`, ...).
    pub controller: String,
    /// The bottleneck capacity estimate its controller was given
    /// (`cm_set_capacity`), if any.
    pub capacity_bytes_per_sec: Option<u64>,
    /// The same in Mbit/s.
    pub capacity_mbit: Option<f64>,
    /// Congestion window.
    pub window_bytes: u64,
    /// The macroflow's rate estimate.
    pub rate_bytes_per_sec: Option<u64>,
    /// The same in Mbit/s.
    pub rate_mbit: Option<f64>,
    /// Smoothed RTT.
    pub srtt_us: Option<u64>,
    /// RTT variation.
    pub rttvar_us: Option<u64>,
    /// Loss fraction in [0, 1].
    pub loss: Option<f64>,
    /// Bytes in flight.
    pub in_flight_bytes: u64,
    /// Number of flows (all of them, including ones the caller cannot see).
    pub nflows: u32,
    /// Loss events that lowered its window (a TCP's recoveries).
    pub reductions: u64,
    /// Retransmission timeouts reported to it.
    pub timeouts: u64,
    /// Measured sending rate of its flows together (`cm top` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub send_mbit: Option<f64>,
    /// Its flows (`cm stat`; absent in `cm query`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flows: Option<Vec<FlowView>>,
}

/// One flow.
#[derive(Clone, Debug, Serialize)]
pub struct FlowView {
    /// Its id.
    pub id: u64,
    /// Its macroflow.
    pub macroflow: u64,
    /// Destination address and port.
    pub dst: SocketAddr,
    /// Owner uid.
    pub uid: u32,
    /// Owner process id.
    pub pid: u32,
    /// Weighted share of the macroflow, in [0, 1].
    pub share: f64,
    /// Bytes in flight.
    pub in_flight_bytes: u64,
    /// Bytes sent so far.
    pub sent_bytes: u64,
    /// Bytes reported lost so far.
    pub lost_bytes: u64,
    /// The flow's share of the macroflow's rate.
    pub rate_bytes_per_sec: Option<u64>,
    /// The same in Mbit/s.
    pub rate_mbit: Option<f64>,
    /// Measured sending rate from `sent` deltas (`cm top` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub send_mbit: Option<f64>,
    /// The CM protocol's view of the flow's peer (sigcomm1999 §4.3), when
    /// its sender speaks the protocol; `None`: application feedback only.
    pub peer: Option<PeerView>,
    /// A kernel TCP connection on the `cm` congestion control: its local
    /// address (shown as `local>dst`, pid `kernel`). `None`: a libcm flow.
    pub kernel: Option<SocketAddr>,
}

/// A flow's peer as the CM protocol sees it.
#[derive(Clone, Debug, Serialize)]
pub struct PeerView {
    /// `handshaking`, `negotiated` (feedback from probes) or `fallback`
    /// (no receiver CM: the application's feedback).
    pub mode: &'static str,
    /// Smoothed RTT of probes, µs.
    pub probe_srtt_us: Option<u64>,
    /// Fraction of CM-headed packets the receiver CM declared lost.
    pub loss: Option<f64>,
    /// Probes sent.
    pub probes: u64,
    /// Responses accepted.
    pub responses: u64,
}

/// Everything `cm stat` shows.
#[derive(Clone, Debug, Serialize)]
pub struct StatView {
    /// Macroflows by id, each with its flows.
    pub macroflows: Vec<MacroflowView>,
    /// Flows whose macroflow was not in the snapshot (normally none).
    pub unattached_flows: Vec<FlowView>,
}

impl MacroflowView {
    /// The view of one record, without flows.
    pub fn new(m: &MacroflowStat) -> Self {
        let rate = est(m.estimate.rate);
        MacroflowView {
            id: m.id,
            dst: m.dst,
            uid: (m.uid != ALL_USERS).then_some(m.uid),
            controller: m.controller.clone(),
            capacity_bytes_per_sec: m.capacity,
            capacity_mbit: m.capacity.map(|c| mbit(c as f64)),
            window_bytes: m.window,
            rate_bytes_per_sec: rate,
            rate_mbit: rate.map(|r| mbit(r as f64)),
            srtt_us: est(m.estimate.srtt_us),
            rttvar_us: est(m.estimate.rttvar_us),
            loss: loss(m.estimate.loss),
            in_flight_bytes: m.in_flight,
            nflows: m.flows,
            reductions: m.reductions,
            timeouts: m.timeouts,
            send_mbit: None,
            flows: None,
        }
    }
}

impl FlowView {
    /// The view of one record.
    pub fn new(f: &FlowStat) -> Self {
        let rate = est(f.estimate.rate);
        FlowView {
            id: f.id,
            macroflow: f.macroflow,
            dst: f.dst,
            uid: f.uid,
            pid: f.pid,
            share: f.share,
            in_flight_bytes: f.in_flight,
            sent_bytes: f.sent,
            lost_bytes: f.lost,
            rate_bytes_per_sec: rate,
            rate_mbit: rate.map(|r| mbit(r as f64)),
            send_mbit: None,
            peer: f.peer.map(|p| PeerView {
                mode: p.mode.as_str(),
                probe_srtt_us: p.probe_srtt_us,
                loss: p.loss_ppm.map(|l| l as f64 / 1e6),
                probes: p.probes,
                responses: p.responses,
            }),
            kernel: f.kernel,
        }
    }
}

impl StatView {
    /// Group a snapshot's flows under their macroflows, both by id.
    pub fn new(s: &Stat) -> Self {
        let mut macroflows: Vec<MacroflowView> = s
            .macroflows
            .iter()
            .map(|m| {
                let mut v = MacroflowView::new(m);
                v.flows = Some(Vec::new());
                v
            })
            .collect();
        macroflows.sort_by_key(|m| m.id);
        let mut unattached_flows = Vec::new();
        let mut flows: Vec<&FlowStat> = s.flows.iter().collect();
        flows.sort_by_key(|f| f.id);
        for f in flows {
            let slot = macroflows
                .iter_mut()
                .find(|m| m.id == f.macroflow)
                .and_then(|m| m.flows.as_mut());
            match slot {
                Some(list) => list.push(FlowView::new(f)),
                None => unattached_flows.push(FlowView::new(f)),
            }
        }
        StatView {
            macroflows,
            unattached_flows,
        }
    }

    /// Fill in measured sending rates (Mbit/s by flow id), and each
    /// macroflow's sum of them.
    pub fn set_send_rates(&mut self, rates: &HashMap<u64, f64>) {
        for m in &mut self.macroflows {
            let mut sum = None;
            for f in m.flows.iter_mut().flatten() {
                f.send_mbit = rates.get(&f.id).copied();
                if let Some(r) = f.send_mbit {
                    *sum.get_or_insert(0.0) += r;
                }
            }
            m.send_mbit = sum;
        }
        for f in &mut self.unattached_flows {
            f.send_mbit = rates.get(&f.id).copied();
        }
    }
}

// ---- text ---------------------------------------------------------------

/// Rows of cells printed with aligned columns (the first left-aligned, the
/// rest right-aligned), each line prefixed by `indent`.
fn table(out: &mut String, indent: &str, rows: &[Vec<String>]) {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let mut width = vec![0; cols];
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            width[i] = width[i].max(c.chars().count());
        }
    }
    for r in rows {
        let mut line = String::from(indent);
        for (i, c) in r.iter().enumerate() {
            let pad = width[i] - c.chars().count();
            if i > 0 {
                line.push_str("  ");
            }
            if i == 0 || i == 1 {
                line.push_str(c);
                line.push_str(&" ".repeat(pad));
            } else {
                line.push_str(&" ".repeat(pad));
                line.push_str(c);
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
}

fn dash<T>(v: Option<T>, f: impl Fn(T) -> String) -> String {
    v.map_or_else(|| "-".to_string(), f)
}

/// A rate already in Mbit/s as a bare number (the column header names the unit).
fn fmt_mbit(v: f64) -> String {
    fmt::mbit(v * 1e6)
}

fn macroflow_header(measured: bool) -> Vec<String> {
    let mut h = [
        "MACROFLOW",
        "DESTINATION",
        "UID",
        "CONTROLLER",
        "CAPACITY(Mbit/s)",
        "WINDOW",
        "RATE(Mbit/s)",
        "SRTT",
        "RTTVAR",
        "LOSS%",
        "IN-FLIGHT",
        "FLOWS",
        "CUTS",
        "RTOS",
    ]
    .map(String::from)
    .to_vec();
    if measured {
        h.push("SENDING(Mbit/s)".into());
    }
    h
}

fn macroflow_row(m: &MacroflowView, measured: bool) -> Vec<String> {
    let mut r = vec![
        m.id.to_string(),
        dash(m.dst, |d| d.to_string()),
        m.uid.map_or_else(|| "all".to_string(), |u| u.to_string()),
        m.controller.clone(),
        dash(m.capacity_mbit, fmt_mbit),
        fmt::bytes(m.window_bytes),
        dash(m.rate_mbit, fmt_mbit),
        dash(m.srtt_us, fmt::micros),
        dash(m.rttvar_us, fmt::micros),
        dash(m.loss, |l| format!("{:.2}", l * 100.0)),
        fmt::bytes(m.in_flight_bytes),
        m.nflows.to_string(),
        m.reductions.to_string(),
        m.timeouts.to_string(),
    ];
    if measured {
        r.push(dash(m.send_mbit, fmt_mbit));
    }
    r
}

fn flow_header(measured: bool) -> Vec<String> {
    let mut h = [
        "FLOW",
        "DESTINATION",
        "UID",
        "PID",
        "SHARE%",
        "IN-FLIGHT",
        "SENT",
        "LOST",
        "RATE(Mbit/s)",
        "PEER-CM",
    ]
    .map(String::from)
    .to_vec();
    if measured {
        h.push("SENDING(Mbit/s)".into());
    }
    h
}

/// `negotiated/61ms/1.20%`, `fallback`, or `-` (no protocol).
fn peer_cell(p: Option<&PeerView>) -> String {
    let Some(p) = p else {
        return "-".into();
    };
    let mut s = p.mode.to_string();
    if let Some(r) = p.probe_srtt_us {
        s += &format!("/{}ms", r / 1000);
    }
    if let Some(l) = p.loss {
        s += &format!("/{:.2}%", l * 100.0);
    }
    s
}

fn flow_row(f: &FlowView, measured: bool) -> Vec<String> {
    let mut r = vec![
        f.id.to_string(),
        f.kernel
            .map_or_else(|| f.dst.to_string(), |l| format!("{l}>{}", f.dst)),
        f.uid.to_string(),
        f.kernel
            .map_or_else(|| f.pid.to_string(), |_| "kernel".into()),
        format!("{:.1}", f.share * 100.0),
        fmt::bytes(f.in_flight_bytes),
        fmt::bytes(f.sent_bytes),
        fmt::bytes(f.lost_bytes),
        dash(f.rate_mbit, fmt_mbit),
        peer_cell(f.peer.as_ref()),
    ];
    if measured {
        r.push(dash(f.send_mbit, fmt_mbit));
    }
    r
}

/// Macroflows alone, as one table (`cm query`).
pub fn render_macroflows(mfs: &[MacroflowView]) -> String {
    let mut rows = vec![macroflow_header(false)];
    rows.extend(mfs.iter().map(|m| macroflow_row(m, false)));
    let mut out = String::new();
    table(&mut out, "", &rows);
    out
}

/// Every macroflow followed by its flows, indented; `measured` adds the
/// sending-rate column of `cm top`.
pub fn render(v: &StatView, measured: bool) -> String {
    let mut out = String::new();
    if v.macroflows.is_empty() && v.unattached_flows.is_empty() {
        out.push_str("no macroflows\n");
        return out;
    }
    for (i, m) in v.macroflows.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        table(
            &mut out,
            "",
            &[macroflow_header(measured), macroflow_row(m, measured)],
        );
        let flows = m.flows.as_deref().unwrap_or(&[]);
        if !flows.is_empty() {
            let mut rows = vec![flow_header(measured)];
            rows.extend(flows.iter().map(|f| flow_row(f, measured)));
            table(&mut out, "    ", &rows);
        }
    }
    if !v.unattached_flows.is_empty() {
        out.push_str("\nflows without a visible macroflow:\n");
        let mut rows = vec![flow_header(measured)];
        rows.extend(v.unattached_flows.iter().map(|f| flow_row(f, measured)));
        table(&mut out, "    ", &rows);
    }
    out
}

#[cfg(test)]
mod tests;
