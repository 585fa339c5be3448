//! A [`Scenario`] as an ns-2 Tcl script: the same dumbbell, queue, packet
//! sizes, start times and flows, for the transports ns-2 has (NewReno with
//! or without SACK, web-like NewReno transfers, CBR over UDP). The CM's
//! transports (`tcpcm`, `audio`) have no ns-2 counterpart: the authors' ns
//! module was never released, so such a scenario is refused.
//!
//! What the script prints when the run ends, one line per flow and one for
//! the bottleneck, is parsed by [`super::parse`]:
//!
//! ```text
//! flow <index> bytes <delivered> completion <s or -1> sent <packets> rtx <packets> timeouts <n> transfers <n> drops <n>
//! bottleneck drops <n> departures <n>
//! ```
//!
//! Mapping of the model (each line is a choice the referee depends on):
//! - links: access links are duplex `rate`/`delay` links with a queue no
//!   packet ever fills (ours: unlimited); the bottleneck is a pair of
//!   simplex links of `delay_ms - 2 x access` each way, DropTail in both
//!   directions with the forward queue's limit, as in `simulate::run`;
//! - byte queues: ours admits a packet when the waiting bytes plus it are at
//!   most the limit `b`, the packet on the wire not counted; ns-2's
//!   `DropTail` in byte mode admits it when they are below
//!   `limit_ x mean_pktsize_`, so the script sets `mean_pktsize_ 1` and
//!   `limit_ b + 1`. Packet queues: `limit_ n + 1` for the same reason;
//! - TCP: `packetSize_` = MSS (ns-2 adds the 40-byte TCP/IP header, as
//!   ours counts it), `windowInit_` = the flow's initial window, `window_`
//!   = the receive window in segments, a modelled SYN (`syn_`), RTO from
//!   RFC 6298 with 200 ms minimum, 60 s maximum and 1 s initial value, a
//!   1 ms timer tick (ns-2's default is 10 ms; ours has microseconds), no
//!   limited transmit (`singledup_ 0`: ours has none), no timestamps;
//!   NewReno with RFC 6582's partial-ACK rules (`newreno_changes1_`, the
//!   Impatient variant) as `Agent/TCP/Newreno`, SACK as `Agent/TCP/Sack1`;
//!   receivers `TCPSink` (or `Sack1`, `DelAck` with the flow's timeout);
//! - finite transfers end on ns-2's `done` callback (every byte ACKed), and
//!   ns-2 sends whole packets, so a transfer of `B` bytes sends
//!   `ceil(B / MSS)` full segments where ours sends a short last one;
//! - web-like sources: each transfer is a new NewReno connection (as in
//!   `hosts::web`), Pareto sizes (the same mean, shape 1.2, 1 MB cap) and
//!   exponential think times from ns-2's own generator seeded with the
//!   scenario's seed, so the two simulators see different draws from the
//!   same distributions and agree only on means over seeds;
//! - CBR: `Application/Traffic/CBR` over UDP with the datagram's wire size
//!   (payload + 28) and the rate scaled so packets leave at our interval;
//!   the UDP agent's `packetSize_` is set to the same size, since ns-2's
//!   UDP agent splits a larger message into several packets.

use std::fmt::Write as _;

use cm_sim::QueueLimit;

use super::Ns2Error;
use crate::scenario::{FlowSpec, Scenario, Transport};

/// ns-2's DropTail limit for an access link: no packet is ever dropped there
/// (ours are unlimited).
const ACCESS_QUEUE: u32 = 1_000_000;

/// UDP/IP header bytes on a CBR datagram (`cm_transport::cbr::UDP_IP_HEADER`).
const UDP_IP: u32 = 28;

/// What the script may stand in for the CM.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Options {
    /// Run a `tcpcm` flow whose macroflow controller is TFRC as ns-2's
    /// `Agent/TFRC` (RFC 5348's sender, unreliable, 1,460-byte payloads):
    /// the rate law is the same, the transport is not (no retransmission,
    /// no ACK clock), so it checks TFRC, not TCP/CM.
    pub tfrc_for_cm: bool,
}

/// Whether flow `f` of `s` runs TFRC as its macroflow's controller.
fn runs_tfrc(s: &Scenario, f: &FlowSpec) -> bool {
    let spec = f.controller.as_ref().or(s.cm_controller.as_ref());
    matches!(
        spec.map(|c| c.parse::<cm_core::controller::ControllerConfig>()),
        Some(Ok(cm_core::controller::ControllerConfig::Tfrc(_)))
    )
}

/// The script for `s` (validated first). Refuses what ns-2 cannot run
/// here: CM transports, random loss, reordering and duplication.
pub fn script(s: &Scenario) -> Result<String, Ns2Error> {
    script_with(s, Options::default())
}

/// [`script`] with `opt`'s stand-ins for CM flows.
pub fn script_with(s: &Scenario, opt: Options) -> Result<String, Ns2Error> {
    s.validate()?;
    if s.topology.is_some() {
        return Err(Ns2Error::Unsupported(format!(
            "scenario {:?} gives a [topology]: the ns-2 script generator writes dumbbells only",
            s.name
        )));
    }
    let b = &s.bottleneck;
    if b.loss > 0.0 || b.reorder > 0.0 || b.duplicate > 0.0 {
        return Err(Ns2Error::Unsupported(format!(
            "scenario {:?}: random loss, reordering and duplication on the bottleneck are not mapped to ns-2",
            s.name
        )));
    }
    for f in &s.flows {
        let t = f.transport()?;
        let tfrc = t == Transport::Tcpcm && opt.tfrc_for_cm && runs_tfrc(s, f);
        if t == Transport::Proxy || (t == Transport::Cbr && f.ramp_bps.is_some()) {
            return Err(Ns2Error::Unsupported(format!(
                "flow {:?}: proxies and ramping CBR are not mapped to ns-2",
                f.name
            )));
        }
        if matches!(t, Transport::Tcpcm | Transport::Audio) && !tfrc {
            return Err(Ns2Error::Unsupported(format!(
                "flow {:?} is {}: the CM has no ns-2 counterpart (the authors' ns module was never released); the referee runs the baseline half",
                f.name, f.transport
            )));
        }
    }
    let (left, right) = s.hosts();
    let mut o = String::new();
    header(&mut o, s, left.len(), right.len());
    for (k, f) in s.flows.iter().enumerate() {
        let hi = left.iter().position(|h| *h == f.host_name()).unwrap_or(0);
        let ri = right.iter().position(|h| *h == f.dst_name()).unwrap_or(0);
        let start = s.start_s(k);
        let stop = f.stop.unwrap_or(s.duration);
        let at = Slot {
            fid: k + 1,
            hi,
            ri,
            start,
            stop,
        };
        match f.transport()? {
            Transport::Newreno => tcp_flow(&mut o, s, f, at),
            Transport::Web => web_flow(&mut o, s, f, at),
            Transport::Cbr => cbr_flow(&mut o, f, at),
            Transport::Tcpcm => tfrc_flow(&mut o, s, f, at),
            Transport::Audio | Transport::Proxy => {}
        }
    }
    footer(&mut o, s);
    Ok(o)
}

/// Nodes, links, queues, TCP defaults and the report procedure's helpers.
fn header(o: &mut String, s: &Scenario, left: usize, right: usize) {
    let b = &s.bottleneck;
    let acc = &s.access;
    let core_ms = b.delay_ms - 2.0 * acc.delay_ms;
    let (qlim, bytes) = match s.queue_limit() {
        QueueLimit::Packets(p) => (u64::from(p) + 1, false),
        QueueLimit::Bytes(q) => (q.saturating_add(1), true),
        QueueLimit::Unlimited => (u64::from(u32::MAX), false),
    };
    let rev = b.reverse_rate_bps.unwrap_or(b.rate_bps);
    let wnd = s
        .rcv_wnd
        .unwrap_or(cm_transport::TcpReceiverConfig::default().rcv_wnd)
        / s.mss.max(1);
    let _ = writeln!(
        o,
        "# ns-2 counterpart of scenario {:?}, seed {}: generated by cm-experiments (ns2::tcl), do not edit.",
        s.name, s.seed
    );
    let _ = write!(
        o,
        r#"set ns [new Simulator]
global defaultRNG
$defaultRNG seed {seed}
Agent/TCP set packetSize_ {mss}
Agent/TCP set window_ {wnd}
Agent/TCP set syn_ true
Agent/TCP set timestamps_ false
Agent/TCP set singledup_ 0
Agent/TCP set minrto_ 0.2
Agent/TCP set maxrto_ 60
Agent/TCP set rtxcur_init_ 1.0
Agent/TCP set tcpTick_ 0.001
Agent/TCP set maxburst_ 0
Agent/TCP/Newreno set newreno_changes1_ 1
Agent/TCP/Newreno set partial_window_deflation_ 1
set rl [$ns node]
set rr [$ns node]
for {{set i 0}} {{$i < {left}}} {{incr i}} {{
  set L($i) [$ns node]
  $ns duplex-link $L($i) $rl {acc_rate} {acc_ms}ms DropTail
  $ns queue-limit $L($i) $rl {access_q}
  $ns queue-limit $rl $L($i) {access_q}
}}
for {{set i 0}} {{$i < {right}}} {{incr i}} {{
  set R($i) [$ns node]
  $ns duplex-link $rr $R($i) {acc_rate} {acc_ms}ms DropTail
  $ns queue-limit $rr $R($i) {access_q}
  $ns queue-limit $R($i) $rr {access_q}
}}
$ns simplex-link $rl $rr {rate} {core_ms}ms DropTail
$ns simplex-link $rr $rl {rev} {core_ms}ms DropTail
foreach {{a z}} [list $rl $rr $rr $rl] {{
  set q [[$ns link $a $z] queue]
  $q set queue_in_bytes_ {qib}
  $q set mean_pktsize_ {mps}
  $q set limit_ {qlim}
}}
set fmon [$ns makeflowmon Fid]
$ns attach-fmon [$ns link $rl $rr] $fmon
set fcl [$fmon classifier]
proc fid_drops {{fid}} {{
  global fcl
  set f [$fcl lookup auto 0 0 $fid]
  if {{$f == ""}} {{ return 0 }}
  return [$f set pdrops_]
}}
proc tcp_bytes {{tcp size}} {{
  set acked [expr {{[$tcp set ack_] * {mss}}}]
  if {{$size > 0 && $acked > $size}} {{ return $size }}
  if {{$acked < 0}} {{ return 0 }}
  return $acked
}}
"#,
        seed = s.seed.max(1),
        mss = s.mss,
        acc_rate = acc.rate_bps,
        acc_ms = acc.delay_ms,
        access_q = ACCESS_QUEUE,
        rate = b.rate_bps,
        qib = if bytes { "true" } else { "false" },
        mps = if bytes { 1 } else { 1500 },
    );
}

/// Where a flow sits: its ns-2 flow id (1 + its index), its sender and
/// receiver host indices, and when it starts and stops (s).
#[derive(Clone, Copy, Debug)]
struct Slot {
    fid: usize,
    hi: usize,
    ri: usize,
    start: f64,
    stop: f64,
}

/// The agent and sink classes of a TCP flow.
fn tcp_classes(f: &FlowSpec) -> (&'static str, &'static str) {
    let agent = if f.sack {
        "Agent/TCP/Sack1"
    } else {
        "Agent/TCP/Newreno"
    };
    let sink = match (f.sack, f.delayed_ack) {
        (false, false) => "Agent/TCPSink",
        (true, false) => "Agent/TCPSink/Sack1",
        (false, true) => "Agent/TCPSink/DelAck",
        (true, true) => "Agent/TCPSink/Sack1/DelAck",
    };
    (agent, sink)
}

/// Creates `$tcp($fid)`-style agents: one connection from `L(hi)` to `R(ri)`.
fn tcp_pair(o: &mut String, f: &FlowSpec, var: &str, fid: usize, hi: usize, ri: usize) {
    let (agent, sink) = tcp_classes(f);
    let _ = writeln!(o, "set {var} [new {agent}]");
    let _ = writeln!(o, "${var} set fid_ {fid}");
    let _ = writeln!(
        o,
        "${var} set windowInit_ {}",
        f.initial_window.unwrap_or(2)
    );
    let _ = writeln!(o, "set {var}_sink [new {sink}]");
    if f.delayed_ack {
        let ms = f.delayed_ack_ms.unwrap_or(200);
        let _ = writeln!(o, "${var}_sink set interval_ {}", ms as f64 / 1e3);
    }
    let _ = writeln!(o, "$ns attach-agent $L({hi}) ${var}");
    let _ = writeln!(o, "$ns attach-agent $R({ri}) ${var}_sink");
    let _ = writeln!(o, "$ns connect ${var} ${var}_sink");
}

/// A bulk or finite NewReno flow.
fn tcp_flow(o: &mut String, s: &Scenario, f: &FlowSpec, at: Slot) {
    let Slot {
        fid, hi, ri, start, ..
    } = at;
    let var = format!("tcp{fid}");
    let _ = writeln!(
        o,
        "# flow {fid}: {:?} (newreno{})",
        f.name,
        if f.sack { ", sack" } else { "" }
    );
    tcp_pair(o, f, &var, fid, hi, ri);
    let _ = writeln!(
        o,
        "set ftp{fid} [new Application/FTP]\n$ftp{fid} attach-agent ${var}"
    );
    let _ = writeln!(o, "set done{fid} -1");
    match f.bytes {
        Some(bytes) => {
            let pkts = bytes.div_ceil(u64::from(s.mss).max(1));
            let _ = writeln!(o, "set size{fid} {bytes}");
            let _ = writeln!(
                o,
                "${var} proc done {{}} {{ global ns done{fid}; set done{fid} [expr {{[$ns now] - {start}}}] }}"
            );
            let _ = writeln!(o, "$ns at {start} \"${var} advanceby {pkts}\"");
        }
        None => {
            let _ = writeln!(o, "set size{fid} 0");
            let _ = writeln!(o, "$ns at {start} \"$ftp{fid} start\"");
        }
    }
    let _ = writeln!(
        o,
        "proc report{fid} {{}} {{ global {var} size{fid} done{fid}; puts \"flow {fid} bytes [tcp_bytes ${var} $size{fid}] completion $done{fid} sent [${var} set ndatapack_] rtx [${var} set nrexmitpack_] timeouts [${var} set nrexmit_] transfers 0 drops [fid_drops {fid}]\" }}"
    );
}

/// A web-like source: transfers of Pareto size separated by exponential
/// think times, each a new NewReno connection; the first one starts one
/// think time after `start`, none starts at or after `stop`.
fn web_flow(o: &mut String, s: &Scenario, f: &FlowSpec, at: Slot) {
    let Slot {
        fid,
        hi,
        ri,
        start,
        stop,
    } = at;
    let mean = f.mean_bytes.unwrap_or(12_000.0);
    let think = f.think_s.unwrap_or(0.5);
    let _ = writeln!(o, "# flow {fid}: {:?} (web-like NewReno transfers)", f.name);
    let _ = writeln!(
        o,
        "set size{fid} [new RandomVariable/Pareto]\n$size{fid} set avg_ {mean}\n$size{fid} set shape_ 1.2"
    );
    let _ = writeln!(
        o,
        "set think{fid} [new RandomVariable/Exponential]\n$think{fid} set avg_ {think}"
    );
    let _ = writeln!(o, "set web{fid} {{}}");
    let mut pair = String::new();
    tcp_pair(&mut pair, f, "tcp", fid, hi, ri);
    let pair = pair.replace("$L(", "$::L(").replace("$R(", "$::R(");
    let _ = write!(
        o,
        r#"proc web_think{fid} {{}} {{
  global ns think{fid}
  set t [expr {{[$ns now] + [$think{fid} value]}}]
  if {{$t < {stop}}} {{ $ns at $t "web_go{fid}" }}
}}
proc web_go{fid} {{}} {{
  global ns size{fid} web{fid}
  set bytes [expr {{int([$size{fid} value])}}]
  if {{$bytes < 1}} {{ set bytes 1 }}
  if {{$bytes > 1000000}} {{ set bytes 1000000 }}
{pair}  lappend web{fid} [list $tcp $bytes]
  $tcp proc done {{}} {{ web_think{fid} }}
  $tcp advanceby [expr {{($bytes + {mss} - 1) / {mss}}}]
}}
$ns at {start} "web_think{fid}"
proc report{fid} {{}} {{
  global web{fid}
  set bytes 0; set sent 0; set rtx 0; set to 0
  foreach w $web{fid} {{
    set tcp [lindex $w 0]
    incr bytes [tcp_bytes $tcp [lindex $w 1]]
    incr sent [$tcp set ndatapack_]
    incr rtx [$tcp set nrexmitpack_]
    incr to [$tcp set nrexmit_]
  }}
  puts "flow {fid} bytes $bytes completion -1 sent $sent rtx $rtx timeouts $to transfers [llength $web{fid}] drops [fid_drops {fid}]"
}}
"#,
        mss = s.mss,
    );
}

/// ns-2's TFRC sender standing in for a TCP/CM flow on TFRC
/// ([`Options::tfrc_for_cm`]): bulk, full-sized packets; goodput from the
/// packets that left the bottleneck (none is lost after it).
fn tfrc_flow(o: &mut String, s: &Scenario, f: &FlowSpec, at: Slot) {
    let Slot {
        fid, hi, ri, start, ..
    } = at;
    let _ = writeln!(
        o,
        "# flow {fid}: {:?} (TCP/CM on TFRC, as Agent/TFRC)",
        f.name
    );
    let _ = write!(
        o,
        r#"set tfrc{fid} [new Agent/TFRC]
$tfrc{fid} set fid_ {fid}
$tfrc{fid} set packetSize_ {wire}
set tfrc{fid}_sink [new Agent/TFRCSink]
$ns attach-agent $L({hi}) $tfrc{fid}
$ns attach-agent $R({ri}) $tfrc{fid}_sink
$ns connect $tfrc{fid} $tfrc{fid}_sink
$ns at {start} "$tfrc{fid} start"
proc report{fid} {{}} {{
  global fcl tfrc{fid}
  set f [$fcl lookup auto 0 0 {fid}]
  set n 0
  if {{$f != ""}} {{ set n [$f set pdepartures_] }}
  puts "flow {fid} bytes [expr {{$n * {mss}}}] completion -1 sent [expr {{$n + [fid_drops {fid}]}}] rtx 0 timeouts 0 transfers 0 drops [fid_drops {fid}]"
}}
"#,
        wire = s.mss + 40,
        mss = s.mss,
    );
}

/// A CBR source over UDP.
fn cbr_flow(o: &mut String, f: &FlowSpec, at: Slot) {
    let Slot {
        fid,
        hi,
        ri,
        start,
        stop,
    } = at;
    let len = f.packet_bytes.unwrap_or(1000);
    let rate = f.rate_bps.unwrap_or(1) as f64;
    let wire = len + UDP_IP;
    let _ = writeln!(o, "# flow {fid}: {:?} (cbr)", f.name);
    let _ = write!(
        o,
        r#"set udp{fid} [new Agent/UDP]
$udp{fid} set fid_ {fid}
$udp{fid} set packetSize_ {wire}
set mon{fid} [new Agent/LossMonitor]
$ns attach-agent $L({hi}) $udp{fid}
$ns attach-agent $R({ri}) $mon{fid}
$ns connect $udp{fid} $mon{fid}
set cbr{fid} [new Application/Traffic/CBR]
$cbr{fid} attach-agent $udp{fid}
$cbr{fid} set packetSize_ {wire}
$cbr{fid} set rate_ {wire_rate}
$cbr{fid} set random_ 0
$ns at {start} "$cbr{fid} start"
$ns at {stop} "$cbr{fid} stop"
proc report{fid} {{}} {{
  global mon{fid}
  set n [$mon{fid} set npkts_]
  puts "flow {fid} bytes [expr {{$n * {len}}}] completion -1 sent [expr {{$n + [fid_drops {fid}]}}] rtx 0 timeouts 0 transfers 0 drops [fid_drops {fid}]"
}}
"#,
        wire_rate = rate * f64::from(wire) / f64::from(len),
    );
}

/// The end of the run: every flow's report line, the bottleneck's, exit.
fn footer(o: &mut String, s: &Scenario) {
    let _ = writeln!(o, "proc finish {{}} {{\n  global fmon");
    for k in 1..=s.flows.len() {
        let _ = writeln!(o, "  report{k}");
    }
    let _ = writeln!(
        o,
        "  puts \"bottleneck drops [$fmon set pdrops_] departures [$fmon set pdepartures_]\"\n  exit 0\n}}"
    );
    let _ = writeln!(o, "$ns at {} \"finish\"\n$ns run", s.duration);
}
