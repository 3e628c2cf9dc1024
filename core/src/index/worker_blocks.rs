//! What the positional and radix backends share: per-worker state kept in a [`Registry`], the
//! dispatch of every event onto three operations (store a chain, drop one name, clear), and
//! the read protocol that keeps answers exact while workers change.
//!
//! A type implementing [`WorkerBlocks`] is a [`Backend`]: the blanket implementation below
//! applies events, removes workers and answers queries the same way for every backend.
//!
//! # Reads during writes
//! A backend's search reads shared structures (levels, nodes) that writers change under
//! their own locks, while a worker's events may be half applied and slots are recycled. To
//! answer exactly anyway, a query runs in four steps:
//! 1. read the holders of the query's first block: the workers that may match at all;
//! 2. take a [`SlotSnapshot`] of each (its worker and version);
//! 3. run the backend's search, which reads the first block's holders again and reports a
//!    depth per slot;
//! 4. keep a slot's depth only if its version is even and unchanged since step 2: then the
//!    search saw one stable state of that one worker (see the registry's slot versions), and
//!    the depth is exact for it. Any other worker of step 2 is looked up again by its id and
//!    its depth computed from its own state under its lock ([`WorkerBlocks::depth_now`]).
//!
//! So each worker is reported with its exact depth at some instant during the call, a worker
//! left out held no prefix of the query at some instant during the call (at step 1, step 3,
//! or when it was looked up again), and no worker is reported twice.

use super::registry::{Entry, Registry, SlotInfo, SlotSnapshot};
use super::Backend;
use crate::model::{sort_matches, Block, EventData, Match, Outcome, RejectReason, Worker};
use crate::scratch::with_scratch;

/// A slot and the depth a search found for it.
pub(crate) type SlotDepth = (u32, u32);

/// A backend whose writes are per-worker operations on its own structure.
pub(crate) trait WorkerBlocks: Send + Sync + 'static {
    /// One worker's record of its blocks.
    type State: Default + Send + 'static;

    /// The workers and their states.
    fn registry(&self) -> &Registry<Self::State>;

    /// Stores a chain of blocks after `parent` (a name the worker holds) or at position 0.
    fn store(
        &self,
        state: &mut Self::State,
        slot: u32,
        parent: Option<u64>,
        blocks: &[Block],
    ) -> Outcome;

    /// Drops one name; false if the worker did not hold it.
    fn remove_name(&self, state: &mut Self::State, slot: u32, name: u64) -> bool;

    /// Drops every block of the worker.
    fn clear(&self, state: &mut Self::State, slot: u32);

    /// Writes into `out` (cleared first) the sorted slots holding the query's first block.
    fn first_holders(&self, first_local: u64, out: &mut Vec<u32>);

    /// Appends the depth of every slot holding the query's first block to `out` (unsorted),
    /// reading the shared structures without the workers' locks.
    fn search(&self, local_hashes: &[u64], out: &mut Vec<SlotDepth>);

    /// The depth of the query in one worker's state, read under that worker's lock.
    fn depth_now(&self, state: &Self::State, slot: u32, local_hashes: &[u64]) -> usize;

    /// Runs after every change of a worker, still under its lock and inside its version
    /// change; by default nothing.
    fn after_change(&self, _state: &Self::State, _info: &SlotInfo) {}
}

impl<B: WorkerBlocks> Backend for B {
    fn apply(&self, worker: Worker, data: &EventData) -> Outcome {
        // Only a Stored with a parent (and blocks) needs the worker to exist already.
        let create =
            !matches!(data, EventData::Stored { parent: Some(_), blocks } if !blocks.is_empty());
        let registry = self.registry();
        let outcome = registry.with_worker(worker, create, |entry: &mut Entry<B::State>| {
            registry.change(entry, |state, slot| {
                let outcome = match data {
                    // A Stored with no blocks is a no-op, whatever its parent.
                    EventData::Stored { blocks, .. } if blocks.is_empty() => Outcome::Applied {
                        unknown_removals: 0,
                    },
                    EventData::Stored { parent, blocks } => {
                        self.store(state, slot, *parent, blocks)
                    }
                    EventData::Removed { seq_hashes } => {
                        let unknown = seq_hashes
                            .iter()
                            .filter(|&&name| !self.remove_name(state, slot, name))
                            .count();
                        Outcome::Applied {
                            unknown_removals: unknown as u64,
                        }
                    }
                    EventData::Cleared => {
                        self.clear(state, slot);
                        Outcome::Applied {
                            unknown_removals: 0,
                        }
                    }
                };
                if let Some(info) = registry.slot_info(slot) {
                    self.after_change(state, info);
                }
                outcome
            })
        });
        // An unknown worker cannot hold the parent.
        outcome.unwrap_or(Outcome::Rejected(RejectReason::ParentNotFound))
    }

    fn remove_worker(&self, worker_id: u64) {
        for worker in self.registry().workers_with_id(worker_id) {
            self.remove_worker_dp_rank(worker);
        }
    }

    fn remove_worker_dp_rank(&self, worker: Worker) {
        self.registry()
            .remove(worker, |entry| self.clear(&mut entry.state, entry.slot));
    }

    fn find_matches_into(&self, local_hashes: &[u64], out: &mut Vec<Match>) {
        out.clear();
        let Some(&first_local) = local_hashes.first() else {
            return;
        };
        with_scratch(&READ_SCRATCH, |s: &mut ReadScratch| {
            // Steps 1 and 2 (see the module docs).
            self.first_holders(first_local, &mut s.slots);
            if s.slots.is_empty() {
                return;
            }
            let registry = self.registry();
            s.seen.clear();
            s.seen
                .extend(s.slots.iter().filter_map(|&slot| registry.snapshot(slot)));
            // Step 3.
            s.found.clear();
            self.search(local_hashes, &mut s.found);
            // Step 4.
            s.retry.clear();
            for &(slot, depth) in &s.found {
                let Ok(at) = s.seen.binary_search_by_key(&slot, |seen| seen.slot) else {
                    continue; // not a holder of the first block at step 1
                };
                let seen = s.seen[at];
                if registry.unchanged_since(&seen) {
                    push_match(out, seen.worker, depth as usize);
                } else if seen.was_stable() {
                    s.retry.push(seen.worker);
                } else {
                    // Changing at step 2: its id may be torn; look it up as it is now.
                    if let Some(now) = registry.snapshot(slot) {
                        s.retry.push(now.worker);
                    }
                }
            }
            if s.retry.is_empty() {
                sort_matches(out);
                return;
            }
            s.retry.sort_unstable();
            s.retry.dedup();
            for &worker in &s.retry {
                if out.iter().any(|m| m.worker() == worker) {
                    continue; // already reported from a stable read
                }
                let depth = registry.with_worker(worker, false, |entry| {
                    self.depth_now(&entry.state, entry.slot, local_hashes)
                });
                push_match(out, worker, depth.unwrap_or(0));
            }
            sort_matches(out);
        });
    }

    fn workers(&self) -> u64 {
        self.registry().len()
    }

    fn worker_blocks(&self) -> u64 {
        self.registry().worker_blocks()
    }
}

/// Per-thread buffers of the read protocol.
#[derive(Default)]
struct ReadScratch {
    slots: Vec<u32>,
    seen: Vec<SlotSnapshot>,
    found: Vec<SlotDepth>,
    retry: Vec<Worker>,
}

thread_local! {
    static READ_SCRATCH: std::cell::RefCell<ReadScratch> =
        std::cell::RefCell::new(ReadScratch::default());
}

/// Appends a worker's match unless its depth is 0.
fn push_match(out: &mut Vec<Match>, worker: Worker, depth: usize) {
    if depth > 0 {
        out.push(Match {
            worker_id: worker.worker_id,
            dp_rank: worker.dp_rank,
            depth: depth.min(u32::MAX as usize) as u32,
        });
    }
}

/// Appends a slot's depth unless it is 0.
#[inline]
pub(crate) fn push_depth(out: &mut Vec<SlotDepth>, slot: u32, depth: usize) {
    if depth > 0 {
        out.push((slot, depth.min(u32::MAX as usize) as u32));
    }
}
