//! What the application states: TAPS selection properties (RFC 9622 §6.2)
//! with their preference levels, and the paper's behaviour (§4.1).

use core::fmt;

use cm_core::{Duration, Rate};

/// A TAPS preference level (RFC 9622 §6.2, "Preference").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Preference {
    /// Select only protocols that provide the property; fail otherwise.
    Require,
    /// Prefer protocols that provide it; proceed without it otherwise.
    Prefer,
    /// No preference.
    NoPreference,
    /// Prefer protocols that do not provide it.
    Avoid,
    /// Select only protocols that do not provide it; fail otherwise.
    Prohibit,
}

impl Preference {
    /// Whether the property is wanted (Require or Prefer).
    pub fn wanted(self) -> bool {
        matches!(self, Preference::Require | Preference::Prefer)
    }

    /// Whether the property is unwanted (Avoid or Prohibit).
    pub fn unwanted(self) -> bool {
        matches!(self, Preference::Avoid | Preference::Prohibit)
    }

    /// The text form: `require`, `prefer`, `no-preference`, `avoid`,
    /// `prohibit`.
    pub fn name(self) -> &'static str {
        match self {
            Preference::Require => "require",
            Preference::Prefer => "prefer",
            Preference::NoPreference => "no-preference",
            Preference::Avoid => "avoid",
            Preference::Prohibit => "prohibit",
        }
    }
}

impl fmt::Display for Preference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl core::str::FromStr for Preference {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_lowercase().replace('_', "-").as_str() {
            "require" | "required" => Ok(Preference::Require),
            "prefer" | "preferred" => Ok(Preference::Prefer),
            "no-preference" | "nopreference" | "none" | "any" => Ok(Preference::NoPreference),
            "avoid" => Ok(Preference::Avoid),
            "prohibit" | "prohibited" => Ok(Preference::Prohibit),
            _ => Err(format!(
                "{s:?} is not a preference (require, prefer, no-preference, avoid, prohibit)"
            )),
        }
    }
}

/// The rates the application can send at (§4.1, layered media).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RateShape {
    /// Any rate (the application adapts continuously, or is greedy).
    Continuous,
    /// Only these rates (layers), ascending.
    Steps(Vec<Rate>),
    /// Any rate between the bounds (an adaptive codec).
    Bounds {
        /// The lowest usable rate (e.g. the base layer).
        min: Rate,
        /// The highest useful rate.
        max: Rate,
    },
}

/// An on/off traffic pattern (§4.1: "alternating long transmission
/// phases with short breaks").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OnOff {
    /// Mean length of a sending phase.
    pub on: Duration,
    /// Mean length of a pause.
    pub off: Duration,
}

/// How the application sends (§4.1).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Behaviour {
    /// Greedy (uses all it is given) or application-limited.
    pub greedy: bool,
    /// The rates it can use.
    pub shape: RateShape,
    /// Its on/off pattern, if it pauses.
    pub on_off: Option<OnOff>,
}

impl Default for Behaviour {
    /// Greedy, continuous, never pausing (a bulk transfer).
    fn default() -> Self {
        Behaviour {
            greedy: true,
            shape: RateShape::Continuous,
            on_off: None,
        }
    }
}

/// Where loss feedback comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Feedback {
    /// Per-packet acknowledgements (TCP, CC-UDP's acks).
    #[default]
    Ack,
    /// Negative acknowledgements only: rate-based real-time streaming whose
    /// receivers report losses (iscc §I), typically many such flows.
    Nack,
}

/// An application's requirements and behaviour.
///
/// Field names follow RFC 9622 §6.2 where TAPS has the property; the
/// defaults are TAPS's (a reliable, ordered, congestion-controlled stream).
/// `congestion_control` is RFC 9622's `congestionControl` (§6.2.9, default
/// Require), in the positive sense: older TAPS drafts' inverse
/// "disableCongestionControl" = Require corresponds to Prohibit here.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Requirements {
    /// `reliability` (RFC 9622 §6.2.1).
    pub reliability: Preference,
    /// `preserveMsgBoundaries` (§6.2.2).
    pub preserve_msg_boundaries: Preference,
    /// `preserveOrder` (§6.2.4).
    pub preserve_order: Preference,
    /// `congestionControl` (§6.2.9).
    pub congestion_control: Preference,
    /// The one-way delay the application can tolerate (delay sensitivity);
    /// `None`: not delay-sensitive.
    pub target_delay: Option<Duration>,
    /// The rate below which the application is useless (TAPS
    /// `minSendRate`, RFC 9622 §8.1.7).
    pub min_rate: Option<Rate>,
    /// The rate the application wants to send at (for an
    /// application-limited sender, the rate it produces).
    pub target_rate: Option<Rate>,
    /// How it sends (§4.1).
    pub behaviour: Behaviour,
    /// Where loss feedback comes from.
    pub feedback: Feedback,
}

impl Default for Requirements {
    fn default() -> Self {
        Requirements::stream()
    }
}

impl Requirements {
    /// TAPS's defaults: reliable, ordered, no preference on message
    /// boundaries, congestion controlled; a greedy sender.
    pub fn stream() -> Requirements {
        Requirements {
            reliability: Preference::Require,
            preserve_msg_boundaries: Preference::NoPreference,
            preserve_order: Preference::Require,
            congestion_control: Preference::Require,
            target_delay: None,
            min_rate: None,
            target_rate: None,
            behaviour: Behaviour::default(),
            feedback: Feedback::Ack,
        }
    }

    /// Unreliable messages: reliability and ordering avoided, message
    /// boundaries required, congestion controlled; a greedy sender.
    pub fn datagram() -> Requirements {
        Requirements {
            reliability: Preference::Avoid,
            preserve_msg_boundaries: Preference::Require,
            preserve_order: Preference::NoPreference,
            ..Requirements::stream()
        }
    }

    /// Delay-sensitive media at `rate` with a one-way delay target:
    /// [`Requirements::datagram`], application-limited.
    pub fn media(rate: Rate, target_delay: Duration) -> Requirements {
        Requirements {
            target_delay: Some(target_delay),
            target_rate: Some(rate),
            behaviour: Behaviour {
                greedy: false,
                ..Behaviour::default()
            },
            ..Requirements::datagram()
        }
    }

    /// The rate the tuning plans for: the target rate, else the top of the
    /// bounds or steps, else the minimum rate.
    pub fn expected_rate(&self) -> Option<Rate> {
        self.target_rate
            .or(match &self.behaviour.shape {
                RateShape::Bounds { max, .. } => Some(*max),
                RateShape::Steps(s) => s.last().copied(),
                RateShape::Continuous => None,
            })
            .or(self.min_rate)
    }

    /// The lowest rate the application can use: `min_rate`, else the
    /// lowest step or bound.
    pub fn floor_rate(&self) -> Option<Rate> {
        self.min_rate.or(match &self.behaviour.shape {
            RateShape::Bounds { min, .. } => Some(*min),
            RateShape::Steps(s) => s.first().copied(),
            RateShape::Continuous => None,
        })
    }
}
