//! The simulation's seeded random number generator.
//!
//! xoshiro256** (Blackman & Vigna, "Scrambled linear pseudorandom number
//! generators", 2018) seeded by expanding a `u64` through SplitMix64 (Steele,
//! Lea & Flood, OOPSLA 2014), as the reference implementation recommends.

/// One step of SplitMix64: advances `state` and returns the next output.
pub fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A deterministic xoshiro256** generator.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SimRng {
    s: [u64; 4],
}

impl SimRng {
    /// A generator whose state is four SplitMix64 outputs from `seed`.
    pub fn seed_from_u64(seed: u64) -> Self {
        let mut sm = seed;
        let s = [
            splitmix64(&mut sm),
            splitmix64(&mut sm),
            splitmix64(&mut sm),
            splitmix64(&mut sm),
        ];
        Self::from_state(s)
    }

    /// A generator with the given raw state (an all-zero state is replaced
    /// by the seed-0 state, since xoshiro must not be all zero).
    pub fn from_state(s: [u64; 4]) -> Self {
        if s == [0; 4] {
            return Self::seed_from_u64(0);
        }
        SimRng { s }
    }

    /// The next 64 uniformly distributed bits.
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        let s = &mut self.s;
        let result = s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        result
    }

    /// A uniform float in `[0, 1)` with 53 bits of precision.
    #[inline]
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// `true` with probability `p` (clamped to `[0, 1]`).
    #[inline]
    pub fn bernoulli(&mut self, p: f64) -> bool {
        self.next_f64() < p
    }

    /// A uniform integer in `[0, n)`; `0` when `n` is zero (Lemire's
    /// multiply-and-reject method, unbiased).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            return 0;
        }
        let threshold = n.wrapping_neg() % n;
        loop {
            let m = u128::from(self.next_u64()) * u128::from(n);
            if (m as u64) >= threshold {
                return (m >> 64) as u64;
            }
        }
    }

    /// An exponentially distributed value with the given mean (inverse CDF).
    pub fn exponential(&mut self, mean: f64) -> f64 {
        // 1 - u is in (0, 1], so ln never sees zero.
        -mean * (1.0 - self.next_f64()).ln()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix64_matches_published_outputs() {
        let mut s = 1_234_567;
        let want = [
            6457827717110365317u64,
            3203168211198807973,
            9817491932198370423,
            4593380528125082431,
            16408922859458223821,
        ];
        for w in want {
            assert_eq!(splitmix64(&mut s), w);
        }
        let mut z = 0;
        assert_eq!(splitmix64(&mut z), 0xe220_a839_7b1d_cdaf);
        assert_eq!(splitmix64(&mut z), 0x6e78_9e6a_a1b9_65f4);
        assert_eq!(splitmix64(&mut z), 0x06c4_5d18_8009_454f);
    }

    #[test]
    fn xoshiro256starstar_matches_reference_vector() {
        // Reference outputs for state {1, 2, 3, 4} (xoshiro256starstar.c,
        // also the rand_xoshiro test vector).
        let mut r = SimRng::from_state([1, 2, 3, 4]);
        let want = [
            11520u64,
            0,
            1509978240,
            1215971899390074240,
            1216172134540287360,
            607988272756665600,
            16172922978634559625,
            8476171486693032832,
            10595114339597558777,
            2904607092377533576,
        ];
        for w in want {
            assert_eq!(r.next_u64(), w);
        }
    }

    #[test]
    fn floats_and_bounded_ints_stay_in_range() {
        let mut r = SimRng::seed_from_u64(7);
        for _ in 0..10_000 {
            let f = r.next_f64();
            assert!((0.0..1.0).contains(&f));
            assert!(r.below(10) < 10);
        }
        assert_eq!(r.below(0), 0);
        let mean: f64 = (0..100_000).map(|_| r.exponential(2.0)).sum::<f64>() / 1e5;
        assert!((mean - 2.0).abs() < 0.05, "mean {mean}");
    }
}
