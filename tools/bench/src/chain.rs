//! Turning trace hash ids into engine blocks: local hashes and sequence-hash chains.
//!
//! Each 512-token hash id becomes `F` blocks (the length factor), block `j` of id `h` having
//! local hash `hashing::local_hash([h lo, h hi, j])`. With duplication factor `D`, copy `k` of
//! the trace renames id `h` to `h * D + k`, so copies share nothing with each other. Sequence
//! hashes follow the hashing contract (`seq[0] = local[0]`, then XXH3 of the pair), as an
//! engine that publishes Dynamo-compatible events would compute them.

use kvidx::hashing::{local_hash, next_in_chain};
use kvidx::Block;

/// The local hash of block `j` of (renamed) hash id `id`.
pub fn prompt_local(id: u64, j: u32) -> u64 {
    local_hash(&[id as u32, (id >> 32) as u32, j])
}

/// The local hash of generated block `j` of request number `request` (unique per request).
pub fn decode_local(request: u64, j: u32) -> u64 {
    local_hash(&[request as u32, (request >> 32) as u32, j, u32::MAX])
}

/// Appends blocks with the given local hashes to `chain`, continuing its sequence hashes.
pub fn extend_chain(chain: &mut Vec<Block>, prev: Option<u64>, locals: impl Iterator<Item = u64>) {
    let mut prev = prev;
    for local in locals {
        let seq = next_in_chain(prev, local);
        chain.push(Block::new(local, seq));
        prev = Some(seq);
    }
}

/// The prompt blocks of a request: `F` blocks per hash id, copy `copy` of `copies`.
pub fn prompt_chain(hash_ids: &[u64], length_factor: u32, copy: u64, copies: u64) -> Vec<Block> {
    let mut chain = Vec::with_capacity(hash_ids.len() * length_factor as usize);
    let locals = hash_ids.iter().flat_map(|&h| {
        let id = h.wrapping_mul(copies).wrapping_add(copy);
        (0..length_factor).map(move |j| prompt_local(id, j))
    });
    extend_chain(&mut chain, None, locals);
    chain
}

/// The blocks a request generates: `count` unique blocks continuing `last_prompt_seq`.
pub fn decode_chain(request: u64, count: u32, last_prompt_seq: u64) -> Vec<Block> {
    let mut chain = Vec::with_capacity(count as usize);
    extend_chain(
        &mut chain,
        Some(last_prompt_seq),
        (0..count).map(|j| decode_local(request, j)),
    );
    chain
}

#[cfg(test)]
mod tests {
    use super::*;
    use kvidx::hashing::seq_hashes;

    #[test]
    fn chains_follow_the_hashing_contract_and_share_prefixes() {
        let a = prompt_chain(&[0, 1, 2], 2, 0, 1);
        let b = prompt_chain(&[0, 1, 9], 2, 0, 1);
        assert_eq!(a.len(), 6);
        let locals: Vec<u64> = a.iter().map(|x| x.local_hash).collect();
        let seqs: Vec<u64> = a.iter().map(|x| x.seq_hash).collect();
        assert_eq!(seqs, seq_hashes(&locals));
        assert_eq!(a[..4], b[..4]);
        assert_ne!(a[4], b[4]);
        // Two copies of the same request share nothing.
        let c0 = prompt_chain(&[0, 1], 1, 0, 2);
        let c1 = prompt_chain(&[0, 1], 1, 1, 2);
        assert!(c0.iter().all(|x| !c1.contains(x)));
    }

    #[test]
    fn decode_blocks_continue_the_prompt() {
        let p = prompt_chain(&[4], 1, 0, 1);
        let d = decode_chain(9, 2, p[0].seq_hash);
        let mut whole: Vec<u64> = p.iter().map(|x| x.local_hash).collect();
        whole.extend(d.iter().map(|x| x.local_hash));
        assert_eq!(d[1].seq_hash, seq_hashes(&whole)[2]);
        assert_ne!(decode_local(9, 0), decode_local(10, 0));
        assert_ne!(decode_local(0, 0), prompt_local(0, 0));
    }
}
