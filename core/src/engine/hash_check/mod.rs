//! The hash check: an optional verification, per engine feed, that recomputes the engine's
//! own block hashes from what its stores publish (tokens, parent, block size, extra keys)
//! and counts, per publisher, the blocks whose published name it reproduced (`matched`),
//! those it did not (`mismatched`: the engine hashes with another algorithm, seed or block
//! size than the check was told, so a router hashing the same way would not find its
//! blocks either) and those it cannot recompute (`unverifiable`: no tokens, a parent the
//! check never saw, a LoRA adapter (vLLM hashes its unpublished path; SGLang may namespace
//! its published hashes with an unpublished key), lookahead tokens, an unknown key).
//!
//! Algorithms: vLLM's `sha256_cbor` and `xxhash_cbor` (`vllm.rs`) and SGLang 0.5.23's page
//! chain (`sglang.rs`). The check keeps each publisher's full digests of the blocks it
//! matched (about 48 bytes per held block), forgets those the engine removes, and changes
//! nothing in what the feed indexes.

mod digest;
mod sglang;
mod vllm;

use std::collections::HashMap;

use self::digest::Digest;
use self::vllm::CborHash;
use super::batch::{BlockStored, EngineEvent};
use super::chain_names::{BatchNames, ChainNames};
use crate::cbor::CborWriter;
use crate::model::Worker;

/// The seed vLLM 0.33 derives `NONE_HASH` from for the sha256 algorithms when
/// `PYTHONHASHSEED` is unset.
pub const VLLM_DEFAULT_SEED: &str = "vllm-none-hash";

/// How the engine hashes its blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HashAlgorithm {
    /// vLLM `--prefix-caching-hash-algo sha256_cbor`.
    VllmSha256Cbor,
    /// vLLM `--prefix-caching-hash-algo xxhash_cbor`.
    VllmXxhashCbor,
    /// SGLang 0.5.23's per-page SHA-256 chain.
    SglangSha256,
}

/// What the hash check expects of the engine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HashCheckConfig {
    /// The engine's algorithm.
    pub algorithm: HashAlgorithm,
    /// vLLM's `NONE_HASH` seed: the engine's `PYTHONHASHSEED`, or [`VLLM_DEFAULT_SEED`]
    /// for the sha256 algorithms when it is unset (`xxhash_cbor` then draws a random seed
    /// per process: set `PYTHONHASHSEED`). Not used by SGLang.
    pub seed: String,
    /// The block size the router hashes with; `None` takes each store's own `block_size`.
    /// A store of another block size is recomputed with this one, so it mismatches.
    pub block_size: Option<u32>,
}

impl HashCheckConfig {
    /// A check of `algorithm` with vLLM's default seed and each store's own block size.
    pub fn new(algorithm: HashAlgorithm) -> Self {
        Self {
            algorithm,
            seed: VLLM_DEFAULT_SEED.to_owned(),
            block_size: None,
        }
    }
}

/// Blocks the hash check looked at, by outcome; every counter saturates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct HashCheckCounts {
    /// Blocks whose published name the check reproduced.
    pub matched: u64,
    /// Blocks whose published name differs from the recomputed one.
    pub mismatched: u64,
    /// Blocks the check could not recompute from the event.
    pub unverifiable: u64,
}

impl HashCheckCounts {
    /// Adds `other` to these counts.
    pub fn add(&mut self, other: &HashCheckCounts) {
        self.matched = self.matched.saturating_add(other.matched);
        self.mismatched = self.mismatched.saturating_add(other.mismatched);
        self.unverifiable = self.unverifiable.saturating_add(other.unverifiable);
    }
}

/// One batch's staged outcome for one publisher.
#[derive(Debug, Default)]
pub(crate) struct BatchCheck {
    names: BatchNames<Digest>,
    counts: HashCheckCounts,
}

/// The hash check's state in a feed.
#[derive(Debug, Clone)]
pub(crate) struct HashChecker {
    config: HashCheckConfig,
    none_hash: Digest,
    digests: ChainNames<Digest>,
    counts: HashMap<Worker, HashCheckCounts>,
    /// The counts of publishers forgotten since, summed.
    retired: HashCheckCounts,
    cbor: CborWriter,
}

impl HashChecker {
    pub(crate) fn new(config: HashCheckConfig) -> Self {
        let none_hash = match config.algorithm {
            HashAlgorithm::VllmXxhashCbor => CborHash::Xxh3_128.none_hash(&config.seed),
            _ => CborHash::Sha256.none_hash(&config.seed),
        };
        Self {
            config,
            none_hash,
            digests: ChainNames::default(),
            counts: HashMap::new(),
            retired: HashCheckCounts::default(),
            cbor: CborWriter::new(),
        }
    }

    pub(crate) fn config(&self) -> &HashCheckConfig {
        &self.config
    }

    /// Looks at one decoded event of `worker`'s batch; stores of another KV-cache group than
    /// `group` (the one the feed indexes; `None`: every group) are not checked.
    pub(crate) fn observe(
        &mut self,
        worker: Worker,
        batch: &mut BatchCheck,
        event: &EngineEvent,
        group: Option<u32>,
    ) {
        match event {
            EngineEvent::BlockStored(stored)
                if group.is_some() && stored.group_idx.is_some() && stored.group_idx != group => {}
            EngineEvent::BlockStored(stored) => {
                let counts = self.check_store(worker, batch, stored);
                batch.counts.add(&counts);
            }
            EngineEvent::BlockRemoved(removed) => {
                for &name in &removed.block_hashes {
                    batch.names.remove(name);
                }
            }
            EngineEvent::AllBlocksCleared => batch.names.clear(),
            EngineEvent::Unknown { .. } => {}
        }
    }

    fn check_store(
        &mut self,
        worker: Worker,
        batch: &mut BatchCheck,
        stored: &BlockStored,
    ) -> HashCheckCounts {
        let n = stored.block_hashes.len() as u64;
        let unverifiable = |from: u64| HashCheckCounts {
            unverifiable: n - from,
            ..HashCheckCounts::default()
        };
        let published_size = stored.block_size as usize;
        let size = self
            .config
            .block_size
            .map_or(published_size, |b| b as usize);
        if stored.token_ids.is_empty()
            || size == 0
            || published_size.checked_mul(n as usize) != Some(stored.token_ids.len())
            || stored
                .lookahead_token_ids
                .iter()
                .flatten()
                .any(|t| !t.is_empty())
            || stored.lora_id.is_some()
            || stored.lora_name.is_some()
        {
            return unverifiable(0);
        }
        let mut prev = match (stored.parent_block_hash, self.config.algorithm) {
            (Some(parent), _) => match self.digests.get(worker, &batch.names, parent) {
                Some(digest) => Some(digest),
                None => return unverifiable(0),
            },
            (None, HashAlgorithm::SglangSha256) => {
                stored.cache_salt.as_deref().map(sglang::salt_seed)
            }
            (None, _) => Some(self.none_hash),
        };
        let hash = match self.config.algorithm {
            HashAlgorithm::VllmSha256Cbor => Some(CborHash::Sha256),
            HashAlgorithm::VllmXxhashCbor => Some(CborHash::Xxh3_128),
            HashAlgorithm::SglangSha256 => None,
        };
        let mut counts = HashCheckCounts::default();
        let mut chunks = stored.token_ids.chunks_exact(size);
        for (i, &name) in stored.block_hashes.iter().enumerate() {
            let Some(tokens) = chunks.next() else {
                // The tokens do not fill this block at the router's block size.
                counts.mismatched += n - i as u64;
                break;
            };
            let (digest, published) = match hash {
                None => {
                    let digest = sglang::page(prev.as_ref(), tokens);
                    (digest, digest.first_u64())
                }
                Some(hash) => {
                    let extras = stored
                        .extra_keys
                        .as_ref()
                        .and_then(|keys| keys.get(i))
                        .and_then(|keys| keys.as_deref());
                    let parent = prev.as_ref().unwrap_or(&self.none_hash);
                    let lora = stored.lora_name.as_deref();
                    match hash.block(&mut self.cbor, parent, tokens, extras, lora) {
                        Some(digest) => (digest, digest.last_u64()),
                        None => {
                            counts.unverifiable += n - i as u64;
                            break;
                        }
                    }
                }
            };
            if published == name {
                counts.matched += 1;
                batch.names.insert(name, digest);
            } else {
                counts.mismatched += 1;
            }
            prev = Some(digest);
        }
        counts
    }

    /// Commits a batch of `worker`, after the worker was cleared if `clear_first`; its
    /// outcomes are counted only if `counted`.
    pub(crate) fn commit(
        &mut self,
        worker: Worker,
        batch: BatchCheck,
        clear_first: bool,
        counted: bool,
    ) {
        self.digests.commit(worker, batch.names, clear_first);
        if counted && batch.counts != HashCheckCounts::default() {
            self.counts.entry(worker).or_default().add(&batch.counts);
        }
    }

    /// The counts of one publisher (zero when the check saw none of its blocks).
    pub(crate) fn counts(&self, worker: Worker) -> HashCheckCounts {
        self.counts.get(&worker).copied().unwrap_or_default()
    }

    /// Every publisher's counts, summed (forgotten publishers included).
    pub(crate) fn totals(&self) -> HashCheckCounts {
        let mut total = self.retired;
        for counts in self.counts.values() {
            total.add(counts);
        }
        total
    }

    /// Every publisher with counts, and its counts.
    pub(crate) fn per_worker(&self) -> Vec<(Worker, HashCheckCounts)> {
        let mut all: Vec<_> = self.counts.iter().map(|(&w, &c)| (w, c)).collect();
        all.sort_by_key(|(w, _)| (w.worker_id, w.dp_rank));
        all
    }

    /// Forgets one publisher: its digests, and its counts (kept in the totals).
    pub(crate) fn forget(&mut self, worker: Worker) {
        self.digests.forget(worker);
        if let Some(counts) = self.counts.remove(&worker) {
            self.retired.add(&counts);
        }
    }

    /// Forgets every dp rank of a worker, as [`HashChecker::forget`].
    pub(crate) fn forget_worker(&mut self, worker_id: u64) {
        self.digests.forget_worker(worker_id);
        let retired = &mut self.retired;
        self.counts.retain(|w, counts| {
            let keep = w.worker_id != worker_id;
            if !keep {
                retired.add(counts);
            }
            keep
        });
    }

    /// Forgets every digest (after a restore: the chains continue from blocks not seen).
    pub(crate) fn forget_all(&mut self) {
        self.digests.clear();
    }
}
