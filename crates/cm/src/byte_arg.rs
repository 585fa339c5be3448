//! Byte counts on the command line: `10MB`, `1.5GB`, `64KiB`, `123`.

use anyhow::{Result, bail};
use cm_report::parse::Quantity;

/// `10MB` → 10_000_000; `1.5GB`, `500k`, `64KiB`, `123`.
pub fn parse_bytes(s: &str) -> Result<u64> {
    const BYTES: Quantity = Quantity {
        what: "byte count",
        hint: "expected e.g. 10MB, 500kB, 1GiB (units B, kB, MB, GB, KiB, MiB, GiB)",
        units: &[
            (&["", "b"], 1.0),
            (&["k", "kb"], 1e3),
            (&["m", "mb"], 1e6),
            (&["g", "gb"], 1e9),
            (&["kib"], 1024.0),
            (&["mib"], 1024.0 * 1024.0),
            (&["gib"], 1024.0 * 1024.0 * 1024.0),
        ],
    };
    let v = BYTES.parse(s)?.0.round();
    if !(1.0..=1e15).contains(&v) {
        bail!("byte count {s:?} out of range (1 B to 1 PB)");
    }
    Ok(v as u64)
}

#[cfg(test)]
mod tests {
    use super::parse_bytes;

    #[test]
    fn byte_counts() {
        assert_eq!(parse_bytes("10MB").ok(), Some(10_000_000));
        assert_eq!(parse_bytes("1.5GB").ok(), Some(1_500_000_000));
        assert_eq!(parse_bytes("64KiB").ok(), Some(65_536));
        assert_eq!(parse_bytes("123").ok(), Some(123));
        assert!(parse_bytes("0").is_err());
        assert!(parse_bytes("ten").is_err());
        assert!(parse_bytes("5 parsecs").is_err());
    }
}
