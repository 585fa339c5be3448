//! Binomial increase-decrease congestion control (iscc §II, eqs. 1–4;
//! Bansal and Balakrishnan, "Binomial Congestion Control Algorithms").
//!
//! The increase and decrease functions are powers of the current rate:
//! `R_I(x) = λ x^-k` and `R_D(x) = σ x^l` (iscc eq. 3), or in window
//! notation `W_I(w) = α w^-k`, `W_D(w) = β w^l`. The two notations differ
//! only in their constants: with `u = MTU/RTT`, `λ = α u^(k+1)` and
//! `σ = β u^(1-l)` (eq. 4). This module writes the steps unit-free as
//! `α u (x/u)^-k` and `β u (x/u)^l`, which are eq. 3 with eq. 4's constants
//! substituted, so any rate unit works.
//!
//! Presets: AIMD(1, ½) (k = 0, l = 1), IIAD (k = 1, l = 0) and SQRT
//! (k = l = ½), the TCP-friendly members (k + l = 1, iscc §II).
//!
//! Two ways to run a scheme ([`Mode`]):
//! - **window-based**, ACK-clocked like TCP: the papers' AIMD machinery
//!   ([`super::Aimd`]: slow start, byte counting, one reduction per window of
//!   data, aging) with the congestion-avoidance step and the reduction
//!   replaced by `W_I` and `W_D`;
//! - **rate-based**, open loop between loss reports (iscc §II eq. 2, the
//!   NACK-based streaming the paper studies): [`super::OpenLoop`] changes
//!   the rate once per control interval `R`.

use crate::time::Duration;
use crate::units::Rate;

#[cfg(test)]
mod tests;

/// How the scheme is clocked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// ACK-clocked window (the window is the congestion state, as TCP).
    Window,
    /// Open-loop rate, stepped once per control interval from loss reports
    /// (NACK-based, iscc §II eq. 2).
    Rate,
}

/// A binomial scheme `(k, l)` with its constants (iscc eqs. 3–4).
#[derive(Clone, Debug, PartialEq)]
pub struct BinomialConfig {
    /// Increase power `k` (`R_I(x) = λ x^-k`). Convergence needs `k > -1`
    /// (iscc §IV-A).
    pub k: f64,
    /// Decrease power `l` (`R_D(x) = σ x^l`); `l <= 1` keeps the rate
    /// positive without knowing an upper bound (iscc eq. 21).
    pub l: f64,
    /// Window-notation increase constant `α` (MTUs per step at w = 1).
    pub alpha: f64,
    /// Window-notation decrease constant `β`.
    pub beta: f64,
    /// Window- or rate-based.
    pub mode: Mode,
    /// Rate mode: the fixed `MTU/RTT` that converts `(α, β)` to `(λ, σ)`
    /// (iscc eq. 4; the paper fixes it per scheme, e.g. 5,000 bit/s for
    /// AIMD₁ in §V-B). `None`: the MTU over the measured smoothed RTT.
    pub mtu_per_rtt: Option<Rate>,
    /// Rate mode: the control interval `R` (iscc §II: "typically ... equals
    /// the RTT"). `None`: the smoothed RTT.
    pub interval: Option<Duration>,
    /// Rate mode: the lowest rate `x_min` (iscc §IV-A footnote 4: the rate
    /// of the base layer, or one MTU per RTT). `None`: one MTU per control
    /// interval.
    pub min_rate: Option<Rate>,
    /// Rate mode: the rate before any feedback. `None`: two MTUs per
    /// control interval.
    pub initial_rate: Option<Rate>,
    /// Rate mode: double the rate every interval until the first loss (the
    /// paper's application "used slow start at the beginning of each
    /// transfer", iscc §VI-C). Off, the binomial steps apply from the start.
    pub slow_start: bool,
}

impl BinomialConfig {
    /// A scheme `(k, l)` with constants `(α, β)`, rate-based, with slow start.
    pub fn new(k: f64, l: f64, alpha: f64, beta: f64) -> Self {
        BinomialConfig {
            k,
            l,
            alpha,
            beta,
            mode: Mode::Rate,
            mtu_per_rtt: None,
            interval: None,
            min_rate: None,
            initial_rate: None,
            slow_start: true,
        }
    }

    /// AIMD(1, ½): k = 0, l = 1 (iscc §II).
    pub fn aimd() -> Self {
        Self::new(0.0, 1.0, 1.0, 0.5)
    }

    /// IIAD: k = 1, l = 0 (iscc §II), with `(α, β) = (1, ½)` as in §V-B.
    pub fn iiad() -> Self {
        Self::new(1.0, 0.0, 1.0, 0.5)
    }

    /// SQRT: k = l = ½ (iscc §II).
    pub fn sqrt() -> Self {
        Self::new(0.5, 0.5, 1.0, 0.5)
    }

    /// The same scheme, clocked as `mode` says.
    pub fn with_mode(mut self, mode: Mode) -> Self {
        self.mode = mode;
        self
    }

    /// The preset's name, or `"binomial"`.
    pub fn name(&self) -> &'static str {
        let is = |k: f64, l: f64| self.k == k && self.l == l;
        if is(0.0, 1.0) {
            "aimd"
        } else if is(1.0, 0.0) {
            "iiad"
        } else if is(0.5, 0.5) {
            "sqrt"
        } else {
            "binomial"
        }
    }

    /// Why the parameters are unusable, if they are: the constants must be
    /// positive and finite (iscc eq. 3), `k > -1` (§IV-A, convergence), and
    /// `l <= 1` with `β < 1` when `l = 1` (eq. 21: without a known upper
    /// bound on the rate, larger `l` can drive it below zero; ISCC lifts
    /// that with the capacity, see [`super::IsccConfig`]).
    pub fn validate(&self) -> Result<(), String> {
        let finite = [self.k, self.l, self.alpha, self.beta]
            .iter()
            .all(|v| v.is_finite());
        if !finite {
            return Err("k, l, alpha and beta must be finite numbers".into());
        }
        if self.alpha <= 0.0 || self.beta <= 0.0 {
            return Err("alpha and beta must be positive (iscc eq. 3)".into());
        }
        if self.k <= -1.0 {
            return Err(format!("k = {} must exceed -1 (iscc §IV-A)", self.k));
        }
        if self.l > 1.0 {
            return Err(format!(
                "l = {} above 1 needs a known capacity: use iscc (iscc eq. 21, §V-C)",
                self.l
            ));
        }
        if self.l == 1.0 && self.beta >= 1.0 {
            return Err("with l = 1, beta must be below 1 (the rate would reach zero)".into());
        }
        if matches!(self.interval, Some(d) if d.is_zero()) {
            return Err("the control interval must be positive".into());
        }
        Ok(())
    }

    /// The increase step at rate `x` in units where `MTU/RTT = u`:
    /// `α u (x/u)^-k` (iscc eqs. 3–4).
    pub fn increase(&self, x: f64, u: f64) -> f64 {
        if u <= 0.0 || x <= 0.0 {
            return 0.0;
        }
        finite_or_zero(self.alpha * u * (x / u).powf(-self.k))
    }

    /// The decrease step at rate `x` where `MTU/RTT = u`: `β u (x/u)^l`.
    pub fn decrease(&self, x: f64, u: f64) -> f64 {
        if u <= 0.0 || x <= 0.0 {
            return 0.0;
        }
        finite_or_zero(self.beta * u * (x / u).powf(self.l))
    }
}

impl Default for BinomialConfig {
    fn default() -> Self {
        Self::aimd()
    }
}

fn finite_or_zero(v: f64) -> f64 {
    if v.is_finite() && v > 0.0 { v } else { 0.0 }
}
