//! The hashing contract (docs/contract.md section 3), compatible with Dynamo's publishers and mocker.
//!
//! - local hash: XXH3-64, seed 1337, over a block's `u32` tokens as little-endian bytes;
//! - sequence hash: `seq[0] = local[0]`, `seq[i] = XXH3-64(le64(seq[i-1]) ++ le64(local[i]), 1337)`;
//! - LoRA: seed `1337 + XXH3-64(name bytes, seed 0)`, wrapping.
//!
//! Only full blocks are hashed: trailing tokens that do not fill a block are ignored.

use xxhash_rust::xxh3::xxh3_64_with_seed;

/// The seed of the hashing contract.
pub const HASH_SEED: u64 = 1337;

/// The local hash of one block of tokens with the default seed.
pub fn local_hash(tokens: &[u32]) -> u64 {
    local_hash_with_seed(tokens, HASH_SEED)
}

/// The local hash of one block of tokens with a given seed (see [`lora_seed`]).
pub fn local_hash_with_seed(tokens: &[u32], seed: u64) -> u64 {
    // Small blocks hash from a stack buffer; larger ones from one heap buffer.
    let mut stack = [0u8; 256];
    let len = tokens.len() * 4;
    if len <= stack.len() {
        write_le_tokens(tokens, &mut stack[..len]);
        xxh3_64_with_seed(&stack[..len], seed)
    } else {
        let mut heap = vec![0u8; len];
        write_le_tokens(tokens, &mut heap);
        xxh3_64_with_seed(&heap, seed)
    }
}

fn write_le_tokens(tokens: &[u32], out: &mut [u8]) {
    for (chunk, token) in out.chunks_exact_mut(4).zip(tokens) {
        chunk.copy_from_slice(&token.to_le_bytes());
    }
}

/// Local hashes of every full block of `tokens` (default seed). `block_size` must be > 0.
///
/// # Panics
/// If `block_size` is 0.
pub fn hash_tokens(tokens: &[u32], block_size: usize) -> Vec<u64> {
    hash_tokens_with_seed(tokens, block_size, HASH_SEED)
}

/// Local hashes of every full block of `tokens` with a given seed. `block_size` must be > 0.
///
/// # Panics
/// If `block_size` is 0.
pub fn hash_tokens_with_seed(tokens: &[u32], block_size: usize, seed: u64) -> Vec<u64> {
    assert!(block_size > 0, "block_size must be positive");
    tokens
        .chunks_exact(block_size)
        .map(|block| local_hash_with_seed(block, seed))
        .collect()
}

/// The sequence hash that follows `prev` when the next block has local hash `local`.
pub fn next_seq_hash(prev: u64, local: u64, seed: u64) -> u64 {
    let mut bytes = [0u8; 16];
    bytes[..8].copy_from_slice(&prev.to_le_bytes());
    bytes[8..].copy_from_slice(&local.to_le_bytes());
    xxh3_64_with_seed(&bytes, seed)
}

/// One step of the sequence-hash chain (default seed): the sequence hash of a block with
/// local hash `local` after a block with sequence hash `prev` (`None` for the first block,
/// whose sequence hash is its local hash). Every chain in the project is built with this.
pub fn next_in_chain(prev: Option<u64>, local: u64) -> u64 {
    match prev {
        None => local,
        Some(prev) => next_seq_hash(prev, local, HASH_SEED),
    }
}

/// Writes the sequence-hash chain of `local_hashes` into `out` (default seed).
///
/// # Panics
/// If `out` is shorter than `local_hashes`.
pub fn seq_hashes_into(local_hashes: &[u64], out: &mut [u64]) {
    assert!(out.len() >= local_hashes.len(), "output shorter than input");
    let mut prev = None;
    for (slot, &local) in out.iter_mut().zip(local_hashes) {
        let seq = next_in_chain(prev, local);
        *slot = seq;
        prev = Some(seq);
    }
}

/// The sequence-hash chain of `local_hashes` (default seed).
pub fn seq_hashes(local_hashes: &[u64]) -> Vec<u64> {
    let mut out = vec![0; local_hashes.len()];
    seq_hashes_into(local_hashes, &mut out);
    out
}

/// The hashing seed for a LoRA adapter: `1337 + XXH3-64(name, seed 0)`, wrapping.
pub fn lora_seed(lora_name: &str) -> u64 {
    HASH_SEED.wrapping_add(xxh3_64_with_seed(lora_name.as_bytes(), 0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn golden_local_hashes() {
        assert_eq!(local_hash(&[1, 2, 3, 4]), 14643705804678351452);
        assert_eq!(local_hash(&[5, 6, 7, 8]), 16777012769546811212);
        assert_eq!(local_hash(&[9, 10, 11, 12]), 483935686894639516);
    }

    #[test]
    fn golden_sequence_hashes() {
        let locals = hash_tokens(&(1..=12).collect::<Vec<u32>>(), 4);
        let seqs = seq_hashes(&locals);
        assert_eq!(seqs[0], 14643705804678351452);
        assert_eq!(seqs[1], 4945711292740353085);
        assert_eq!(seqs[2], 12583592247330656132);
    }

    #[test]
    fn partial_blocks_are_ignored() {
        assert!(hash_tokens(&[1, 2, 3], 4).is_empty());
        assert_eq!(hash_tokens(&[1, 2, 3, 4, 5, 6], 4).len(), 1);
    }

    #[test]
    fn large_blocks_hash_like_small_ones_would() {
        let tokens: Vec<u32> = (0..1000).collect();
        let mut bytes = Vec::new();
        for t in &tokens {
            bytes.extend_from_slice(&t.to_le_bytes());
        }
        assert_eq!(local_hash(&tokens), xxh3_64_with_seed(&bytes, HASH_SEED));
    }

    #[test]
    fn lora_seed_changes_hashes_and_wraps() {
        let seed = lora_seed("adapter-a");
        assert_eq!(
            seed,
            1337u64.wrapping_add(xxh3_64_with_seed(b"adapter-a", 0))
        );
        assert_ne!(
            local_hash_with_seed(&[1, 2, 3, 4], seed),
            local_hash(&[1, 2, 3, 4])
        );
    }

    #[test]
    #[should_panic(expected = "block_size")]
    fn zero_block_size_panics() {
        hash_tokens(&[1], 0);
    }
}
