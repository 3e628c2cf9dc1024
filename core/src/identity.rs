//! Prefix identities: the index's own names for blocks, computed from local hashes only.
//!
//! `c_0 = mix(SEED, local_0)`, `c_i = mix(c_{i-1}, local_i)`. Two engines with different
//! sequence-hash algorithms agree on `c` for the same blocks, so engine hashes stay opaque.
//! Identities are 64-bit: two different chains share one with probability about 2^-64,
//! which the index (like any hash-named cache) accepts.

/// The identity "before" position 0.
pub const IDENTITY_SEED: u64 = 0x6b76_6964_785f_7631; // "kvidx_v1"

#[inline(always)]
fn folded_multiply(a: u64, b: u64) -> u64 {
    let full = (a as u128).wrapping_mul(b as u128);
    (full as u64) ^ ((full >> 64) as u64)
}

/// The identity of the block with local hash `local` that follows identity `prefix`.
///
/// Two independent folded multiplies: neither input can zero both products, and the two
/// multiplies run in parallel, so one step costs about one multiply's latency.
#[inline(always)]
pub fn mix(prefix: u64, local: u64) -> u64 {
    let a = folded_multiply(
        prefix ^ 0x243f_6a88_85a3_08d3,
        local ^ 0x1319_8a2e_0370_7344,
    );
    let b = folded_multiply(
        prefix.rotate_left(32) ^ 0xa409_3822_299f_31d0,
        local ^ 0x082e_fa98_ec4e_6c89,
    );
    a ^ b.rotate_left(17)
}

/// Writes the identities of a chain of local hashes into `out` (cleared first).
pub fn identities_into(local_hashes: &[u64], out: &mut Vec<u64>) {
    out.clear();
    out.reserve(local_hashes.len());
    let mut prev = IDENTITY_SEED;
    for &local in local_hashes {
        prev = mix(prev, local);
        out.push(prev);
    }
}

/// The identities of a chain of local hashes.
pub fn identities(local_hashes: &[u64]) -> Vec<u64> {
    let mut out = Vec::new();
    identities_into(local_hashes, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn identity_depends_on_prefix_and_local() {
        assert_ne!(mix(1, 2), mix(2, 1));
        assert_ne!(mix(IDENTITY_SEED, 7), mix(mix(IDENTITY_SEED, 7), 7));
        assert_eq!(identities(&[5, 6])[1], mix(mix(IDENTITY_SEED, 5), 6));
    }

    #[test]
    fn small_alphabets_do_not_collide() {
        // Every chain of length <= 4 over a 16-letter alphabet gets its own identity.
        let mut seen = HashSet::new();
        let mut count = 0;
        let mut frontier = vec![IDENTITY_SEED];
        for _ in 0..4 {
            let mut next = Vec::new();
            for &p in &frontier {
                for l in 0..16u64 {
                    let c = mix(p, l);
                    assert!(seen.insert(c), "collision");
                    count += 1;
                    next.push(c);
                }
            }
            frontier = next;
        }
        assert_eq!(count, 16 + 256 + 4096 + 65536);
    }

    #[test]
    fn zero_inputs_still_mix() {
        assert_ne!(mix(0, 0x1319_8a2e_0370_7344), mix(1, 0x1319_8a2e_0370_7344));
        assert_ne!(mix(0x243f_6a88_85a3_08d3, 0), mix(0x243f_6a88_85a3_08d3, 1));
    }
}
