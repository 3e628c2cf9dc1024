//! SGLang 0.5.23's page hashes (sglang/srt/mem_cache/utils.py, `compute_node_event_hash_values`,
//! and the native `hash_binding.cpp`): each page's digest is
//! `SHA-256(previous page's digest ++ tokens as u32 little-endian)`, the first page of a
//! chain without a previous digest, or, with a cache salt, after
//! `SHA-256("sglang-cache-salt-v1\0" ++ salt)`. Events carry the digest's first 8 bytes as a
//! signed int64. A LoRA adapter's stores may publish those hashes namespaced by a key that
//! events do not carry, so the check does not recompute them.

use sha2::{Digest as _, Sha256};

use super::digest::Digest;

/// The digest a salted chain starts after.
pub(crate) fn salt_seed(salt: &str) -> Digest {
    let mut h = Sha256::new();
    h.update(b"sglang-cache-salt-v1\0");
    h.update(salt.as_bytes());
    Digest::sha256(h.finalize().into())
}

/// The digest of one page after `prior`.
pub(crate) fn page(prior: Option<&Digest>, tokens: &[u32]) -> Digest {
    let mut h = Sha256::new();
    if let Some(prior) = prior {
        h.update(prior.as_bytes());
    }
    for token in tokens {
        h.update(token.to_le_bytes());
    }
    Digest::sha256(h.finalize().into())
}
