//! One worker's record of its blocks, and the writes that change it: store a chain, drop a
//! name, clear.
//!
//! Whether the worker holds a block is its bit in the block's run; the worker keeps one map
//! entry per name, and only blocks held under several names ("twins") need a count of their
//! own.

use std::collections::hash_map::Entry as MapEntry;
use std::sync::Arc;

use rustc_hash::FxHashMap;

use super::probe_map::{NameMap, ProbeMap};
use super::run::{key, place, Run, Spot};
use super::RunsIndex;
use crate::index::tiers::WorkerTiers;
use crate::model::{chain_fits, Block, Outcome, RejectReason, Tier};

/// The most blocks [`RunsIndex::store_in_run`] attaches under one lock of a run (the
/// width of its bitset of newly held blocks).
const SEGMENT: usize = 64;

/// How many names ahead of the one it checks a store asks for in the cache.
const PREFETCH_AHEAD: usize = 8;

/// One worker's names and tiers.
#[derive(Default)]
pub(crate) struct WorkerState {
    /// Name -> the key ([`Spot::key`]) of the block it names: eight bytes a name beside
    /// its eight, in one slot, and no reference count moved per block.
    pub(super) names: NameMap,
    /// The runs the worker has named blocks in, by id (keeping each alive and reachable from
    /// a key), with how many of its names are in each; every held id maps to `Some` (`None`
    /// only fills the map's empty slots).
    pub(super) runs: ProbeMap<Option<HeldRun>>,
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
    /// Counts `names` more of the worker's names in `run` (holding the run from the first).
    pub(super) fn count_names(&mut self, run: &Arc<Run>, names: u32) {
        match self.runs.get_mut(run.id) {
            Some(Some(held)) => held.names += names,
            _ => {
                let held = HeldRun {
                    run: Arc::clone(run),
                    names,
                };
                self.runs.insert(run.id, Some(held));
            }
        }
    }

    /// The run with id `id`, which one of the worker's names is in.
    fn held_run(&self, id: u64) -> &HeldRun {
        self.runs
            .get(id)
            .and_then(Option::as_ref)
            .expect("a named block's run is held")
    }

    /// The block a key of one of the worker's names stands for.
    pub(super) fn spot(&self, key: u64) -> Spot {
        let (id, offset) = place(key);
        Spot {
            run: Arc::clone(&self.held_run(id).run),
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
            Some(name) => match state.names.get(name) {
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
        let mut new_names = 0;
        let mut at = 0;
        while let Some(block) = blocks.get(at) {
            // The common case, blocks with new names that lie in `run` itself: all of them
            // under one lock of the run.
            let (taken, added) =
                self.store_in_run(state, slot, &run, hang, &blocks[at..], tier, &mut touched);
            if taken > 0 {
                at += taken;
                hang += taken as u32;
                new_names += added;
                continue;
            }
            at += 1;
            if let Some(&named) = state.names.get(block.seq_hash) {
                let existing = run.state.read().next_key(&run, hang, block.local_hash);
                if existing == Some(named) {
                    // Same name, same block: it only gains the tier.
                    let (id, offset) = place(named);
                    if id != run.id {
                        run = Arc::clone(&state.held_run(id).run);
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
            state.count_names(&run, 1);
            let added = self.add_name(state, slot, block.seq_hash, &run, offset, newly, tier, None);
            new_names += i64::from(added);
        }
        self.registry.add_blocks(slot, new_names);
        Outcome::Applied {
            unknown_removals: 0,
        }
    }

    /// Stores the longest prefix of `blocks` (at most [`SEGMENT`]) whose names are new to
    /// the worker and whose blocks lie in `run` itself from `hang` on (there already, or
    /// appended at its end); returns how many, and how many names that added.
    ///
    /// Three passes: the worker's name map is probed for all of them first (independent
    /// reads, whose misses overlap), keeping the free slot each new name goes to; then the
    /// run is locked once while the blocks are attached (a short hold: no name-map access
    /// under the lock, so readers of the run wait for little); then the names are given as
    /// [`RunsIndex::add_name`] gives them, each put in the slot kept for it (one probe per
    /// name in all).
    #[allow(clippy::too_many_arguments)]
    fn store_in_run(
        &self,
        state: &mut WorkerState,
        slot: u32,
        run: &Arc<Run>,
        hang: u32,
        blocks: &[Block],
        tier: Tier,
        touched: &mut bool,
    ) -> (usize, i64) {
        if run.is_root() {
            return (0, 0); // the root holds no blocks: every chain starts in a child
        }
        let segment = &blocks[..blocks.len().min(SEGMENT)];
        // Room for every name of the segment first: the free slots found below stay free
        // for them.
        state.names.reserve(segment.len());
        for block in segment.iter().take(PREFETCH_AHEAD) {
            state.names.prefetch(block.seq_hash);
        }
        // Where each new name goes in the map, found once (the names are put there below).
        let mut places = [0usize; SEGMENT];
        let mut fresh = 0;
        for (at, block) in segment.iter().enumerate() {
            if let Some(ahead) = segment.get(at + PREFETCH_AHEAD) {
                state.names.prefetch(ahead.seq_hash);
            }
            if block.seq_hash == 0 {
                break; // the map keeps that name aside: the general path stores it
            }
            match state.names.vacancy(block.seq_hash) {
                Ok(_) => break,
                Err(place) => places[at] = place,
            }
            fresh += 1;
        }
        if fresh == 0 {
            return (0, 0);
        }
        // Bit `i`: the worker held block `i` under no name before.
        let mut newly_held = 0u64;
        let mut taken = 0;
        {
            let mut guard = run.state.write();
            let state_of_run = &mut *guard;
            debug_assert!(!state_of_run.unlinked, "store in an unlinked run");
            let mut holder = None;
            for block in &blocks[..fresh] {
                let offset = hang + taken as u32;
                let Some(append) = state_of_run.lies_here(run, offset, block.local_hash) else {
                    break;
                };
                if !*touched {
                    self.registry
                        .touch(slot, run.start + offset, block.local_hash);
                    *touched = true;
                }
                if append {
                    state_of_run.locals.push(block.local_hash);
                }
                let holders = &mut state_of_run.holders;
                let newly = match holder {
                    Some(index) => holders.insert_at(index, offset),
                    None => {
                        let (index, newly) = holders.insert_indexed(slot, offset);
                        holder = Some(index);
                        newly
                    }
                };
                newly_held |= u64::from(newly) << taken;
                taken += 1;
            }
        }
        // Counted for all of them first (see `add_name`).
        state.count_names(run, taken as u32);
        let mut new_names = 0;
        for (at, block) in blocks[..taken].iter().enumerate() {
            let newly = newly_held >> at & 1 == 1;
            let offset = hang + at as u32;
            let place = Some(places[at]);
            let new_name =
                self.add_name(state, slot, block.seq_hash, run, offset, newly, tier, place);
            new_names += i64::from(new_name);
        }
        (taken, new_names)
    }

    /// Gives `name` to block `offset` of `run` on `tier` (a new name, or one that named
    /// another block); `newly` says whether the worker held the block under no other name
    /// before. Returns whether the name is new to the worker: the caller counts it
    /// ([`Registry::add_blocks`], once per chain rather than once per block).
    ///
    /// The name must be counted in `run` first ([`WorkerState::count_names`]): counted
    /// before the name's old block is released, since that one may be in this run.
    ///
    /// `place`: where [`NameMap::vacancy`] found the name's free slot, if it did, with only
    /// insertions into the map since; the name is put there without a second probe (or as
    /// any other name, if one of those insertions gave it already).
    ///
    /// [`Registry::add_blocks`]: crate::index::registry::Registry::add_blocks
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub(super) fn add_name(
        &self,
        state: &mut WorkerState,
        slot: u32,
        name: u64,
        run: &Arc<Run>,
        offset: u32,
        newly: bool,
        tier: Tier,
        place: Option<usize>,
    ) -> bool {
        let key = key(run.id, offset);
        if !newly {
            *state.extra_names.entry(key).or_insert(0) += 1;
        }
        let old = match place {
            Some(place) if state.names.insert_vacant(name, key, place) => None,
            _ => state.names.insert(name, key),
        };
        if let Some(old) = old {
            state.tiers.forget(name, &self.registry.tiers);
            self.release(state, slot, old);
        }
        state
            .tiers
            .stored(name, key, tier, false, &self.registry.tiers);
        old.is_none()
    }

    /// Drops one name's hold on the block with key `key`.
    fn release(&self, state: &mut WorkerState, slot: u32, key: u64) {
        let (id, offset) = place(key);
        let Some(Some(held)) = state.runs.get_mut(id) else {
            unreachable!("a named block's run is held");
        };
        held.names -= 1;
        match state.extra_names.entry(key) {
            // Another name still holds the block.
            MapEntry::Occupied(mut extra) => {
                *extra.get_mut() -= 1;
                if *extra.get() == 0 {
                    extra.remove();
                }
            }
            MapEntry::Vacant(_) => self.detach(&held.run, offset, slot),
        }
        if held.names == 0 {
            state.runs.remove(id);
        }
    }

    /// See [`crate::index::worker_blocks::WorkerBlocks::remove_name`].
    pub(super) fn remove_one(&self, state: &mut WorkerState, slot: u32, name: u64) -> bool {
        let Some(key) = state.names.remove(name) else {
            return false;
        };
        state.tiers.forget(name, &self.registry.tiers);
        self.registry.add_blocks(slot, -1);
        self.release(state, slot, key);
        true
    }

    /// See [`crate::index::worker_blocks::WorkerBlocks::clear`]: one pass per run held.
    pub(super) fn clear_all(&self, state: &mut WorkerState, slot: u32) {
        self.registry.add_blocks(slot, -(state.names.len() as i64));
        state.tiers.clear(&self.registry.tiers);
        let held = std::mem::take(state);
        // Deepest first, so that a run is unlinked right after the last run below it.
        let mut runs: Vec<Arc<Run>> = held.runs.into_values().flatten().map(|h| h.run).collect();
        runs.sort_unstable_by_key(|run| std::cmp::Reverse(run.start));
        for run in &runs {
            self.detach_run(run, slot);
        }
    }
}
