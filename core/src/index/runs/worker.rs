//! One worker's record of its blocks, and the writes that change it: store a chain, drop a
//! name, clear.
//!
//! Whether the worker holds a block is its bit in the block's run; the worker keeps one map
//! entry per name, and only blocks held under several names ("twins") need a count of their
//! own.

use std::collections::hash_map::Entry as MapEntry;
use std::sync::Arc;

use rustc_hash::FxHashMap;

use super::run::{Run, Spot};
use super::RunsIndex;
use crate::index::tiers::WorkerTiers;
use crate::model::{chain_fits, Block, Outcome, RejectReason, Tier};

/// One worker's names and tiers.
#[derive(Default)]
pub(crate) struct WorkerState {
    pub(super) names: FxHashMap<u64, Spot>,
    /// Held blocks (by [`Spot::key`]) with two or more names -> their names minus one.
    pub(super) extra_names: FxHashMap<u64, u32>,
    /// Which names are off the device alone (keys: [`Spot::key`]).
    pub(super) tiers: WorkerTiers,
}

impl RunsIndex {
    /// See [`crate::index::worker_blocks::WorkerBlocks::store`].
    pub(super) fn store_chain(
        &self,
        state: &mut WorkerState,
        slot: u32,
        parent: Option<u64>,
        blocks: &[Block],
        tier: Tier,
    ) -> Outcome {
        let (mut run, mut hang) = match parent {
            None => (Arc::clone(&self.root), 0),
            Some(name) => match state.names.get(&name) {
                Some(spot) => (Arc::clone(&spot.run), spot.offset + 1),
                None => return Outcome::Rejected(RejectReason::ParentNotFound),
            },
        };
        if !chain_fits(u64::from(run.start) + u64::from(hang), blocks.len()) {
            return Outcome::Rejected(RejectReason::PositionOverflow);
        }
        let mut touched = false;
        for block in blocks {
            if let Some(named) = state.names.get(&block.seq_hash) {
                let existing = run.state.read().next(&run, hang, block.local_hash);
                if existing.is_some_and(|e| e.same(named)) {
                    // Same name, same block: it only gains the tier.
                    let key = named.key();
                    (run, hang) = (Arc::clone(&named.run), named.offset + 1);
                    state
                        .tiers
                        .stored(block.seq_hash, key, tier, true, &self.registry.tiers);
                    continue;
                }
            }
            // Attach before dropping what the name meant: this keeps `run` linked.
            let (spot, newly) = self.attach(&run, hang, block.local_hash, slot, &mut touched);
            (run, hang) = (Arc::clone(&spot.run), spot.offset + 1);
            self.add_name(state, slot, block.seq_hash, spot, newly, tier);
        }
        Outcome::Applied {
            unknown_removals: 0,
        }
    }

    /// Gives `name` to the block at `spot` on `tier` (a new name, or one that named another
    /// block); `newly` says whether the worker held the block under no other name before.
    pub(super) fn add_name(
        &self,
        state: &mut WorkerState,
        slot: u32,
        name: u64,
        spot: Spot,
        newly: bool,
        tier: Tier,
    ) {
        let key = spot.key();
        if !newly {
            *state.extra_names.entry(key).or_insert(0) += 1;
        }
        match state.names.insert(name, spot) {
            Some(old) => {
                state.tiers.forget(name, &self.registry.tiers);
                self.release(state, slot, &old);
            }
            None => self.registry.add_blocks(1),
        }
        state
            .tiers
            .stored(name, key, tier, false, &self.registry.tiers);
    }

    /// Drops one name's hold on the block at `spot`.
    fn release(&self, state: &mut WorkerState, slot: u32, spot: &Spot) {
        if let MapEntry::Occupied(mut extra) = state.extra_names.entry(spot.key()) {
            *extra.get_mut() -= 1;
            if *extra.get() == 0 {
                extra.remove();
            }
            return; // another name still holds it
        }
        self.detach(spot, slot);
    }

    /// See [`crate::index::worker_blocks::WorkerBlocks::remove_name`].
    pub(super) fn remove_one(&self, state: &mut WorkerState, slot: u32, name: u64) -> bool {
        let Some(spot) = state.names.remove(&name) else {
            return false;
        };
        state.tiers.forget(name, &self.registry.tiers);
        self.registry.add_blocks(-1);
        self.release(state, slot, &spot);
        true
    }

    /// See [`crate::index::worker_blocks::WorkerBlocks::clear`]: one pass per run held.
    pub(super) fn clear_all(&self, state: &mut WorkerState, slot: u32) {
        self.registry.add_blocks(-(state.names.len() as i64));
        let mut runs: FxHashMap<u64, Arc<Run>> = FxHashMap::default();
        for spot in state.names.values() {
            runs.entry(spot.run.id)
                .or_insert_with(|| Arc::clone(&spot.run));
        }
        state.tiers.clear(&self.registry.tiers);
        *state = WorkerState::default();
        // Deepest first, so that a run is unlinked right after the last run below it.
        let mut runs: Vec<Arc<Run>> = runs.into_values().collect();
        runs.sort_unstable_by_key(|run| std::cmp::Reverse(run.start));
        for run in &runs {
            self.detach_run(run, slot);
        }
    }
}
