//! The llm-d keys scheme of a feed: stores indexed under llm-d's request keys
//! ([`crate::llmd`]) instead of kvidx's local hashes, so a router built on llm-d's token
//! processor queries with its own keys. A store's first block continues the key of its
//! parent (kept per publisher by engine name, as the index keeps names) or, without a
//! parent, the root key of its LoRA adapter's name or of the feed's model name. A store
//! that llm-d's keys cannot express (a cache salt, multimodal items, prompt embeddings,
//! lookahead tokens, a `lora_id` without a name) or whose parent the feed never saw is
//! skipped and counted `unhashable`.

use super::batch::{BlockStored, EngineEvent, ExtraKey, Medium};
use super::chain_names::{BatchNames, ChainNames};
use super::to_index::Conversion;
use crate::llmd;
use crate::model::{EventData, Worker};

/// The llm-d scheme's parameters, as configured in llm-d's token processor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LlmdKeysConfig {
    /// llm-d's `HashSeed` (align it with the engines' `PYTHONHASHSEED`; llm-d's default "").
    pub seed: String,
    /// The model name a router passes with requests without a LoRA adapter.
    pub model: String,
}

/// What one engine event needs once converted.
pub(crate) enum Plan {
    /// Nothing to change.
    Keep,
    /// The store's blocks take these keys.
    Keys(Vec<u64>),
    /// The store cannot be keyed: drop it if it was converted.
    Unhashable,
}

/// The scheme's state in a feed.
#[derive(Debug, Clone)]
pub(crate) struct LlmdScheme {
    config: LlmdKeysConfig,
    keys: ChainNames<u64>,
}

impl LlmdScheme {
    pub(crate) fn new(config: LlmdKeysConfig) -> Self {
        Self {
            config,
            keys: ChainNames::default(),
        }
    }

    pub(crate) fn config(&self) -> &LlmdKeysConfig {
        &self.config
    }

    /// Decides what `event` of `worker` becomes, staging removals and clears.
    pub(crate) fn plan(
        &self,
        worker: Worker,
        staged: &mut BatchNames<u64>,
        event: &EngineEvent,
    ) -> Plan {
        match event {
            EngineEvent::BlockStored(stored) => self.store_keys(worker, staged, stored),
            EngineEvent::BlockRemoved(removed) => {
                // A copy leaving another tier leaves the block held.
                if matches!(removed.medium, None | Some(Medium::Gpu)) {
                    for &name in &removed.block_hashes {
                        staged.remove(name);
                    }
                }
                Plan::Keep
            }
            EngineEvent::AllBlocksCleared => {
                staged.clear();
                Plan::Keep
            }
            EngineEvent::Unknown { .. } => Plan::Keep,
        }
    }

    fn store_keys(&self, worker: Worker, staged: &BatchNames<u64>, stored: &BlockStored) -> Plan {
        let size = stored.block_size as usize;
        let n = stored.block_hashes.len();
        let lora = stored.lora_name.as_deref();
        let only_lora =
            |key: &ExtraKey| matches!(key, ExtraKey::Text(t) if Some(t.as_str()) == lora);
        let extras = stored.extra_keys.iter().flatten().flatten().flatten();
        if n == 0
            || size == 0
            || size.checked_mul(n) != Some(stored.token_ids.len())
            || stored.lora_id.is_some() && lora.is_none()
            || stored.cache_salt.is_some()
            || stored
                .lookahead_token_ids
                .iter()
                .flatten()
                .any(|t| !t.is_empty())
            || extras.clone().any(|key| !only_lora(key))
        {
            return Plan::Unhashable;
        }
        let parent = match stored.parent_block_hash {
            None => llmd::root_key(&self.config.seed, lora.unwrap_or(&self.config.model)),
            Some(name) => match self.keys.get(worker, staged, name) {
                Some(key) => key,
                None => return Plan::Unhashable,
            },
        };
        Plan::Keys(llmd::block_keys(parent, &stored.token_ids, size))
    }

    /// Applies `plan` to the index events converted from its event (those after `before`).
    pub(crate) fn finish(
        &self,
        staged: &mut BatchNames<u64>,
        plan: Plan,
        conversion: &mut Conversion,
        before: usize,
    ) {
        if conversion.events.len() == before {
            return; // filtered or skipped by the conversion
        }
        match plan {
            Plan::Keep => {}
            Plan::Unhashable => {
                conversion.events.truncate(before);
                conversion.skipped.unhashable = conversion.skipped.unhashable.saturating_add(1);
            }
            Plan::Keys(keys) => {
                if let Some(EventData::Stored { blocks, .. }) =
                    conversion.events.last_mut().map(|e| &mut e.data)
                {
                    for (block, key) in blocks.iter_mut().zip(keys) {
                        block.local_hash = key;
                        staged.insert(block.seq_hash, key);
                    }
                }
            }
        }
    }

    pub(crate) fn commit(&mut self, worker: Worker, staged: BatchNames<u64>, clear_first: bool) {
        self.keys.commit(worker, staged, clear_first);
    }

    pub(crate) fn forget(&mut self, worker: Worker) {
        self.keys.forget(worker);
    }

    pub(crate) fn forget_worker(&mut self, worker_id: u64) {
        self.keys.forget_worker(worker_id);
    }

    pub(crate) fn forget_all(&mut self) {
        self.keys.clear();
    }
}
