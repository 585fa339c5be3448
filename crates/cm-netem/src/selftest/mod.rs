//! The self-test: measure a built path's one-way delay, rate and loss (and its
//! reordering and duplication, when configured) with real UDP sockets in the sender
//! and receiver namespaces and compare with the configuration. Each phase runs with
//! only the impairment it measures switched on.
//!
//! | module | what |
//! |---|---|
//! | `measure` | the first three phases: UDP ping-pong, a paced flood, a loss sample |
//! | `reorder` | the fourth: sequence-numbered datagrams, late and repeated arrivals |
//! | `traffic` | the sockets: binding in a namespace, paced sending, counting arrivals |
//! | `confidence` | the Wilson interval and the sample size the loss phase needs |

mod confidence;
mod measure;
mod reorder;
mod traffic;

pub use confidence::{loss_samples_needed, wilson_interval};
pub use reorder::{FractionCheck, ReorderCheck};

use std::fmt;
use std::time::{Duration, Instant};

use crate::error::{NetemError, Result};
use serde::{Deserialize, Serialize};

use crate::config::PathConfig;
use crate::delaybox::DelayBoxStats;
use crate::path::Path;

/// IP + UDP header bytes added to every datagram payload.
pub const UDP_IP_OVERHEAD: u64 = 28;

/// Knobs of the self-test.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SelfTestOptions {
    /// Allowed relative error (0.05 = 5 %).
    pub tolerance: f64,
    /// How long the rate phase offers more than the rate.
    pub rate_duration: Duration,
    /// Most time the loss phase may take; decides which loss rule applies.
    pub loss_budget: Duration,
    /// Most time the reordering and duplication phase may take (run only when the
    /// path reorders or duplicates); decides which rule applies, as for loss.
    #[serde(default = "default_budget")]
    pub reorder_budget: Duration,
}

fn default_budget() -> Duration {
    Duration::from_secs(15)
}

impl Default for SelfTestOptions {
    fn default() -> Self {
        SelfTestOptions {
            tolerance: 0.05,
            rate_duration: Duration::from_secs(2),
            loss_budget: default_budget(),
            reorder_budget: default_budget(),
        }
    }
}

/// Delay phase: UDP ping-pong between sender and receiver.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DelayCheck {
    /// Configured one-way delay, ms.
    pub one_way_delay_ms: f64,
    /// Expected RTT: 2 × one-way delay + serialization of the probe at the rate(s), ms.
    pub expected_rtt_ms: f64,
    /// Smallest measured RTT sender ↔ receiver, ms.
    pub min_rtt_ms: f64,
    /// Smallest RTT sender ↔ router (the hosts' own sockets, threads and one veth
    /// hop, no delay box), ms.
    pub host_rtt_ms: f64,
    /// What the path adds: min RTT − host RTT, ms. This is what is checked.
    pub added_rtt_ms: f64,
    /// Median measured RTT, ms.
    pub median_rtt_ms: f64,
    /// Largest measured RTT, ms.
    pub max_rtt_ms: f64,
    /// Probes answered.
    pub probes: usize,
    /// (added RTT − expected) / expected.
    pub rel_error: f64,
    /// (min RTT − expected) / expected, not corrected for the hosts' own RTT.
    pub raw_rel_error: f64,
    /// |added RTT − expected| ≤ tolerance × expected, or ≤ 200 µs when that is larger
    /// (one-way delays under 2 ms: the delay box's own wake-up latency, 20–100 µs per
    /// direction on a 2-core VM, is then more than 5 %).
    pub pass: bool,
}

/// Rate phase: offer more than the rate and count what arrives.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RateCheck {
    /// Configured rate, bit/s.
    pub configured_bps: f64,
    /// Measured IP-level rate at the receiver, bit/s.
    pub measured_bps: f64,
    /// Rate the sender offered, bit/s.
    pub offered_bps: f64,
    /// Datagrams sent.
    pub sent: u64,
    /// Datagrams received.
    pub received: u64,
    /// Seconds of arrivals the rate is computed over.
    pub seconds: f64,
    /// Drops at the bottleneck queue during the phase (expected: the excess).
    pub bottleneck_drops: u64,
    /// (measured − configured) / configured.
    pub rel_error: f64,
    /// |rel_error| ≤ tolerance.
    pub pass: bool,
}

/// Which rule decided the loss check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum LossRule {
    /// Configured loss 0: nothing may be lost.
    Zero,
    /// The sample resolves the tolerance: |measured − p| ≤ tolerance × p.
    WithinTolerance,
    /// Loss too small to resolve the tolerance within the time budget: the 99.9 %
    /// confidence interval must contain p.
    ConfidenceInterval,
}

impl fmt::Display for LossRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            LossRule::Zero => "loss 0: nothing may be lost",
            LossRule::WithinTolerance => "|measured - p| <= tolerance x p",
            LossRule::ConfidenceInterval => {
                "sample too small to resolve the tolerance in the time budget: 99.9% CI must contain p"
            }
        })
    }
}

/// Loss phase: small datagrams below the rate (so the bottleneck never drops).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LossCheck {
    /// Configured loss probability.
    pub configured: f64,
    /// Measured: 1 − received / reached the receiver's ingress.
    pub measured: f64,
    /// Lower end of the 99.9 % (Wilson) confidence interval.
    pub ci_low: f64,
    /// Upper end of the 99.9 % confidence interval.
    pub ci_high: f64,
    /// Datagrams sent.
    pub sent: u64,
    /// Datagrams that reached the receiver's ingress (forwarded by the delay box).
    pub reached: u64,
    /// Datagrams received by the socket (plus any the socket buffer dropped).
    pub received: u64,
    /// Datagrams the receiver's socket buffer dropped (counted as received: they
    /// passed the loss filter).
    pub rcvbuf_errors: u64,
    /// Drops at the bottleneck queue during the phase (should be 0).
    pub bottleneck_drops: u64,
    /// Send rate, datagrams/s.
    pub pps: f64,
    /// (measured − configured) / configured (0 when configured is 0).
    pub rel_error: f64,
    /// Which rule applied.
    pub rule: LossRule,
    /// Whether the rule held.
    pub pass: bool,
}

/// Configured vs measured for delay, rate, loss, and reordering and duplication.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SelfTestReport {
    /// The path's configuration.
    pub config: PathConfig,
    /// Allowed relative error.
    pub tolerance: f64,
    /// Delay phase.
    pub delay: DelayCheck,
    /// Rate phase.
    pub rate: RateCheck,
    /// Loss phase.
    pub loss: LossCheck,
    /// Reordering and duplication phase; `None` when the path does neither.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reorder: Option<ReorderCheck>,
    /// Delay box counters at the end.
    pub delay_box: DelayBoxStats,
    /// Every check passed.
    pub pass: bool,
    /// Wall-clock seconds the self-test took.
    pub seconds: f64,
}

fn verdict(b: bool) -> &'static str {
    if b { "PASS" } else { "FAIL" }
}

impl fmt::Display for SelfTestReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (d, r, l) = (&self.delay, &self.rate, &self.loss);
        writeln!(
            f,
            "cm-netem self-test: {} (tolerance {:.1}%, {:.1} s)",
            verdict(self.pass),
            self.tolerance * 100.0,
            self.seconds
        )?;
        writeln!(
            f,
            "  delay  {}  one-way {:.3} ms: expected RTT {:.3} ms, added {:.3} ms ({:+.2}%) = min RTT {:.3} ms ({:+.2}% raw) - host RTT {:.3} ms; median {:.3} ms, max {:.3} ms, {} probes",
            verdict(d.pass),
            d.one_way_delay_ms,
            d.expected_rtt_ms,
            d.added_rtt_ms,
            d.rel_error * 100.0,
            d.min_rtt_ms,
            d.raw_rel_error * 100.0,
            d.host_rtt_ms,
            d.median_rtt_ms,
            d.max_rtt_ms,
            d.probes
        )?;
        writeln!(
            f,
            "  rate   {}  configured {}, measured {} ({:+.2}%) over {:.2} s; offered {}, {} sent, {} received, {} dropped at the bottleneck",
            verdict(r.pass),
            cm_report::fmt::rate(r.configured_bps),
            cm_report::fmt::rate(r.measured_bps),
            r.rel_error * 100.0,
            r.seconds,
            cm_report::fmt::rate(r.offered_bps),
            r.sent,
            r.received,
            r.bottleneck_drops
        )?;
        writeln!(
            f,
            "  loss   {}  configured {:.4}%, measured {:.4}% ({:+.2}%), 99.9% CI [{:.4}%, {:.4}%]; {} sent, {} reached the receiver, {} received ({} socket-buffer drops), {} bottleneck drops, {:.0} pkt/s",
            verdict(l.pass),
            l.configured * 100.0,
            l.measured * 100.0,
            l.rel_error * 100.0,
            l.ci_low * 100.0,
            l.ci_high * 100.0,
            l.sent,
            l.reached,
            l.received,
            l.rcvbuf_errors,
            l.bottleneck_drops,
            l.pps
        )?;
        writeln!(f, "         rule: {}", l.rule)?;
        if let Some(o) = &self.reorder {
            let line = |f: &mut fmt::Formatter<'_>, what: &str, c: &FractionCheck| {
                writeln!(
                    f,
                    "  {what} {}  configured {:.4}%, expected {:.4}%, measured {:.4}% ({:+.2}%), 99.9% CI [{:.4}%, {:.4}%], {} of {} received; rule: {}",
                    verdict(c.pass),
                    c.configured * 100.0,
                    c.expected * 100.0,
                    c.measured * 100.0,
                    c.rel_error * 100.0,
                    c.ci_low * 100.0,
                    c.ci_high * 100.0,
                    c.count,
                    o.received,
                    fraction_rule(c.rule),
                )
            };
            line(f, "reorder", &o.reordered)?;
            line(f, "dup    ", &o.duplicated)?;
            writeln!(
                f,
                "         reorder delay {:.3} ms; {} sent at {:.0} pkt/s, {} held back and {} copies written by the delay box, {} socket-buffer drops, {} bottleneck drops",
                o.reorder_delay_ms,
                o.sent,
                o.pps,
                o.held_back,
                o.copies_written,
                o.rcvbuf_errors,
                o.bottleneck_drops
            )?;
        }
        let fw = &self.delay_box.forward;
        write!(
            f,
            "  delay box forward: {} pkts, {} dropped, max {} queued, late by {:.1} µs mean / {:.1} µs max",
            fw.packets, fw.dropped, fw.max_queued, fw.mean_late_us, fw.max_late_us
        )
    }
}

/// [`LossRule`] worded for a reordered or duplicated fraction.
fn fraction_rule(r: LossRule) -> &'static str {
    match r {
        LossRule::Zero => "configured 0: none may be counted",
        LossRule::WithinTolerance => "|measured - expected| <= tolerance x expected",
        LossRule::ConfidenceInterval => {
            "sample too small for the tolerance: 99.9% CI must contain expected"
        }
    }
}

/// Why [`Path::self_test`] returned no passing report.
#[derive(Debug, thiserror::Error)]
pub enum SelfTestError {
    /// The measurement itself could not be made.
    #[error(transparent)]
    Measure(#[from] NetemError),
    /// The self-test ran and the path is more than the tolerance off.
    #[error(transparent)]
    Failed(#[from] SelfTestFailed),
}

/// The self-test ran but the path is more than the tolerance off.
#[derive(Debug, Clone, thiserror::Error)]
#[error("emulated path failed its self-test:\n{0}")]
pub struct SelfTestFailed(pub Box<SelfTestReport>);

/// The impairments of a path: loss, reordering, duplication.
#[derive(Clone, Copy)]
struct Impairments {
    loss: f64,
    reorder: (f64, Duration),
    duplicate: f64,
}

impl Impairments {
    const NONE: Impairments = Impairments {
        loss: 0.0,
        reorder: (0.0, Duration::ZERO),
        duplicate: 0.0,
    };

    fn of(path: &Path) -> Impairments {
        Impairments {
            loss: path.loss(),
            reorder: path.reorder(),
            duplicate: path.duplicate(),
        }
    }

    fn apply(self, path: &Path) -> Result<()> {
        path.set_loss(self.loss)?;
        path.set_reorder(self.reorder.0, self.reorder.1)?;
        path.set_duplicate(self.duplicate)
    }
}

/// Restores the impairments in force before the self-test when it ends (or fails).
struct RestoreGuard<'a> {
    path: &'a Path,
    saved: Impairments,
}

impl Drop for RestoreGuard<'_> {
    fn drop(&mut self) {
        if !self.path.is_torn_down() {
            let _ = self.saved.apply(self.path);
        }
    }
}

impl Path {
    /// Measure the path (delay, rate, loss, and reordering and duplication when
    /// configured); `Err` with every number when any is more than 5 % off (see
    /// [`SelfTestReport`]). Takes a few seconds plus up to 15 s for the loss phase
    /// and, for a path that reorders or duplicates, up to 15 s more. Do not send other traffic over the path meanwhile.
    pub fn self_test(&self) -> Result<SelfTestReport, SelfTestError> {
        let report = self.self_test_report(&SelfTestOptions::default())?;
        if report.pass {
            Ok(report)
        } else {
            Err(SelfTestFailed(Box::new(report)).into())
        }
    }

    /// Run the self-test and return the report whether or not it passed; `Err` only
    /// when the measurement itself could not be made.
    pub fn self_test_report(&self, opts: &SelfTestOptions) -> Result<SelfTestReport> {
        let started = Instant::now();
        let cfg = self.config().clone();
        let saved = Impairments::of(self);
        let _guard = RestoreGuard { path: self, saved };
        Impairments::NONE.apply(self)?;
        let phase = |phase: &'static str| {
            move |e: NetemError| NetemError::Phase {
                phase,
                error: Box::new(e),
            }
        };
        let delay = self.measure_delay(opts).map_err(phase("delay"))?;
        let rate = self.measure_rate(opts).map_err(phase("rate"))?;
        let loss_only = Impairments {
            loss: saved.loss,
            ..Impairments::NONE
        };
        loss_only.apply(self)?;
        let loss = self.measure_loss(opts).map_err(phase("loss"))?;
        let reorder = if saved.reorder.0 > 0.0 || saved.duplicate > 0.0 {
            Impairments { loss: 0.0, ..saved }.apply(self)?;
            Some(self.measure_reorder(opts).map_err(phase("reorder"))?)
        } else {
            None
        };
        let delay_box = self.stats()?.delay_box;
        let pass = delay.pass && rate.pass && loss.pass && reorder.as_ref().is_none_or(|r| r.pass);
        Ok(SelfTestReport {
            config: cfg,
            tolerance: opts.tolerance,
            delay,
            rate,
            loss,
            reorder,
            delay_box,
            pass,
            seconds: started.elapsed().as_secs_f64(),
        })
    }
}
