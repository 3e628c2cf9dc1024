//! A feed's optional per-event steps besides the conversion: the hash check
//! ([`super::hash_check`]) and the llm-d keys scheme ([`super::llmd_keys`]). Each batch
//! stages its changes in a [`BatchHooks`]; the feed commits them once the batch applied.

use super::batch::EngineEvent;
use super::chain_names::BatchNames;
use super::feed::EngineFeed;
use super::hash_check::{BatchCheck, HashCheckConfig, HashCheckCounts, HashChecker};
use super::llmd_keys::{LlmdKeysConfig, LlmdScheme, Plan};
use super::to_index::{ApplyOptions, Conversion};
use crate::model::Worker;

/// The optional steps of one feed.
#[derive(Debug, Clone, Default)]
pub(crate) struct FeedHooks {
    pub(crate) check: Option<HashChecker>,
    pub(crate) llmd: Option<LlmdScheme>,
}

/// One batch's staged changes.
#[derive(Debug, Default)]
pub(crate) struct BatchHooks {
    check: BatchCheck,
    keys: BatchNames<u64>,
}

impl FeedHooks {
    /// Whether any step is on (otherwise the feed converts as without hooks).
    pub(crate) fn any(&self) -> bool {
        self.check.is_some() || self.llmd.is_some()
    }

    /// Whether a step reads every field of an event (the hash check reads every extra key).
    pub(crate) fn needs_full_events(&self) -> bool {
        self.check.is_some()
    }

    pub(crate) fn set_hash_check(&mut self, config: Option<HashCheckConfig>) {
        self.check = config.map(HashChecker::new);
    }

    pub(crate) fn set_llmd_keys(&mut self, config: Option<LlmdKeysConfig>) {
        self.llmd = config.map(LlmdScheme::new);
    }

    /// Converts one event, checking and re-keying it as configured.
    pub(crate) fn convert(
        &mut self,
        batch: &mut BatchHooks,
        event: EngineEvent,
        conversion: &mut Conversion,
        worker: Worker,
        first_event_id: u64,
        options: &ApplyOptions,
    ) {
        if let Some(check) = &mut self.check {
            check.observe(worker, &mut batch.check, &event, options.group);
        }
        let plan = match &self.llmd {
            Some(llmd) => llmd.plan(worker, &mut batch.keys, &event),
            None => Plan::Keep,
        };
        let before = conversion.events.len();
        conversion.push_owned(event, worker, first_event_id, options);
        if let Some(llmd) = &self.llmd {
            llmd.finish(&mut batch.keys, plan, conversion, before);
        }
    }

    /// Commits a decoded batch of `worker` (after a clear of the worker if `clear_first`);
    /// the hash check counts it only if `counted` (it was applied now, not skipped).
    pub(crate) fn commit(
        &mut self,
        worker: Worker,
        batch: BatchHooks,
        clear_first: bool,
        counted: bool,
    ) {
        if let Some(check) = &mut self.check {
            check.commit(worker, batch.check, clear_first, counted);
        }
        if let Some(llmd) = &mut self.llmd {
            llmd.commit(worker, batch.keys, clear_first);
        }
    }

    pub(crate) fn forget(&mut self, worker: Worker) {
        if let Some(check) = &mut self.check {
            check.forget(worker);
        }
        if let Some(llmd) = &mut self.llmd {
            llmd.forget(worker);
        }
    }

    pub(crate) fn forget_worker(&mut self, worker_id: u64) {
        if let Some(check) = &mut self.check {
            check.forget_worker(worker_id);
        }
        if let Some(llmd) = &mut self.llmd {
            llmd.forget_worker(worker_id);
        }
    }

    /// After a restore: the chains continue from blocks this feed never saw.
    pub(crate) fn forget_chains(&mut self) {
        if let Some(check) = &mut self.check {
            check.forget_all();
        }
        if let Some(llmd) = &mut self.llmd {
            llmd.forget_all();
        }
    }
}

/// The hash check and the llm-d keys scheme of a feed (both off by default).
impl EngineFeed {
    /// Turns the hash check on (`Some`, forgetting any earlier check's state and counts) or
    /// off (`None`).
    pub fn set_hash_check(&mut self, config: Option<HashCheckConfig>) {
        self.hooks.set_hash_check(config);
    }

    /// The hash check's configuration, when it is on.
    pub fn hash_check(&self) -> Option<&HashCheckConfig> {
        self.hooks.check.as_ref().map(HashChecker::config)
    }

    /// The hash check's counts for one publisher (`None` when the check is off; zeros for a
    /// publisher it saw no store of).
    pub fn hash_check_counts(&self, worker: Worker) -> Option<HashCheckCounts> {
        self.hooks.check.as_ref().map(|c| c.counts(worker))
    }

    /// The hash check's counts summed over every publisher, forgotten ones included
    /// (`None` when the check is off).
    pub fn hash_check_totals(&self) -> Option<HashCheckCounts> {
        self.hooks.check.as_ref().map(HashChecker::totals)
    }

    /// Every publisher the hash check holds counts for, ordered by worker id and dp rank.
    pub fn hash_check_workers(&self) -> Vec<(Worker, HashCheckCounts)> {
        self.hooks
            .check
            .as_ref()
            .map_or_else(Vec::new, HashChecker::per_worker)
    }

    /// Indexes stores under llm-d's request keys (`Some`) or kvidx's local hashes (`None`,
    /// the default). Switching forgets the keys of the blocks seen so far: switch before
    /// the first batch.
    pub fn set_llmd_keys(&mut self, config: Option<LlmdKeysConfig>) {
        self.hooks.set_llmd_keys(config);
    }

    /// The llm-d keys scheme's configuration, when it is on.
    pub fn llmd_keys(&self) -> Option<&LlmdKeysConfig> {
        self.hooks.llmd.as_ref().map(LlmdScheme::config)
    }
}
