//! Namespaces and multimodal inputs in local hashes (docs/contract.md section 3.1).
//!
//! An engine's block hash covers more than the block's tokens: the LoRA adapter, the
//! request's cache salt and the multimodal items that overlap the block. Two requests share a
//! block in the engine's cache only when all of these agree, so the index's local hashes
//! carry them too, placed as vLLM places its extra keys:
//!
//! - the LoRA name seeds every block ([`crate::hashing::lora_seed`], unchanged);
//! - each multimodal item folds into every block its token span `[start, end)` overlaps, as
//!   the key `(identifier, start - block start)`;
//! - the cache salt folds into the first block only (after its multimodal keys).
//!
//! A block's keys are chained into a **key digest** ([`KeyDigest`]); a block with keys gets
//! the local hash [`fold`]`(local, digest)`, a block without keeps its plain local hash. So an
//! empty namespace with no multimodal spans gives exactly [`crate::hashing::hash_tokens`],
//! and since prefix identities chain (contract section 1), a difference in the first block
//! (salt, LoRA) or in any block (an image) separates everything from there on.

use xxhash_rust::xxh3::xxh3_64_with_seed;

use crate::hashing::{hash_tokens_with_seed, local_hash_with_seed, HASH_SEED};

/// The request-wide part of a namespace. Empty bytes mean "none": an empty LoRA name is no
/// adapter and an empty salt is no salt (as in vLLM, which ignores an empty `cache_salt`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Namespace<'a> {
    /// The LoRA adapter's name (UTF-8 as the engine publishes it); seeds every block.
    pub lora_name: &'a [u8],
    /// The cache salt (opaque bytes); folds into the first block.
    pub cache_salt: &'a [u8],
}

impl Namespace<'_> {
    /// The namespace of un-salted, adapter-less requests: today's local hashes.
    pub const NONE: Namespace<'static> = Namespace {
        lora_name: &[],
        cache_salt: &[],
    };

    /// The seed of every block's token hash: the LoRA seed, or the contract's seed.
    pub fn seed(&self) -> u64 {
        if self.lora_name.is_empty() {
            HASH_SEED
        } else {
            HASH_SEED.wrapping_add(xxh3_64_with_seed(self.lora_name, 0))
        }
    }
}

/// A multimodal item of a request: its identifier (opaque bytes, vLLM's `mm_hash`) and the
/// token span `[start, end)` its placeholder tokens occupy. A span with `end <= start`
/// overlaps no block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MultimodalSpan<'a> {
    /// The item's identifier.
    pub identifier: &'a [u8],
    /// Index of the item's first token in the request.
    pub start: u64,
    /// Index one past the item's last token.
    pub end: u64,
}

/// One key folded into a block's local hash.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockKey<'a> {
    /// A multimodal item overlapping the block; `offset` is the item's start minus the
    /// block's first token index (negative when the item began in an earlier block).
    Multimodal {
        /// The item's identifier.
        identifier: &'a [u8],
        /// Item start relative to the block start, in tokens.
        offset: i64,
    },
    /// The request's cache salt (first block only).
    CacheSalt(&'a [u8]),
}

/// Tag byte of a multimodal key in its digest input.
const MULTIMODAL_TAG: u8 = b'm';
/// Tag byte of a cache salt in its digest input.
const SALT_TAG: u8 = b's';

/// The chained digest of one block's keys, built one key at a time in the block's order.
///
/// Starts at 0 ("no keys"); each key `k` makes it `XXH3-64(le64(d) || bytes(k), 1337)` with
/// `bytes(Multimodal) = 'm' || le64(offset) || identifier` and `bytes(CacheSalt) = 's' ||
/// salt`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct KeyDigest(u64);

impl KeyDigest {
    /// Chains one more key.
    pub fn push(&mut self, key: BlockKey<'_>) {
        let mut input = Vec::with_capacity(24 + key_len(&key));
        input.extend_from_slice(&self.0.to_le_bytes());
        match key {
            BlockKey::Multimodal { identifier, offset } => {
                input.push(MULTIMODAL_TAG);
                input.extend_from_slice(&offset.to_le_bytes());
                input.extend_from_slice(identifier);
            }
            BlockKey::CacheSalt(salt) => {
                input.push(SALT_TAG);
                input.extend_from_slice(salt);
            }
        }
        self.0 = xxh3_64_with_seed(&input, HASH_SEED);
    }

    /// Continues a digest from its value (0: no key yet).
    pub fn resume(value: u64) -> Self {
        Self(value)
    }

    /// The digest value (0 when no key was pushed).
    pub fn value(self) -> u64 {
        self.0
    }
}

fn key_len(key: &BlockKey<'_>) -> usize {
    match key {
        BlockKey::Multimodal { identifier, .. } => identifier.len(),
        BlockKey::CacheSalt(salt) => salt.len(),
    }
}

/// A block's local hash with its keys folded in: `local` itself when `digest` is 0 (no keys),
/// else `XXH3-64(le64(local) || le64(digest), 1337)`.
pub fn fold(local: u64, digest: u64) -> u64 {
    if digest == 0 {
        return local;
    }
    let mut bytes = [0u8; 16];
    bytes[..8].copy_from_slice(&local.to_le_bytes());
    bytes[8..].copy_from_slice(&digest.to_le_bytes());
    xxh3_64_with_seed(&bytes, HASH_SEED)
}

/// The local hashes of a request under its namespace and multimodal spans: what a router
/// queries with to reach exactly the blocks the engines stored for the same tenant, adapter
/// and inputs. Only full blocks are hashed; spans may come in any order (keys are placed by
/// span start, ties in the given order).
///
/// # Panics
/// If `block_size` is 0.
pub fn hash_request(
    tokens: &[u32],
    block_size: usize,
    namespace: &Namespace<'_>,
    spans: &[MultimodalSpan<'_>],
) -> Vec<u64> {
    if folds_nothing(namespace, spans) {
        return hash_tokens_with_seed(tokens, block_size, namespace.seed());
    }
    let mut out = vec![0; tokens.len() / block_size.max(1)];
    hash_request_into(tokens, block_size, namespace, spans, &mut out);
    out
}

/// Whether no key folds into any block: no cache salt and no span overlapping a token, so
/// the local hashes are the token hashes under the namespace's seed.
fn folds_nothing(namespace: &Namespace<'_>, spans: &[MultimodalSpan<'_>]) -> bool {
    namespace.cache_salt.is_empty() && spans.iter().all(|s| s.end <= s.start)
}

/// [`hash_request`] into `out[..tokens.len() / block_size]`; returns that count.
///
/// # Panics
/// If `block_size` is 0 or `out` is shorter than the count.
pub fn hash_request_into(
    tokens: &[u32],
    block_size: usize,
    namespace: &Namespace<'_>,
    spans: &[MultimodalSpan<'_>],
    out: &mut [u64],
) -> usize {
    assert!(block_size > 0, "block_size must be positive");
    let blocks = tokens.len() / block_size;
    assert!(out.len() >= blocks, "output shorter than the block count");
    let seed = namespace.seed();
    if folds_nothing(namespace, spans) {
        // No digest per block: un-salted requests without multimodal items cost what their
        // token hashes cost.
        for (block, slot) in tokens.chunks_exact(block_size).zip(out.iter_mut()) {
            *slot = local_hash_with_seed(block, seed);
        }
        return blocks;
    }
    let mut by_start: Vec<&MultimodalSpan<'_>> = spans.iter().filter(|s| s.end > s.start).collect();
    by_start.sort_by_key(|s| s.start);
    for (i, (block, slot)) in tokens
        .chunks_exact(block_size)
        .zip(out.iter_mut())
        .enumerate()
    {
        let first = (i * block_size) as u64;
        let last = first + block_size as u64;
        let mut digest = KeyDigest::default();
        for span in by_start.iter().filter(|s| s.start < last && s.end > first) {
            digest.push(BlockKey::Multimodal {
                identifier: span.identifier,
                offset: (span.start as i64).wrapping_sub(first as i64),
            });
        }
        if i == 0 && !namespace.cache_salt.is_empty() {
            digest.push(BlockKey::CacheSalt(namespace.cache_salt));
        }
        *slot = fold(local_hash_with_seed(block, seed), digest.value());
    }
    blocks
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hashing::{hash_tokens, hash_tokens_with_seed, lora_seed};

    fn tokens() -> Vec<u32> {
        (1..=12).collect()
    }

    fn namespace(lora_name: &'static [u8], cache_salt: &'static [u8]) -> Namespace<'static> {
        Namespace {
            lora_name,
            cache_salt,
        }
    }

    /// The golden vectors of docs/contract.md section 3.1 (tokens 1..=12, block size 4).
    #[test]
    fn golden_vectors() {
        let image = [MultimodalSpan {
            identifier: b"image-1",
            start: 2,
            end: 6,
        }];
        let salt = namespace(b"", b"tenant-a");
        let lora = namespace(b"adapter-a", b"");
        let both = namespace(b"adapter-a", b"tenant-a");
        let cases: [(&Namespace<'_>, &[MultimodalSpan<'_>], [u64; 3]); 5] = [
            (
                &Namespace::NONE,
                &[],
                [
                    14643705804678351452,
                    16777012769546811212,
                    483935686894639516,
                ],
            ),
            (
                &salt,
                &[],
                [
                    1461199381953589153,
                    16777012769546811212,
                    483935686894639516,
                ],
            ),
            (
                &lora,
                &[],
                [
                    11381080598872079209,
                    5698110331184095209,
                    10923852707342720619,
                ],
            ),
            (
                &Namespace::NONE,
                &image,
                [
                    1978177322621556195,
                    10355098053434598600,
                    483935686894639516,
                ],
            ),
            (
                &both,
                &image,
                [
                    7859937575092783861,
                    15422904220237451310,
                    10923852707342720619,
                ],
            ),
        ];
        for (ns, spans, want) in cases {
            assert_eq!(
                hash_request(&tokens(), 4, ns, spans),
                want,
                "{ns:?} {spans:?}"
            );
        }
    }

    #[test]
    fn the_empty_namespace_gives_todays_local_hashes() {
        assert_eq!(
            hash_request(&tokens(), 4, &Namespace::NONE, &[]),
            hash_tokens(&tokens(), 4)
        );
    }

    #[test]
    fn a_lora_name_alone_gives_todays_lora_hashes() {
        let ns = Namespace {
            lora_name: b"adapter-a",
            cache_salt: b"",
        };
        assert_eq!(
            hash_request(&tokens(), 4, &ns, &[]),
            hash_tokens_with_seed(&tokens(), 4, lora_seed("adapter-a"))
        );
    }

    #[test]
    fn a_salt_changes_the_first_block_only() {
        let ns = Namespace {
            lora_name: b"",
            cache_salt: b"tenant-a",
        };
        let (plain, salted) = (
            hash_tokens(&tokens(), 4),
            hash_request(&tokens(), 4, &ns, &[]),
        );
        assert_ne!(plain[0], salted[0]);
        assert_eq!(plain[1..], salted[1..]);
    }

    #[test]
    fn an_item_folds_into_every_block_it_overlaps_with_its_relative_offset() {
        let span = MultimodalSpan {
            identifier: b"img",
            start: 3,
            end: 5,
        };
        let plain = hash_tokens(&tokens(), 4);
        let with = hash_request(&tokens(), 4, &Namespace::NONE, &[span]);
        assert_eq!(with[2], plain[2]);
        let mut d0 = KeyDigest::default();
        d0.push(BlockKey::Multimodal {
            identifier: b"img",
            offset: 3,
        });
        let mut d1 = KeyDigest::default();
        d1.push(BlockKey::Multimodal {
            identifier: b"img",
            offset: -1,
        });
        assert_eq!(with[0], fold(plain[0], d0.value()));
        assert_eq!(with[1], fold(plain[1], d1.value()));
    }

    #[test]
    fn spans_are_placed_by_start_and_empty_spans_are_ignored() {
        let a = MultimodalSpan {
            identifier: b"a",
            start: 0,
            end: 2,
        };
        let b = MultimodalSpan {
            identifier: b"b",
            start: 2,
            end: 4,
        };
        let empty = MultimodalSpan {
            identifier: b"c",
            start: 1,
            end: 1,
        };
        let t = tokens();
        assert_eq!(
            hash_request(&t, 4, &Namespace::NONE, &[b, a]),
            hash_request(&t, 4, &Namespace::NONE, &[a, empty, b])
        );
    }

    #[test]
    fn nothing_to_fold_gives_the_token_hashes_into_a_buffer_too() {
        let empty = MultimodalSpan {
            identifier: b"c",
            start: 5,
            end: 2,
        };
        let (lora, salted) = (namespace(b"adapter-a", b""), namespace(b"", b"tenant-a"));
        let t: Vec<u32> = (1..=14).collect();
        assert_eq!(
            hash_request(&t, 4, &Namespace::NONE, &[empty]),
            hash_tokens(&t, 4)
        );
        for (ns, spans) in [
            (&Namespace::NONE, &[][..]),
            (&Namespace::NONE, &[empty][..]),
            (&lora, &[empty][..]),
            (&salted, &[empty][..]),
        ] {
            let mut out = [0; 4];
            assert_eq!(hash_request_into(&t, 4, ns, spans, &mut out), 3);
            assert_eq!(out[..3], hash_request(&t, 4, ns, spans)[..], "{ns:?}");
            assert_eq!(out[3], 0, "past the full blocks");
        }
    }
}
