//! One worker's record of its blocks, and the writes that change it: store a chain, drop a
//! name, clear.
//!
//! Whether the worker holds a block is its bit in the block's run; the worker keeps one map
//! entry per name, and only blocks held under several names ("twins") need a count of their
//! own.

use std::collections::hash_map::Entry as MapEntry;
use std::sync::Arc;

use rustc_hash::FxHashMap;

use super::run::{key, place, Run, Spot};
use super::RunsIndex;
use crate::index::tiers::WorkerTiers;
use crate::model::{chain_fits, Block, Outcome, RejectReason, Tier};

/// One worker's names and tiers.
#[derive(Default)]
pub(crate) struct WorkerState {
    /// Name -> the key ([`Spot::key`]) of the block it names: eight bytes a name, and no
    /// reference count moved per block.
    pub(super) names: FxHashMap<u64, u64>,
    /// The runs the worker has named blocks in, by id (keeping each alive and reachable from
    /// a key), with how many of its names are in each.
    pub(super) runs: FxHashMap<u64, HeldRun>,
    /// Held blocks (by [`Spot::key`]) with two or more names -> their names minus one.
    pub(super) extra_names: FxHashMap<u64, u32>,
    /// Which names are off the device alone (keys: [`Spot::key`]).
    pub(super) tiers: WorkerTiers,
}

/// A run a worker has named blocks in.
pub(super) struct HeldRun {
    pub(super) run: Arc<Run>,
    names: u32,
}

impl WorkerState {
    /// The block a key of one of the worker's names stands for.
    pub(super) fn spot(&self, key: u64) -> Spot {
        let (id, offset) = place(key);
        Spot {
            run: Arc::clone(&self.runs[&id].run),
            offset,
        }
    }
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
                Some(&key) => {
                    let spot = state.spot(key);
                    (spot.run, spot.offset + 1)
                }
                None => return Outcome::Rejected(RejectReason::ParentNotFound),
            },
        };
        if !chain_fits(u64::from(run.start) + u64::from(hang), blocks.len()) {
            return Outcome::Rejected(RejectReason::PositionOverflow);
        }
        let mut touched = false;
        for block in blocks {
            if let Some(&named) = state.names.get(&block.seq_hash) {
                let existing = run.state.read().next_key(&run, hang, block.local_hash);
                if existing == Some(named) {
                    // Same name, same block: it only gains the tier.
                    let (id, offset) = place(named);
                    if id != run.id {
                        run = Arc::clone(&state.runs[&id].run);
                    }
                    hang = offset + 1;
                    state
                        .tiers
                        .stored(block.seq_hash, named, tier, true, &self.registry.tiers);
                    continue;
                }
            }
            // Attach before dropping what the name meant: this keeps `run` linked.
            let (moved, offset, newly) =
                self.attach(&run, hang, block.local_hash, slot, &mut touched);
            if let Some(moved) = moved {
                run = moved;
            }
            hang = offset + 1;
            self.add_name(state, slot, block.seq_hash, &run, offset, newly, tier);
        }
        Outcome::Applied {
            unknown_removals: 0,
        }
    }

    /// Gives `name` to block `offset` of `run` on `tier` (a new name, or one that named
    /// another block); `newly` says whether the worker held the block under no other name
    /// before.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn add_name(
        &self,
        state: &mut WorkerState,
        slot: u32,
        name: u64,
        run: &Arc<Run>,
        offset: u32,
        newly: bool,
        tier: Tier,
    ) {
        let key = key(run.id, offset);
        if !newly {
            *state.extra_names.entry(key).or_insert(0) += 1;
        }
        // Counted before the name's old block is released: that one may be in this run.
        state
            .runs
            .entry(run.id)
            .or_insert_with(|| HeldRun {
                run: Arc::clone(run),
                names: 0,
            })
            .names += 1;
        match state.names.insert(name, key) {
            Some(old) => {
                state.tiers.forget(name, &self.registry.tiers);
                self.release(state, slot, old);
            }
            None => self.registry.add_blocks(1),
        }
        state
            .tiers
            .stored(name, key, tier, false, &self.registry.tiers);
    }

    /// Drops one name's hold on the block with key `key`.
    fn release(&self, state: &mut WorkerState, slot: u32, key: u64) {
        let (id, offset) = place(key);
        let MapEntry::Occupied(mut held) = state.runs.entry(id) else {
            unreachable!("a named block's run is held");
        };
        held.get_mut().names -= 1;
        match state.extra_names.entry(key) {
            // Another name still holds the block.
            MapEntry::Occupied(mut extra) => {
                *extra.get_mut() -= 1;
                if *extra.get() == 0 {
                    extra.remove();
                }
            }
            MapEntry::Vacant(_) => self.detach(&held.get().run, offset, slot),
        }
        if held.get().names == 0 {
            held.remove();
        }
    }

    /// See [`crate::index::worker_blocks::WorkerBlocks::remove_name`].
    pub(super) fn remove_one(&self, state: &mut WorkerState, slot: u32, name: u64) -> bool {
        let Some(key) = state.names.remove(&name) else {
            return false;
        };
        state.tiers.forget(name, &self.registry.tiers);
        self.registry.add_blocks(-1);
        self.release(state, slot, key);
        true
    }

    /// See [`crate::index::worker_blocks::WorkerBlocks::clear`]: one pass per run held.
    pub(super) fn clear_all(&self, state: &mut WorkerState, slot: u32) {
        self.registry.add_blocks(-(state.names.len() as i64));
        state.tiers.clear(&self.registry.tiers);
        let held = std::mem::take(state);
        // Deepest first, so that a run is unlinked right after the last run below it.
        let mut runs: Vec<Arc<Run>> = held.runs.into_values().map(|h| h.run).collect();
        runs.sort_unstable_by_key(|run| std::cmp::Reverse(run.start));
        for run in &runs {
            self.detach_run(run, slot);
        }
    }
}
