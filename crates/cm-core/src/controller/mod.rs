//! Congestion controllers: one trait for window- and rate-based schemes.
//!
//! A controller owns the macroflow's congestion state and exposes a window
//! and a pacing rate; the manager calls its hooks and never looks inside, so
//! window-based and rate-based schemes sit behind the same [`Controller`]
//! trait. The hooks take the small `#[non_exhaustive]` structs of [`event`].
//!
//! Layout: this module holds the trait, [`ControllerConfig`] (which
//! controller a macroflow runs) and [`AnyController`] (static dispatch);
//! each controller is one module beside it:
//! - [`aimd`]: the papers' window-based AIMD (sigcomm1999 §4.1), which
//!   also runs window-based binomial schemes;
//! - [`binomial`]: the binomial family `(k, l)` with the AIMD, IIAD and SQRT
//!   presets (iscc §II);
//! - [`iscc`]: ISCC(l), binomial with constants from the bottleneck
//!   capacity (iscc §V-D);
//! - [`open_loop`]: the rate-based driver of binomial and ISCC schemes
//!   (iscc §II eq. 2, NACK-based);
//! - [`spec`]: the text form (`"iscc:l=2"`) used by configuration files,
//!   the C API and the command line.
//! - [`tfrc`]: TCP-Friendly Rate Control, rate-based, with the loss event
//!   rate computed at the sender (RFC 5348).
//!
//! A new controller adds its module, a variant to [`ControllerConfig`] and
//! to [`AnyController`], and one line to `dispatch!`.

pub mod aimd;
pub mod binomial;
pub mod event;
pub mod iscc;
pub mod open_loop;
pub mod spec;
pub mod tfrc;

pub use aimd::{Aimd, AimdConfig};
pub use binomial::{BinomialConfig, Mode};
pub use event::{AckEvent, AgingEvent, CongestionEvent, CongestionKind, IdleEvent, SentEvent};
pub use iscc::IsccConfig;
pub use open_loop::{Law, OpenLoop};
pub use tfrc::{Tfrc, TfrcConfig};

use core::fmt;

use crate::time::Duration;
use crate::units::{Bytes, Rate};

/// A congestion controller for one macroflow.
pub trait Controller: fmt::Debug + Send {
    /// Short name for `cm stat` and logs.
    fn name(&self) -> &'static str;
    /// The congestion window: bytes that may be in flight (never below one MTU).
    fn window(&self) -> Bytes;
    /// The sustainable rate reported to applications, `None` with no estimate.
    fn rate(&self, srtt: Option<Duration>) -> Option<Rate>;
    /// The rate at which the shaper releases grants; `None` means unpaced.
    fn pacing_rate(&self, srtt: Option<Duration>) -> Option<Rate>;
    /// Whether the controller is probing exponentially (slow start).
    fn in_slow_start(&self) -> bool;
    /// Whether the controller is rate-based: it sends at its rate between
    /// reports, so a slow sender's feedback comes at most once per few
    /// packets, not once per RTT (the manager's aging waits for that).
    fn rate_based(&self) -> bool {
        false
    }
    /// The maximum transmission unit changed.
    fn set_mtu(&mut self, mtu: Bytes);
    /// Feedback: bytes received.
    fn on_ack(&mut self, ev: &AckEvent);
    /// Feedback: congestion.
    fn on_congestion(&mut self, ev: &CongestionEvent);
    /// Bytes were sent (for controllers that track send times).
    fn on_sent(&mut self, _ev: &SentEvent) {}
    /// One half-life passed without feedback while data was outstanding.
    fn on_feedback_timeout(&mut self, ev: &AgingEvent);
    /// The macroflow restarts after being idle.
    fn on_idle_restart(&mut self, ev: &IdleEvent);
    /// The macroflow's bottleneck capacity estimate changed (`None`: none
    /// yet). Every flow of the macroflow shares it (iscc §VI-B asks for
    /// consistent estimates); controllers that do not use it ignore it.
    fn set_capacity(&mut self, _capacity: Option<Rate>) {}
    /// Continue from a window learned by another CM for the same path (the
    /// host's daemon, before it went away), over `srtt`: the controller
    /// starts from `window` in congestion avoidance instead of slow start;
    /// a rate-based one from `window / srtt`. Controllers that cannot
    /// (TFRC, whose rate comes from its loss history) keep their own
    /// start, which is bounded too.
    fn resume(&mut self, _window: Bytes, _srtt: Option<Duration>) {}
}

/// Which controller a macroflow runs, with its parameters.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum ControllerConfig {
    /// The papers' window-based AIMD with slow start (sigcomm1999 §4.1).
    Aimd(AimdConfig),
    /// A binomial scheme (iscc §II), window- or rate-based.
    Binomial(BinomialConfig),
    /// ISCC(l) on the macroflow's capacity estimate (iscc §V-D).
    Iscc(IsccConfig),
    /// TCP-Friendly Rate Control, rate-based (RFC 5348).
    Tfrc(TfrcConfig),
}

impl Default for ControllerConfig {
    fn default() -> Self {
        ControllerConfig::Aimd(AimdConfig::default())
    }
}

impl ControllerConfig {
    /// Build a controller for a macroflow with the given MTU.
    /// Parameters are not validated here; [`ControllerConfig::validate`]
    /// says whether they are usable (the text form validates as it parses).
    pub fn build(&self, mtu: Bytes) -> AnyController {
        match self {
            ControllerConfig::Aimd(c) => AnyController::Aimd(Aimd::new(c.clone(), mtu)),
            ControllerConfig::Binomial(c) if c.mode == Mode::Window => {
                AnyController::Aimd(Aimd::binomial(AimdConfig::default(), c.clone(), mtu))
            }
            ControllerConfig::Binomial(c) => {
                AnyController::OpenLoop(OpenLoop::new(Law::Binomial(c.clone()), mtu))
            }
            ControllerConfig::Iscc(c) => {
                AnyController::OpenLoop(OpenLoop::new(Law::Iscc(c.clone()), mtu))
            }
            ControllerConfig::Tfrc(c) => AnyController::Tfrc(Tfrc::new(c.clone(), mtu)),
        }
    }

    /// Why the parameters are unusable, if they are.
    pub fn validate(&self) -> Result<(), String> {
        match self {
            ControllerConfig::Aimd(_) => Ok(()),
            ControllerConfig::Binomial(c) => c.validate(),
            ControllerConfig::Iscc(c) => c.validate(),
            ControllerConfig::Tfrc(c) => c.validate(),
        }
    }
}

/// Static dispatch over the controllers the core ships.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum AnyController {
    /// Window-based AIMD, and window-based binomial schemes.
    Aimd(Aimd),
    /// Rate-based binomial and ISCC schemes.
    OpenLoop(OpenLoop),
    /// Rate-based TFRC.
    Tfrc(Tfrc),
}

macro_rules! dispatch {
    ($self:ident, $c:ident => $e:expr) => {
        match $self {
            AnyController::Aimd($c) => $e,
            AnyController::OpenLoop($c) => $e,
            AnyController::Tfrc($c) => $e,
        }
    };
}

impl Controller for AnyController {
    fn name(&self) -> &'static str {
        dispatch!(self, c => c.name())
    }
    fn window(&self) -> Bytes {
        dispatch!(self, c => c.window())
    }
    fn rate(&self, srtt: Option<Duration>) -> Option<Rate> {
        dispatch!(self, c => c.rate(srtt))
    }
    fn pacing_rate(&self, srtt: Option<Duration>) -> Option<Rate> {
        dispatch!(self, c => c.pacing_rate(srtt))
    }
    fn in_slow_start(&self) -> bool {
        dispatch!(self, c => c.in_slow_start())
    }
    fn rate_based(&self) -> bool {
        dispatch!(self, c => c.rate_based())
    }
    fn set_mtu(&mut self, mtu: Bytes) {
        dispatch!(self, c => c.set_mtu(mtu))
    }
    fn on_ack(&mut self, ev: &AckEvent) {
        dispatch!(self, c => c.on_ack(ev))
    }
    fn on_congestion(&mut self, ev: &CongestionEvent) {
        dispatch!(self, c => c.on_congestion(ev))
    }
    fn on_sent(&mut self, ev: &SentEvent) {
        dispatch!(self, c => c.on_sent(ev))
    }
    fn on_feedback_timeout(&mut self, ev: &AgingEvent) {
        dispatch!(self, c => c.on_feedback_timeout(ev))
    }
    fn on_idle_restart(&mut self, ev: &IdleEvent) {
        dispatch!(self, c => c.on_idle_restart(ev))
    }
    fn set_capacity(&mut self, capacity: Option<Rate>) {
        dispatch!(self, c => c.set_capacity(capacity))
    }
    fn resume(&mut self, window: Bytes, srtt: Option<Duration>) {
        dispatch!(self, c => c.resume(window, srtt))
    }
}
