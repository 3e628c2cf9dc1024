//! vLLM's block hashes with `--prefix-caching-hash-algo sha256_cbor` or `xxhash_cbor`
//! (vllm/v1/core/kv_cache_utils.py, `hash_block_tokens`; vllm/utils/hashing.py):
//! `H(cbor([parent digest or NONE_HASH, tokens, extra keys or null]))`, with
//! `NONE_HASH = H(cbor(seed))`, CBOR in its canonical form, `H` SHA-256 or XXH3-128.
//!
//! The extra keys are rebuilt, tagged, from the untagged per-block keys an event publishes:
//! a salt string becomes `["cache_salt", salt]`, an `[identifier, offset]` pair
//! `["mm", identifier, offset]`, a digest `["prompt_embeds", digest]`. A LoRA adapter's key
//! is `["lora", name, path]`, and the path is never published: such blocks cannot be
//! recomputed from events.

use sha2::{Digest as _, Sha256};
use xxhash_rust::xxh3::xxh3_128;

use super::digest::Digest;
use crate::cbor::CborWriter;
use crate::engine::batch::ExtraKey;

/// The two CBOR algorithms of vLLM.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CborHash {
    Sha256,
    Xxh3_128,
}

impl CborHash {
    fn digest(self, bytes: &[u8]) -> Digest {
        match self {
            CborHash::Sha256 => Digest::sha256(Sha256::digest(bytes).into()),
            CborHash::Xxh3_128 => Digest::xxh3_128(xxh3_128(bytes)),
        }
    }

    /// `NONE_HASH`: the hash of the seed string (`PYTHONHASHSEED`, or `"vllm-none-hash"`
    /// for the sha256 algorithms when it is unset).
    pub(crate) fn none_hash(self, seed: &str) -> Digest {
        let mut w = CborWriter::new();
        w.text(seed);
        self.digest(w.bytes())
    }

    /// The hash of one block: `parent` is the previous block's digest or `NONE_HASH`;
    /// `extras` the block's published extra keys (`None` when it has none); `lora` the
    /// event's adapter name. `None` when the published keys do not determine the hash.
    pub(crate) fn block(
        self,
        w: &mut CborWriter,
        parent: &Digest,
        tokens: &[u32],
        extras: Option<&[ExtraKey]>,
        lora: Option<&str>,
    ) -> Option<Digest> {
        w.clear();
        w.array(3);
        w.bytes_item(parent.as_bytes());
        w.uint_array(tokens);
        match extras {
            None => w.null(),
            Some([]) => w.null(),
            Some(keys) => {
                w.array(keys.len());
                for key in keys {
                    tagged_key(w, key, lora)?;
                }
            }
        }
        Some(self.digest(w.bytes()))
    }
}

fn tagged_key(w: &mut CborWriter, key: &ExtraKey, lora: Option<&str>) -> Option<()> {
    match key {
        // The LoRA key also holds the adapter's path, which events never carry.
        ExtraKey::Text(text) if Some(text.as_str()) == lora => return None,
        ExtraKey::Text(salt) => {
            w.array(2);
            w.text("cache_salt");
            w.text(salt);
        }
        ExtraKey::Multimodal { identifier, offset } => {
            w.array(3);
            w.text("mm");
            w.text(identifier);
            w.int(*offset);
        }
        ExtraKey::Digest(digest) => {
            w.array(2);
            w.text("prompt_embeds");
            w.bytes_item(digest);
        }
        ExtraKey::Other => return None,
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The check values of docs/engine-events.md ("How vLLM computes its block hashes").
    #[test]
    fn sha256_cbor_matches_the_documented_check_values() {
        let tokens: Vec<u32> = (1..=32).collect();
        for (seed, want) in [
            (
                "vllm-none-hash",
                [8866452693264111234u64, 807986237951177663],
            ),
            ("0", [3236607068019569386, 2758186210834249151]),
        ] {
            let mut w = CborWriter::new();
            let h = CborHash::Sha256;
            let first = h
                .block(&mut w, &h.none_hash(seed), &tokens[..16], None, None)
                .unwrap();
            let second = h.block(&mut w, &first, &tokens[16..], None, None).unwrap();
            assert_eq!([first.last_u64(), second.last_u64()], want, "seed {seed}");
        }
    }

    #[test]
    fn a_lora_key_cannot_be_recomputed() {
        let mut w = CborWriter::new();
        let h = CborHash::Sha256;
        let none = h.none_hash("x");
        let keys = [ExtraKey::Text("adapter".into())];
        assert!(h
            .block(&mut w, &none, &[1], Some(&keys), Some("adapter"))
            .is_none());
        assert!(h.block(&mut w, &none, &[1], Some(&keys), None).is_some());
    }
}
