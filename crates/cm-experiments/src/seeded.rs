//! Deterministic draws from a scenario's seed, for start jitter and the
//! like: independent streams (one per flow) without threading an RNG.

use cm_sim::splitmix64;

const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;

/// A 64-bit draw for `stream` of `seed` (SplitMix64 of the mixed pair).
pub fn draw(seed: u64, stream: u64) -> u64 {
    let mut state = seed ^ stream.wrapping_mul(GOLDEN);
    splitmix64(&mut state)
}

/// A draw in `0..range` (0 when `range` is 0).
pub fn below(seed: u64, stream: u64, range: u64) -> u64 {
    draw(seed, stream) % range.max(1)
}

/// A draw in `[0, 1)`.
pub fn unit(seed: u64, stream: u64) -> f64 {
    (draw(seed, stream) >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_differ_and_ranges_hold() {
        assert_ne!(draw(1, 0), draw(1, 1));
        assert_eq!(draw(7, 3), draw(7, 3));
        assert!((0..1000).all(|s| below(s, 0, 10) < 10 && (0.0..1.0).contains(&unit(s, 2))));
        assert_eq!(below(5, 0, 0), 0);
    }
}
