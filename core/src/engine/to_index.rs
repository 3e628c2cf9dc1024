//! Turns decoded engine events ([`DecodedBatch`]) into index [`Event`]s: local hashes from the published tokens
//! (hashing contract, LoRA seed when the event names an adapter, multimodal keys and cache
//! salt folded in as docs/contract.md section 3.1 says), engine hashes as the
//! opaque sequence names, and a filter for what a prefix-routing index should hold.

use crate::hashing::{local_hash_with_seed, lora_seed, HASH_SEED};
use crate::model::{Block, Event, Tier, Worker};
use crate::namespace::{fold, BlockKey, KeyDigest};

use super::batch::{BlockStored, DecodedBatch, EngineEvent, Medium};
use super::store_keys::StoreKeys;

/// Which `medium` values are indexed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MediaFilter {
    /// Only the GPU cache (`"GPU"`, or no medium: engines before offloading published none).
    #[default]
    GpuOnly,
    /// Every medium, each block on its storage tier ([`Medium::tier`]): plain lookups count
    /// offloaded blocks as hits, tiered lookups tell the tiers apart.
    All,
}

/// What to do with stores whose engine hash covers more than the block's tokens and the LoRA
/// name (multimodal items, cache salt, prompt embeds, lookahead tokens).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ExtrasPolicy {
    /// Index them under their namespace (docs/contract.md section 3.1): multimodal keys fold
    /// into the blocks they overlap, a cache salt into the request's first block, so only a
    /// query with the same salt and spans ([`crate::namespace::hash_request`]) reaches them.
    /// Stores with keys no query can name (prompt-embeds digests, lookahead tokens, keys of
    /// unknown shape or not aligned with the blocks) are skipped as unhashable.
    #[default]
    Namespaced,
    /// Skip every store with such keys (the namespaced ones included).
    Skip,
    /// Index them by their tokens alone (for deployments whose queries ignore extras too).
    HashTokensOnly,
}

/// How decoded events are filtered and hashed before they reach the index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ApplyOptions {
    /// Which media are indexed.
    pub media: MediaFilter,
    /// Only events of this KV-cache group (or with no group) are indexed; `None`: every group.
    pub group: Option<u32>,
    /// Stores whose hashes include extra keys.
    pub extras: ExtrasPolicy,
    /// The tier of a medium this decoder does not know (with [`MediaFilter::All`]).
    pub unknown_medium: Tier,
}

impl Default for ApplyOptions {
    /// GPU only, group 0, stores with extra keys under their namespace; unknown media on the
    /// external tier.
    fn default() -> Self {
        Self {
            media: MediaFilter::GpuOnly,
            group: Some(0),
            extras: ExtrasPolicy::Namespaced,
            unknown_medium: Tier::External,
        }
    }
}

/// Engine events that did not become index events, by reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SkipCounts {
    /// Events with a tag this decoder does not know.
    pub unknown_tag: u64,
    /// Events filtered out by medium or KV-cache group.
    pub filtered: u64,
    /// Stores whose local hashes cannot be computed: no tokens, `len(token_ids) !=
    /// block_size * len(block_hashes)`, no blocks, a LoRA id without a name, extra keys
    /// under [`ExtrasPolicy::Skip`], or keys no query can name under
    /// [`ExtrasPolicy::Namespaced`].
    pub unhashable: u64,
}

impl SkipCounts {
    /// All skipped events (saturating).
    pub fn total(&self) -> u64 {
        self.unknown_tag
            .saturating_add(self.filtered)
            .saturating_add(self.unhashable)
    }

    /// Adds another count to this one (saturating).
    pub fn add(&mut self, other: &SkipCounts) {
        self.unknown_tag = self.unknown_tag.saturating_add(other.unknown_tag);
        self.filtered = self.filtered.saturating_add(other.filtered);
        self.unhashable = self.unhashable.saturating_add(other.unhashable);
    }
}

/// The index events of a batch and what was skipped.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Conversion {
    /// Events for the index, in batch order, with consecutive event ids.
    pub events: Vec<Event>,
    /// Engine events left out.
    pub skipped: SkipCounts,
}

/// Converts a decoded batch into index events for `worker`, numbering them from
/// `first_event_id`.
pub fn to_events(
    batch: &DecodedBatch,
    worker: Worker,
    first_event_id: u64,
    options: &ApplyOptions,
) -> Conversion {
    let mut out = Conversion::default();
    for event in &batch.events {
        out.push(event, worker, first_event_id, options);
    }
    out
}

impl Conversion {
    /// Converts one engine event for `worker` and appends the result (or counts the skip);
    /// index events are numbered from `first_event_id` in the order they are appended.
    pub fn push(
        &mut self,
        event: &EngineEvent,
        worker: Worker,
        first_event_id: u64,
        options: &ApplyOptions,
    ) {
        let event_id = first_event_id.wrapping_add(self.events.len() as u64);
        let skipped = &mut self.skipped;
        match event {
            EngineEvent::BlockStored(stored) => {
                if !selected(stored.medium.as_ref(), stored.group_idx, options) {
                    skipped.filtered = skipped.filtered.saturating_add(1);
                } else if let Some(blocks) = local_blocks(stored, options) {
                    let parent = stored.parent_block_hash;
                    let tier = stored_tier(stored.medium.as_ref(), options);
                    self.events
                        .push(Event::stored_on(worker, event_id, parent, blocks, tier));
                } else {
                    skipped.unhashable = skipped.unhashable.saturating_add(1);
                }
            }
            EngineEvent::BlockRemoved(removed) => {
                if selected(removed.medium.as_ref(), removed.group_idx, options) {
                    let hashes = removed.block_hashes.clone();
                    let medium = removed.medium.as_ref();
                    self.events
                        .push(removal(worker, event_id, hashes, medium, options));
                } else {
                    skipped.filtered = skipped.filtered.saturating_add(1);
                }
            }
            EngineEvent::AllBlocksCleared => self.events.push(Event::cleared(worker, event_id)),
            EngineEvent::Unknown { .. } => {
                skipped.unknown_tag = skipped.unknown_tag.saturating_add(1)
            }
        }
    }

    /// Like [`Conversion::push`] for an event the caller gives away: a removal's hashes are
    /// moved into the index event instead of copied.
    pub fn push_owned(
        &mut self,
        event: EngineEvent,
        worker: Worker,
        first_event_id: u64,
        options: &ApplyOptions,
    ) {
        match event {
            EngineEvent::BlockRemoved(removed)
                if selected(removed.medium.as_ref(), removed.group_idx, options) =>
            {
                let event_id = first_event_id.wrapping_add(self.events.len() as u64);
                let hashes = removed.block_hashes;
                let medium = removed.medium.as_ref();
                self.events
                    .push(removal(worker, event_id, hashes, medium, options));
            }
            other => self.push(&other, worker, first_event_id, options),
        }
    }
}

/// The tier a store lands on: its medium's, or the device when it names none (engines
/// published no medium before they offloaded).
fn stored_tier(medium: Option<&Medium>, options: &ApplyOptions) -> Tier {
    medium.map_or(Tier::Device, |m| m.tier(options.unknown_medium))
}

/// A removal from the named medium's tier, or from every tier when it names none.
fn removal(
    worker: Worker,
    event_id: u64,
    hashes: Vec<u64>,
    medium: Option<&Medium>,
    options: &ApplyOptions,
) -> Event {
    match medium {
        None => Event::removed(worker, event_id, hashes),
        Some(m) => Event::removed_from(worker, event_id, hashes, m.tier(options.unknown_medium)),
    }
}

fn selected(medium: Option<&Medium>, group: Option<u32>, options: &ApplyOptions) -> bool {
    let medium_ok = match options.media {
        MediaFilter::All => true,
        MediaFilter::GpuOnly => matches!(medium, None | Some(Medium::Gpu)),
    };
    let group_ok = match (options.group, group) {
        (None, _) | (_, None) => true,
        (Some(want), Some(got)) => want == got,
    };
    medium_ok && group_ok
}

/// The `(local, engine)` blocks of a store, or `None` when they cannot be hashed.
fn local_blocks(stored: &BlockStored, options: &ApplyOptions) -> Option<Vec<Block>> {
    let n = stored.block_hashes.len();
    let size = stored.block_size as usize;
    if n == 0 || size == 0 || stored.token_ids.is_empty() {
        return None;
    }
    if size.checked_mul(n) != Some(stored.token_ids.len()) {
        return None;
    }
    if stored.lora_id.is_some() && stored.lora_name.is_none() {
        return None;
    }
    let derived;
    let keys = match (&stored.keys, &stored.extra_keys) {
        (Some(keys), _) => keys,
        (None, Some(list)) => {
            derived = StoreKeys::of_extra_keys(list, n, stored.lora_name.as_deref());
            &derived
        }
        (None, None) => &NO_KEYS,
    };
    let lookahead = stored
        .lookahead_token_ids
        .iter()
        .flatten()
        .any(|tokens| !tokens.is_empty());
    let salt = stored.cache_salt.as_deref().filter(|salt| !salt.is_empty());
    let namespaced = match options.extras {
        ExtrasPolicy::Skip if keys.any_keys || lookahead || stored.cache_salt.is_some() => {
            return None
        }
        ExtrasPolicy::Namespaced if keys.unfoldable || lookahead => return None,
        ExtrasPolicy::Namespaced => true,
        ExtrasPolicy::Skip | ExtrasPolicy::HashTokensOnly => false,
    };
    let seed = stored.lora_name.as_deref().map_or(HASH_SEED, lora_seed);
    // A salt published with every store of a request (SGLang) folds into its first block
    // only: later stores continue a parent whose identity already carries it.
    let first_salt = salt.filter(|_| namespaced && stored.parent_block_hash.is_none());
    // Nothing to fold (no key digest, no salt): the token hashes as they are.
    let folds = first_salt.is_some() || (namespaced && !keys.digests.is_empty());
    // One exactly sized vector: no intermediate list of local hashes.
    Some(
        stored
            .token_ids
            .chunks_exact(size)
            .zip(&stored.block_hashes)
            .enumerate()
            .map(|(i, (tokens, &engine))| {
                let local = local_hash_with_seed(tokens, seed);
                if !folds {
                    return Block::new(local, engine);
                }
                let mut digest = KeyDigest::resume(keys.digest(i));
                if let (0, Some(salt)) = (i, first_salt) {
                    digest.push(BlockKey::CacheSalt(salt.as_bytes()));
                }
                Block::new(fold(local, digest.value()), engine)
            })
            .collect(),
    )
}

/// The keys of a store that published none.
static NO_KEYS: StoreKeys = StoreKeys {
    digests: Vec::new(),
    any_keys: false,
    unfoldable: false,
};
