//! One style for the numbers a person reads: decimal (SI) units, a space
//! between the number and its unit, three significant-ish digits.

/// `bytes` as `999 B`, `12.3 kB`, `10.0 MB` or `1.25 GB` (decimal units,
/// like ttcp and iperf).
pub fn bytes(bytes: u64) -> String {
    let b = bytes as f64;
    if b >= 1e9 {
        format!("{:.2} GB", b / 1e9)
    } else if b >= 1e6 {
        format!("{:.1} MB", b / 1e6)
    } else if b >= 1e3 {
        format!("{:.1} kB", b / 1e3)
    } else {
        format!("{bytes} B")
    }
}

/// A rate in bits per second as `9.52 Mbit/s` (or `kbit/s`, `Gbit/s`,
/// `bit/s`); negative or non-finite rates print as `-` (no estimate).
pub fn rate(bits_per_sec: f64) -> String {
    let b = bits_per_sec;
    if !b.is_finite() || b < 0.0 {
        "-".to_string()
    } else if b >= 1e9 {
        format!("{:.2} Gbit/s", b / 1e9)
    } else if b >= 1e6 {
        format!("{:.2} Mbit/s", b / 1e6)
    } else if b >= 1e3 {
        format!("{:.1} kbit/s", b / 1e3)
    } else {
        format!("{b:.0} bit/s")
    }
}

/// A rate in bytes per second, printed in bits per second (see [`rate`]).
pub fn byte_rate(bytes_per_sec: f64) -> String {
    rate(bytes_per_sec * 8.0)
}

/// A rate in bits per second as a bare number of Mbit/s with two decimals
/// (for table columns whose header names the unit).
pub fn mbit(bits_per_sec: f64) -> String {
    format!("{:.2}", bits_per_sec / 1e6)
}

/// Microseconds as `850 us`, `1.50 ms` or `2.00 s`.
pub fn micros(us: u64) -> String {
    if us < 1_000 {
        format!("{us} us")
    } else if us < 1_000_000 {
        format!("{:.2} ms", us as f64 / 1e3)
    } else {
        format!("{:.2} s", us as f64 / 1e6)
    }
}

/// A fraction as a percentage with one decimal: `0.125` → `12.5%`.
pub fn percent(fraction: f64) -> String {
    format!("{:.1}%", fraction * 100.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_units() {
        assert_eq!(bytes(0), "0 B");
        assert_eq!(bytes(999), "999 B");
        assert_eq!(bytes(1_000), "1.0 kB");
        assert_eq!(bytes(2_583_300), "2.6 MB");
        assert_eq!(bytes(1_250_000_000), "1.25 GB");
    }

    #[test]
    fn rate_units() {
        assert_eq!(rate(500.0), "500 bit/s");
        assert_eq!(rate(80_000.0), "80.0 kbit/s");
        assert_eq!(rate(10e6), "10.00 Mbit/s");
        assert_eq!(rate(39.5e9), "39.50 Gbit/s");
        assert_eq!(rate(-1.0), "-");
        assert_eq!(byte_rate(1.25e6), "10.00 Mbit/s");
        assert_eq!(mbit(4.83e6), "4.83");
    }

    #[test]
    fn time_units() {
        assert_eq!(micros(408), "408 us");
        assert_eq!(micros(58_478), "58.48 ms");
        assert_eq!(micros(3_000_000), "3.00 s");
        assert_eq!(percent(0.002), "0.2%");
    }
}
