//! Numbers with units as people type them on a command line (`10mbit`,
//! `30ms`, `64KiB`): the inverse of [`crate::fmt`]. Each tool names its
//! quantities and their units with a [`Quantity`]; the parsing rule and the
//! error are the same everywhere.

use std::fmt;

/// A quantity: what it is, an example of its syntax, and its units.
#[derive(Debug, Clone, Copy)]
pub struct Quantity {
    /// What it is (`"rate"`, `"byte count"`), for the error.
    pub what: &'static str,
    /// What is expected (`"expected e.g. 10mbit"`), for the error.
    pub hint: &'static str,
    /// The units as (lower-case spellings, factor); `""` is a bare number.
    pub units: &'static [(&'static [&'static str], f64)],
}

/// A string that is not the quantity it should be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    /// What was being parsed.
    pub what: &'static str,
    /// The input text.
    pub input: String,
    /// What is expected.
    pub hint: &'static str,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "cannot parse {} {:?}: {}",
            self.what, self.input, self.hint
        )
    }
}

impl std::error::Error for ParseError {}

impl Quantity {
    /// The error for `input`.
    pub fn error(&self, input: &str) -> ParseError {
        ParseError {
            what: self.what,
            input: input.to_string(),
            hint: self.hint,
        }
    }

    /// `input` (a non-negative number, then a unit, case-insensitive) as
    /// the number times its unit's factor, and the index of the unit in
    /// [`Quantity::units`]. A bare `0` needs no unit (index 0).
    pub fn parse(&self, input: &str) -> Result<(f64, usize), ParseError> {
        let s = input.trim();
        let idx = s
            .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == 'e' || c == 'E' || c == '+'))
            .unwrap_or(s.len());
        let num: f64 = s[..idx].parse().map_err(|_| self.error(input))?;
        if !num.is_finite() || num < 0.0 {
            return Err(self.error(input));
        }
        let unit = s[idx..].trim().to_ascii_lowercase();
        if unit.is_empty() && num == 0.0 {
            return Ok((0.0, 0));
        }
        self.units
            .iter()
            .position(|(names, _)| names.contains(&unit.as_str()))
            .map(|i| (num * self.units[i].1, i))
            .ok_or_else(|| self.error(input))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SIZE: Quantity = Quantity {
        what: "size",
        hint: "expected e.g. 10k",
        units: &[(&["", "b"], 1.0), (&["k", "kb"], 1e3), (&["kib"], 1024.0)],
    };

    #[test]
    fn numbers_and_units() {
        assert_eq!(SIZE.parse("10k"), Ok((10_000.0, 1)));
        assert_eq!(SIZE.parse(" 2 KiB "), Ok((2048.0, 2)));
        assert_eq!(SIZE.parse("1.5KB"), Ok((1500.0, 1)));
        assert_eq!(SIZE.parse("0"), Ok((0.0, 0)));
        assert_eq!(SIZE.parse("7"), Ok((7.0, 0)));
        assert!(SIZE.parse("-1k").is_err());
        assert!(SIZE.parse("lots").is_err());
        assert_eq!(
            SIZE.parse("3 furlongs").unwrap_err().to_string(),
            "cannot parse size \"3 furlongs\": expected e.g. 10k"
        );
    }
}
