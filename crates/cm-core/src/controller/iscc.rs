//! Ideally-Scalable Congestion Control, ISCC(l) (iscc §V-C, §V-D, eqs.
//! 33–37): a binomial scheme whose constants come from the bottleneck
//! capacity `C`, so that packet loss stays the same however many flows
//! share the link.
//!
//! Ideal scalability needs `l + 2k + 1 = 0` (eq. 33), so `k = -(l+1)/2`,
//! and `l > 1`, which only a known upper bound on the rate keeps safe. With
//! the rate capped at `C`:
//! - `σ = 1 / (m_D C^(l-1))` (eq. 34): the decrease `σ x^l` is at most
//!   `x / m_D`, so the rate stays positive;
//! - `λ = C^(k+1) / m_I` (eq. 36): the increase `λ x^-k` is at most
//!   `x / m_I` (eq. 35).
//!
//! Written unit-free: decrease `= (x/m_D)(x/C)^(l-1)`, increase
//! `= (x/m_I)(x/C)^(-(k+1))`.
//!
//! The paper's ISCC(2) uses `m_D = 2`, `m_I = 20` (§VI-C). Before any
//! capacity estimate exists the scheme cannot compute its constants; it
//! then runs the fallback AIMD(1, ½) in rate mode with `MTU/RTT` from the
//! measured RTT ([`IsccConfig::fallback`]), which is TCP-friendly and needs
//! no capacity, and switches to ISCC's steps at the first estimate.

use crate::controller::binomial::BinomialConfig;
use crate::time::Duration;
use crate::units::Rate;

/// Parameters of ISCC(l).
#[derive(Clone, Debug, PartialEq)]
pub struct IsccConfig {
    /// Decrease power `l > 1`; `k = -(l+1)/2` follows (eq. 33). Default 2.
    pub l: f64,
    /// Efficiency constant `m_D >= l` (eq. 34): the decrease is at most
    /// `x / m_D`. Default 2.
    pub m_d: f64,
    /// Aggressiveness constant `m_I >= 1` (eq. 36): the increase is at most
    /// `x / m_I`. Default 20.
    pub m_i: f64,
    /// The control interval `R`; `None`: the smoothed RTT.
    pub interval: Option<Duration>,
    /// The lowest rate; `None`: one MTU per control interval.
    pub min_rate: Option<Rate>,
    /// The rate before any feedback; `None`: two MTUs per control interval.
    pub initial_rate: Option<Rate>,
    /// Double the rate every interval until the first loss (iscc §VI-C).
    pub slow_start: bool,
    /// The capacity to use until an estimate arrives (e.g. configured for
    /// a known link). `None`: run [`IsccConfig::fallback`] until then.
    pub capacity: Option<Rate>,
    /// The scheme run while no capacity is known: AIMD(1, ½), rate-based,
    /// `MTU/RTT` from the measured RTT.
    pub fallback: BinomialConfig,
}

impl Default for IsccConfig {
    fn default() -> Self {
        IsccConfig {
            l: 2.0,
            m_d: 2.0,
            m_i: 20.0,
            interval: None,
            min_rate: None,
            initial_rate: None,
            slow_start: true,
            capacity: None,
            fallback: BinomialConfig::aimd(),
        }
    }
}

impl IsccConfig {
    /// ISCC(l) with the paper's `m_D = 2`, `m_I = 20`.
    pub fn with_l(l: f64) -> Self {
        IsccConfig {
            l,
            m_d: l.max(2.0),
            ..Self::default()
        }
    }

    /// The increase power `k = -(l+1)/2` (eq. 33).
    pub fn k(&self) -> f64 {
        -(self.l + 1.0) / 2.0
    }

    /// Why the parameters are unusable, if they are (eqs. 33–36).
    pub fn validate(&self) -> Result<(), String> {
        if !(self.l.is_finite() && self.m_d.is_finite() && self.m_i.is_finite()) {
            return Err("l, m_d and m_i must be finite numbers".into());
        }
        if self.l <= 1.0 {
            return Err(format!("ISCC needs l > 1 (iscc eq. 33), got {}", self.l));
        }
        if self.m_d < self.l {
            return Err(format!(
                "m_d = {} must be at least l = {} (iscc eq. 34)",
                self.m_d, self.l
            ));
        }
        if self.m_i < 1.0 {
            return Err(format!(
                "m_i = {} must be at least 1 (iscc eq. 36)",
                self.m_i
            ));
        }
        if matches!(self.interval, Some(d) if d.is_zero()) {
            return Err("the control interval must be positive".into());
        }
        self.fallback.validate()
    }

    /// The increase step at rate `x` (capped at `c`) on capacity `c`:
    /// `λ x^-k` with `λ = C^(k+1)/m_I` (eq. 36), at most `x / m_I`.
    pub fn increase(&self, x: f64, c: f64) -> f64 {
        if c <= 0.0 || x <= 0.0 {
            return 0.0;
        }
        let x = x.min(c);
        let v = x / self.m_i * (x / c).powf(-(self.k() + 1.0));
        if v.is_finite() { v.max(0.0) } else { 0.0 }
    }

    /// The decrease step at rate `x` (capped at `c`): `σ x^l` with
    /// `σ = 1/(m_D C^(l-1))` (eq. 34), at most `x / m_D`.
    pub fn decrease(&self, x: f64, c: f64) -> f64 {
        if c <= 0.0 || x <= 0.0 {
            return 0.0;
        }
        let x = x.min(c);
        let v = x / self.m_d * (x / c).powf(self.l - 1.0);
        if v.is_finite() { v.max(0.0) } else { 0.0 }
    }

    /// Eq. 37: ISCC's worst-case single-flow loss, independent of the link:
    /// `(k+2) / (m_I² (1 - (1 - 1/m_D)^(k+2)) + k + 2)`.
    pub fn predicted_loss(&self) -> f64 {
        let k2 = self.k() + 2.0;
        k2 / (self.m_i * self.m_i * (1.0 - (1.0 - 1.0 / self.m_d).powf(k2)) + k2)
    }
}
