//! llm-d's request keys (the KV-cache indexer's token processor), a block-key scheme a router
//! built on llm-d computes and kvidx can index under (docs/contract.md, "llm-d's request keys").
//!
//! - `hash(parent, tokens, extra)` = FNV-64a over the canonical CBOR of the array
//!   `[parent, tokens, extra]` (`parent` an unsigned integer, `tokens` an array of unsigned
//!   integers or null, `extra` null or a text string);
//! - the chain starts from `init = FNV-64a(seed bytes)` (the seed string itself, not CBOR);
//! - the root key of a model is `hash(init, null, model)`: the model name (or the LoRA
//!   adapter's name) is the root's extra;
//! - block `i` (a full block of `block_size` tokens; a partial tail is not hashed) is
//!   `hash(key[i - 1], tokens_i, null)`, with `key[-1]` the root key.

use crate::cbor::CborWriter;

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// FNV-64a of `bytes`.
pub fn fnv64a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(FNV_OFFSET, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(FNV_PRIME)
    })
}

/// The start of every chain: FNV-64a of the seed's bytes (llm-d's `HashSeed`, to be set to
/// the engines' `PYTHONHASHSEED`; llm-d's default is the empty string).
pub fn init_hash(seed: &str) -> u64 {
    fnv64a(seed.as_bytes())
}

fn key(w: &mut CborWriter, parent: u64, tokens: Option<&[u32]>, extra: Option<&str>) -> u64 {
    w.clear();
    w.array(3);
    w.uint(parent);
    match tokens {
        Some(tokens) => w.uint_array(tokens),
        None => w.null(),
    }
    match extra {
        Some(extra) => w.text(extra),
        None => w.null(),
    }
    fnv64a(w.bytes())
}

/// The root key of `model` (a model or LoRA adapter name) under `seed`: the parent of a
/// request's first block.
pub fn root_key(seed: &str, model: &str) -> u64 {
    key(&mut CborWriter::new(), init_hash(seed), None, Some(model))
}

/// The key of one block of tokens after the block (or root) whose key is `parent`.
pub fn block_key(parent: u64, tokens: &[u32]) -> u64 {
    key(&mut CborWriter::new(), parent, Some(tokens), None)
}

/// The keys of every full block of `tokens`, chained from `parent`. `block_size` must be > 0.
///
/// # Panics
/// If `block_size` is 0.
pub fn block_keys(parent: u64, tokens: &[u32], block_size: usize) -> Vec<u64> {
    assert!(block_size > 0, "block_size must be positive");
    let mut w = CborWriter::new();
    let mut prev = parent;
    tokens
        .chunks_exact(block_size)
        .map(|chunk| {
            prev = key(&mut w, prev, Some(chunk), None);
            prev
        })
        .collect()
}

/// A request's block keys as llm-d's token processor computes them: every full block of
/// `tokens`, chained from the root key of `model` under `seed`. `block_size` must be > 0.
///
/// # Panics
/// If `block_size` is 0.
pub fn request_keys(tokens: &[u32], block_size: usize, seed: &str, model: &str) -> Vec<u64> {
    block_keys(root_key(seed, model), tokens, block_size)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv64a_matches_the_reference_vectors() {
        assert_eq!(fnv64a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv64a(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv64a(b"foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn keys_chain_and_ignore_a_partial_tail() {
        let tokens: Vec<u32> = (1..=40).collect();
        let keys = request_keys(&tokens, 16, "", "m");
        assert_eq!(keys.len(), 2);
        assert_eq!(keys[0], block_key(root_key("", "m"), &tokens[..16]));
        assert_eq!(keys[1], block_key(keys[0], &tokens[16..32]));
        assert_ne!(request_keys(&tokens, 16, "", "other")[0], keys[0]);
        assert_ne!(request_keys(&tokens, 16, "0", "m")[0], keys[0]);
    }
}
