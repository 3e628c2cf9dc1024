//! A tree of runs: consecutive blocks of one prefix path stored once, shared by every
//! worker that holds any of them.
//!
//! A run holds the local hashes of consecutive positions (`run.rs`); each block's position
//! and prefix are implicit in the path from the root, so identities are exact by
//! construction and an engine's names are never trusted as prefixes. Each worker holding
//! blocks of a run records the prefix of the run it holds, plus a bitset only for offsets
//! past a gap (`holders.rs`): a worker whose tail was evicted, or that diverged, simply
//! holds a shorter prefix, and a hole moves what follows it into the bitset, so runs never
//! split. Another continuation hangs as a child run after any offset; a chain
//! stored past a run's end extends the run. Workers keep their names (several per block
//! allowed) in their own maps (`worker.rs`).
//!
//! Writes (`tree.rs`) lock a run before the runs below it; a query (`search.rs`) reads one
//! run at a time: one compare loop over the run's local hashes, then one check per worker
//! still matching. Consistency under concurrent writes comes from the shared read protocol
//! of `worker_blocks.rs`, with every change of a worker's bits recorded as a touch.
//! No walk recurses over depth, and dropping the index unlinks runs in a loop.

use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use super::registry::Registry;
use super::tiers::WorkerTiers;
use super::worker_blocks::{SlotDepth, WorkerBlocks};
use crate::identity::{mix, IDENTITY_SEED};
use crate::model::{Block, EventData, Outcome, Tier};
use crate::scratch::with_scratch;
use crate::snapshot::{DecodedWorker, Exporter};
use crate::Error;

mod children;
mod holders;
mod probe_map;
mod run;
mod search;
mod snapshot;
mod tree;
mod worker;

use run::{key, Run};

/// How many names of one event [`WorkerBlocks::warm`] prefetches.
const WARM_NAMES: usize = 8;
pub(crate) use worker::WorkerState;

/// See the module docs.
pub struct RunsIndex {
    root: Arc<Run>,
    next_run_id: AtomicU64,
    registry: Registry<WorkerState>,
}

impl std::fmt::Debug for RunsIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunsIndex").finish_non_exhaustive()
    }
}

impl Default for RunsIndex {
    fn default() -> Self {
        Self::new()
    }
}

impl RunsIndex {
    /// An empty index.
    pub fn new() -> Self {
        Self {
            root: Arc::new(Run::root()),
            next_run_id: AtomicU64::new(1),
            registry: Registry::new(),
        }
    }
}

impl Drop for RunsIndex {
    /// Takes the runs apart in a loop, so a long chain of runs is not dropped recursively.
    fn drop(&mut self) {
        let mut stack: Vec<Arc<Run>> = self.root.state.write().children.take_all();
        while let Some(run) = stack.pop() {
            stack.extend(run.state.write().children.take_all());
        }
    }
}

impl WorkerBlocks for RunsIndex {
    type State = WorkerState;

    fn registry(&self) -> &Registry<WorkerState> {
        &self.registry
    }

    fn store(
        &self,
        state: &mut WorkerState,
        slot: u32,
        parent: Option<u64>,
        blocks: &[Block],
        tier: Tier,
    ) -> Outcome {
        self.store_chain(state, slot, parent, blocks, tier)
    }

    fn remove_name(&self, state: &mut WorkerState, slot: u32, name: u64) -> bool {
        self.remove_one(state, slot, name)
    }

    fn clear(&self, state: &mut WorkerState, slot: u32) {
        self.clear_all(state, slot);
    }

    fn worker_tiers(state: &WorkerState) -> &WorkerTiers {
        &state.tiers
    }

    fn worker_tiers_mut(state: &mut WorkerState) -> &mut WorkerTiers {
        &mut state.tiers
    }

    /// Prefetches the name-map entries of the event's names: the first [`WARM_NAMES`] of
    /// them (a removal warms the rest as it goes).
    fn warm(&self, state: &WorkerState, data: &EventData) {
        let names = match data {
            EventData::Removed { seq_hashes, .. } => &seq_hashes[..],
            EventData::Stored { parent, blocks, .. } => {
                if let Some(parent) = parent {
                    state.names.prefetch(*parent);
                }
                for block in blocks.iter().take(WARM_NAMES) {
                    state.names.prefetch(block.seq_hash);
                }
                return;
            }
            _ => &[],
        };
        for &name in names.iter().take(WARM_NAMES) {
            state.names.prefetch(name);
        }
    }

    fn warm_name(&self, state: &WorkerState, name: u64) {
        state.names.prefetch(name);
    }

    fn key_of(&self, state: &WorkerState, name: u64) -> Option<u64> {
        state.names.get(name).copied()
    }

    fn identity_of_name(&self, state: &WorkerState, name: u64) -> Option<u64> {
        let spot = state.spot(*state.names.get(name)?);
        // The runs from the root down to the spot, and how many blocks of each lead to it.
        let mut path = vec![(Arc::clone(&spot.run), spot.offset + 1)];
        let mut run = Arc::clone(&spot.run);
        while !run.is_root() {
            let parent = run.parent.upgrade()?;
            path.push((Arc::clone(&parent), run.hang));
            run = parent;
        }
        let mut identity = IDENTITY_SEED;
        for (run, blocks) in path.iter().rev() {
            let state = run.state.read();
            for &local in state.locals.iter().take(*blocks as usize) {
                identity = mix(identity, local);
            }
        }
        Some(identity)
    }

    fn walk_held(
        &self,
        state: &WorkerState,
        slot: u32,
        local_hashes: &[u64],
        visit: &mut dyn FnMut(u64, u32),
    ) -> usize {
        self.walk_slot(slot, local_hashes, &mut |run, offset| {
            let key = key(run.id, offset);
            let extra = state.extra_names.get(&key).copied().unwrap_or(0);
            visit(key, 1 + extra);
        })
    }

    fn first_holders(&self, first_local: u64, out: &mut Vec<u32>) {
        self.first_holders_into(first_local, out);
    }

    fn search(&self, local_hashes: &[u64], out: &mut Vec<SlotDepth>) {
        with_scratch(&search::SCRATCH, |scratch| {
            self.search_with(local_hashes, scratch, out)
        });
    }

    /// The walk reads a slot's bits at positions up to its depth (the one it misses); bits
    /// further on in the same run may be read but never change the answer.
    fn read_reach(&self, depth: u32) -> u32 {
        depth
    }

    fn depth_of_slot(&self, slot: u32, local_hashes: &[u64]) -> usize {
        self.walk_slot(slot, local_hashes, &mut |_, _| {})
    }

    fn export_state(&self, state: &WorkerState, exporter: &mut Exporter) {
        self.export_snapshot(state, exporter);
    }

    fn restore_state(
        &self,
        state: &mut WorkerState,
        slot: u32,
        section: &DecodedWorker,
    ) -> Result<(), Error> {
        self.restore_snapshot(state, slot, section)
    }
}

#[cfg(test)]
mod tests;
