//! A fast hasher for maps keyed by ids the CM issues itself (flow and
//! macroflow ids, client tokens), for the per-message lookups of the daemon
//! and libcm.
//!
//! The standard library's SipHash-1-3 resists hash flooding at ~20 ns per
//! `u64`; profiled in `cmd` under the API benchmark it was 11% of the
//! daemon's CPU. Flooding needs an attacker who chooses the keys that are
//! *inserted*; these maps only ever insert ids that the core or the daemon
//! assigned (a client may *look up* any value, which costs one probe
//! sequence like any miss). So a multiply-and-fold hash is enough: one
//! multiplication by 2^64/φ (Knuth's multiplicative hashing, TAOCP vol. 3
//! §6.4) spreads consecutive ids, and folding the high half down gives the
//! low bits, which pick the bucket, the influence of every key bit.
//!
//! ```
//! use cm_core::idhash::IdMap;
//! let mut m: IdMap<u64, &str> = IdMap::default();
//! m.insert(7, "seven");
//! assert_eq!(m.get(&7), Some(&"seven"));
//! ```

use core::hash::{BuildHasherDefault, Hasher};
use std::collections::HashMap;

/// 2^64 / φ, odd: Knuth's multiplier for Fibonacci hashing.
const K: u64 = 0x9E37_79B9_7F4A_7C15;

/// Multiply-and-fold hashing of integer ids (see the module docs: not for
/// keys an adversary inserts).
#[derive(Clone, Copy, Debug, Default)]
pub struct IdHasher {
    h: u64,
}

impl IdHasher {
    fn add(&mut self, v: u64) {
        self.h = (self.h.rotate_left(5) ^ v).wrapping_mul(K);
    }
}

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.h ^ (self.h >> 32)
    }

    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut b = [0u8; 8];
            b[..chunk.len()].copy_from_slice(chunk);
            self.add(u64::from_le_bytes(b));
        }
    }

    fn write_u8(&mut self, v: u8) {
        self.add(u64::from(v));
    }

    fn write_u16(&mut self, v: u16) {
        self.add(u64::from(v));
    }

    fn write_u32(&mut self, v: u32) {
        self.add(u64::from(v));
    }

    fn write_u64(&mut self, v: u64) {
        self.add(v);
    }

    fn write_usize(&mut self, v: usize) {
        self.add(v as u64);
    }
}

/// Builds [`IdHasher`]s.
pub type IdBuildHasher = BuildHasherDefault<IdHasher>;

/// A `HashMap` keyed by CM-issued ids, hashed with [`IdHasher`].
pub type IdMap<K, V> = HashMap<K, V, IdBuildHasher>;

#[cfg(test)]
mod tests {
    use super::*;
    use core::hash::BuildHasher;

    #[test]
    fn consecutive_ids_fill_distinct_buckets() {
        // The low 6 bits pick one of 64 buckets: 64 consecutive ids (and
        // ids with a generation in the high half) must spread over them.
        for high in [0u64, 1 << 32, 7 << 40] {
            let mut seen = [false; 64];
            for i in 0..64u64 {
                let h = IdBuildHasher::default().hash_one(high | i);
                seen[(h & 63) as usize] = true;
            }
            let used = seen.iter().filter(|&&s| s).count();
            assert!(used >= 40, "{used} of 64 buckets used (high {high:#x})");
        }
    }

    #[test]
    fn high_bits_reach_the_bucket() {
        // Ids that differ only above bit 32 (a slot's generation) must not
        // all land in one bucket.
        let mut seen = std::collections::HashSet::new();
        for g in 0..64u64 {
            let h = IdBuildHasher::default().hash_one((g << 32) | 5);
            seen.insert(h & 63);
        }
        assert!(seen.len() >= 40, "{} of 64 buckets", seen.len());
    }
}
